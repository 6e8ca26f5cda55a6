"""Helpers the layer modules share (torch keeps the tuple helpers at ``torch.nn.modules.utils``): an int or
a sequence becomes an n-tuple (``_single``, ``_pair``, ``_triple``, ``_quadruple``), a per-dim padding
becomes ``F.pad``'s order (``_reverse_repeat_tuple``), and ``_weight_and_bias`` registers a layer's
uninitialised parameters."""
from __future__ import annotations


def _ntuple(n: int, name: str = "parse"):
    """A function turning ``x`` into an n-tuple: a list or tuple as it is, anything else repeated."""
    def parse(x):
        if isinstance(x, (list, tuple)):
            return tuple(x)
        return (x,) * n
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """(a, b) -> (b, b, a, a) for n=2: F.pad's order (last dim first) of a per-dim padding."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _weight_and_bias(module, weight_shape, bias: bool, bias_size: int, device, dtype) -> None:
    """Register ``weight`` of ``weight_shape`` and, if ``bias``, ``bias`` of ``bias_size`` (else None),
    uninitialised: the caller's ``reset_parameters`` fills them."""
    from ..parameter import Parameter
    from ...ops.creation import empty
    module.weight = Parameter(empty(weight_shape, dtype=dtype, device=device))
    module.register_parameter("bias", Parameter(empty(bias_size, dtype=dtype, device=device)) if bias else None)


def consume_prefix_in_state_dict_if_present(state_dict, prefix: str) -> None:
    """Strip ``prefix`` (``"module."`` of a DataParallel/DDP checkpoint) from the keys of ``state_dict`` in
    place, and from its ``_metadata`` keys. A renamed entry moves to the end of the dict, as in torch."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    meta = getattr(state_dict, "_metadata", None)
    if meta is not None:
        bare = prefix.replace(".", "")
        for key in list(meta.keys()):
            if key and (key == bare or key.startswith(prefix)):
                meta[key[len(prefix):]] = meta.pop(key)
