"""Op families. Importing a family registers its ops and attaches their function and method forms."""
import importlib

FAMILIES = ["elementwise", "shape", "copies", "reduce", "creation", "inplace", "unary", "unary_piecewise", "binary", "compare",
            "reduce_order", "reduce_scan", "reduce_softmax", "reduce_values", "reduce_norm",
            "index", "index_masked", "index_scatter", "index_dim",
            "linalg", "linalg_products", "linalg_einsum", "linalg_parts", "linalg_solvers", "linalg_decompositions",
            "linalg_norms", "linalg_lu", "linalg_householder", "shape_split", "shape_join", "shape_rearrange",
            "random_ops", "stats", "stats_histogram",
            "complex_ops", "signal", "foreach", "misc_ops", "fused_optim"]


def _load_all():
    for name in FAMILIES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise


def __getattr__(name):
    # ember.ops.<namespace>: the custom ops registered with ember.library.custom_op("<namespace>::...")
    import sys
    lib = sys.modules.get("ember.library")
    ns = lib._namespace(name) if lib is not None and not name.startswith("_") else None
    if ns is None:
        raise AttributeError(f"module 'ember.ops' has no attribute '{name}'")
    return ns
