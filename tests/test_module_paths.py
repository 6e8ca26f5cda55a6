"""torch's module paths in ember: every class ember implements is importable where torch defines it, and
every class ember defines in the packages laid out as torch's sits at a path torch has.

The first direction is what user code and torch's pickles need (``from torch.nn.modules.batchnorm import
_BatchNorm``, ``torch.nn.modules.linear Linear`` inside a whole-model pickle); the second is what
``ember.save`` relies on when it writes ``ember.X`` as ``torch.X`` (ember/serialization/_writer.py).
"""
import importlib
import inspect
import pkgutil

import pytest
import torch

import ember

# torch packages walked file by file, and where ember keeps the names of what it implements from them
ROOTS = {
    "torch.nn.modules": "ember.nn",
    "torch.optim": "ember.optim",
    "torch.optim.lr_scheduler": "ember.optim.lr_scheduler",
    "torch.utils.data": "ember.utils.data",
    "torch.nn.utils": "ember.nn.utils",
    "torch.nn.parameter": "ember.nn.parameter",
    "torch.nn.parallel": "ember.nn.parallel",
    "torch.distributions": "ember.distributions",
    "torch.nn.init": "ember.nn.init",
}
_SKIP_PARTS = ("datapipes", "_multi_tensor", "_functional", "__main__")


def _submodules(name):
    pkg = importlib.import_module(name)
    mods = [pkg]
    if hasattr(pkg, "__path__"):
        for info in pkgutil.walk_packages(pkg.__path__, name + "."):
            if any(p in info.name for p in _SKIP_PARTS):
                continue
            try:
                mods.append(importlib.import_module(info.name))
            except ImportError:  # an optional dependency of torch's (not ember's concern)
                continue
    return mods


def _is_member(o):
    return inspect.isclass(o) or inspect.isfunction(o)


def _ember_classes(root):
    """name -> object for every class (public or a private base) and function ember defines under ``root``."""
    out = {}
    for mod in _submodules(root):
        for n, o in vars(mod).items():
            if _is_member(o) and o.__module__.startswith("ember") and not n.startswith("__"):
                out.setdefault(n, o)
    return out


def _torch_cases():
    cases = []
    for troot, eroot in ROOTS.items():
        implemented = _ember_classes(eroot)
        for tmod in _submodules(troot):
            for n, o in vars(tmod).items():
                if (n in implemented and not n.startswith("__") and getattr(o, "__module__", None) == tmod.__name__
                        and (inspect.isclass(o) or (inspect.isfunction(o) and not n.startswith("_")))):
                    cases.append((tmod.__name__, n, eroot))
    return sorted(set(cases))


CASES = _torch_cases()


def test_the_walk_covers_the_families():
    files = {m.rsplit(".", 1)[-1] for m, _, _ in CASES}
    for f in ("activation", "linear", "container", "sparse", "rnn", "transformer", "dropout", "conv", "pooling",
              "normalization", "batchnorm", "instancenorm", "padding", "loss", "flatten", "pixelshuffle",
              "upsampling", "distance", "fold", "channelshuffle", "module", "sgd", "adam", "adamw", "lr_scheduler",
              "dataset", "sampler", "dataloader", "parameter", "parametrize", "data_parallel", "normal"):
        assert f in files, f"no torch class from a file named {f} was checked"
    assert len(CASES) > 200


@pytest.mark.parametrize("tmod,name,eroot", CASES, ids=[f"{m}.{n}" for m, n, _ in CASES])
def test_torch_path_exists_in_ember(tmod, name, eroot):
    emod_name = "ember" + tmod[len("torch"):]
    emod = importlib.import_module(emod_name)
    assert hasattr(emod, name), f"{emod_name}.{name} missing (torch has {tmod}.{name})"
    obj, tobj = getattr(emod, name), getattr(importlib.import_module(tmod), name)
    assert _is_member(obj) and obj.__module__.startswith("ember") and obj.__name__ == tobj.__name__, obj
    # where torch's package re-exports this very object, ember's re-exports the same object as well
    troot = next(r for r in ROOTS if tmod == r or tmod.startswith(r + "."))
    if getattr(importlib.import_module(troot), name, None) is getattr(importlib.import_module(tmod), name):
        public = getattr(importlib.import_module(eroot), name, None)
        assert public is obj, f"{eroot}.{name} is {public}, not {emod_name}.{name}"


# classes ember defines in the mirrored packages that torch has no twin for (or keeps elsewhere)
# torch: torch.Generator, torch._utils.ExceptionWrapper, and torch.nn.attention.SDPBackend is a C class whose
# own path (torch.nn.attention._SDPBackend) is no attribute of that module
EMBER_ONLY = {"Generator", "ExceptionWrapper", "SDPBackend"}


def _ember_defined():
    seen, out = set(), []
    for root in ("ember.nn", "ember.optim", "ember.utils.data", "ember.distributions"):
        for mod in _submodules(root):
            for n, o in vars(mod).items():
                if (inspect.isclass(o) and not n.startswith("_") and o.__module__ == mod.__name__
                        and id(o) not in seen and n not in EMBER_ONLY):
                    seen.add(id(o))
                    out.append((o.__module__, o.__qualname__))
    return sorted(out)


DEFINED = _ember_defined()


@pytest.mark.parametrize("emod,qual", DEFINED, ids=[f"{m}.{q}" for m, q in DEFINED])
def test_ember_class_sits_at_torchs_path(emod, qual):
    """``ember.save`` writes ``ember.a.b.C`` as ``torch.a.b.C``: torch must have that exact path."""
    tmod_name = "torch" + emod[len("ember"):]
    tmod = importlib.import_module(tmod_name)
    t = tmod
    for part in qual.split("."):
        t = getattr(t, part)
    assert inspect.isclass(t) and t.__name__ == qual.rsplit(".", 1)[-1]
    assert f"{t.__module__}.{t.__qualname__}" == f"{tmod_name}.{qual}", \
        f"torch defines {qual} in {t.__module__}, ember in {emod}"


def test_functional_names_and_torch_c_nn_table():
    """ember.nn.functional's functions carry the package name (as torch's do), and the writer's table of
    torch._C._nn builtins is exactly torch's for the functions ember has."""
    import torch.nn.functional as TF
    import ember.nn.functional as EF
    from ember.serialization._writer import _TORCH_C_NN
    for n in dir(EF):
        o = getattr(EF, n)
        if not n.startswith("_") and inspect.isfunction(o) and o.__module__.startswith("ember.nn.functional"):
            assert o.__module__ == "ember.nn.functional", n
    want = {n for n in dir(TF) if not n.startswith("_") and getattr(getattr(TF, n), "__module__", None) == "torch._C._nn"}
    assert want == set(_TORCH_C_NN)


def test_old_ember_paths_still_import():
    from ember.nn.modules.normalization import BatchNorm2d, InstanceNorm1d, _BatchNorm  # noqa: F401
    from ember.nn.modules.pixelshuffle import ChannelShuffle
    from ember.nn.modules.transformer import MultiheadAttention
    from ember.nn.modules.parallel import DataParallel
    import ember.nn as nn
    assert BatchNorm2d is nn.BatchNorm2d and ChannelShuffle is nn.ChannelShuffle
    assert MultiheadAttention is nn.MultiheadAttention and DataParallel is nn.DataParallel
    assert ember.nn.modules.activation.MultiheadAttention is nn.MultiheadAttention
    assert ember.optim.adamw.AdamW is ember.optim.AdamW
