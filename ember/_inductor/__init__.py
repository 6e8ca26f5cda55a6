"""``ember._inductor``: ``config``, the code-generation knobs programs written for torch._inductor set
(``torch._inductor.config.coordinate_descent_tuning = True``, ``.triton.unique_kernel_names``, ...).

They are accepted with torch's defaults and kept; ember's code generator does not read them (its own
choices are ``mode=`` of ember.compile and ``EMBER_*`` environment settings). ``fallback_random`` needs
nothing: ember's compiled random draws already equal eager ones for the same seed. Unknown names raise
AttributeError, so a typo is not silently kept.
"""


class _Settings:
    def __init__(self, where: str, kept: dict):
        object.__setattr__(self, "_where", where)
        object.__setattr__(self, "_kept", {k: (_Settings(f"{where}.{k}", v) if isinstance(v, dict) else v)
                                           for k, v in kept.items()})

    def __getattr__(self, name):
        kept = object.__getattribute__(self, "_kept")
        if name in kept:
            return kept[name]
        raise AttributeError(f"ember.{object.__getattribute__(self, '_where')} has no setting {name!r}")

    def __setattr__(self, name, value):
        if name not in self._kept or isinstance(self._kept[name], _Settings):
            raise AttributeError(f"ember.{self._where} has no setting {name!r}")
        self._kept[name] = value


config = _Settings("_inductor.config", {
    "coordinate_descent_tuning": False, "coordinate_descent_check_all_directions": False,
    "max_autotune": False, "max_autotune_gemm": False, "max_autotune_pointwise": False,
    "epilogue_fusion": True, "aggressive_fusion": False, "freezing": False, "fx_graph_cache": True,
    "autotune_local_cache": True, "force_fuse_int_mm_with_mul": False, "use_mixed_mm": True,
    "conv_1x1_as_mm": False, "shape_padding": True, "benchmark_kernel": False, "fallback_random": False,
    "split_reductions": True, "cpp_wrapper": False, "debug": False, "compile_threads": 2,
    "triton": {"unique_kernel_names": True, "cudagraphs": False, "cudagraph_trees": True,
               "descriptive_names": "original_aten"},
    "cpp": {"threads": -1, "simdlen": None, "enable_kernel_profile": False},
    "trace": {"enabled": False},
})
