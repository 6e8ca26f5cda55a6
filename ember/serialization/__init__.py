"""ember.save / ember.load: PyTorch's zip checkpoint format, read and written without torch.

A checkpoint (``torch.save`` since 1.6) is an uncompressed zip archive::

    <archive>/data.pkl                 pickle (protocol 2) of the object; tensors point at storages
    <archive>/.format_version          "1"
    <archive>/.storage_alignment       "64" (every record's data starts on a 64-byte boundary)
    <archive>/byteorder                "little" or "big"
    <archive>/data/<key>               the raw bytes of storage <key>
    <archive>/version                  "3\\n"
    <archive>/.data/serialization_id   a 40-digit id

Inside ``data.pkl`` a tensor is ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size,
stride, requires_grad, backward_hooks)`` where ``storage`` is a persistent id
``('storage', torch.<X>Storage, key, location, numel)``. Tensors that share memory share one storage,
so views survive a round trip in both directions. ember writes torch's global names itself (a small
pickler that emits ``GLOBAL torch._utils _rebuild_tensor_v2`` without importing torch) and maps
them back to its own implementations when loading.

Whole-model pickles (``torch.save(model)``) cross in both directions. Loading maps every ``torch.X``
global to ``ember.X`` (ember's classes live in the files torch has them in; tests/test_module_paths.py
walks them), plus torch's C namespaces (``torch._C._nn.gelu``, ``torch._C._VariableFunctionsClass``).
Saving writes ember's classes and functions of the packages laid out as torch's under torch's names
(``ember.nn.modules.linear Linear`` -> ``torch.nn.modules.linear Linear``), so ``torch.load`` builds torch
modules; module state (``_parameters``, ``_buffers``, ``_modules``, ``training``, the hook dicts) has
torch's layout, and RNNs add the ``_flat_weights`` torch's ``__setstate__`` reads.

Loading is safe by default (``weights_only=True``): the unpickler resolves only an allowlist of
globals (the tensor rebuild functions, storage types, dtypes, ``torch.Size``, ``torch.device``,
``collections.OrderedDict``, a few builtins) plus what the user allows with :func:`add_safe_globals`,
and it refuses to call, build or extend anything else, as torch's weights-only unpickler does.

``save_safetensors`` / ``load_safetensors`` read and write the safetensors format through the
``safetensors`` package's NumPy API.

Where it lives: ``_reader.py`` (load, the zip reader and its size checks), ``_writer.py`` (save, the
pickler, the zip writer), ``_unpickler.py`` (the allowlist, the safe globals and the unpicklers),
``_storage.py`` (storages and the rebuild functions torch's globals map to), ``_plain_pickle.py``
(``pickle.dumps`` of a tensor), ``_safetensors_io.py``, ``_files.py`` (paths, atomic writes) and
``_limits.py`` (reading the limits below at call time).
"""
from __future__ import annotations

__all__ = [
    "save", "load", "serialize", "deserialize", "add_safe_globals", "get_safe_globals",
    "clear_safe_globals", "safe_globals", "get_unsafe_globals_in_checkpoint", "save_safetensors",
    "load_safetensors", "CheckpointStorage", "DEFAULT_PROTOCOL",
]

# Bounds on what a checkpoint can make ember allocate beyond its own size on disk. They are module
# attributes: raise them (``ember.serialization.MAX_INFLATE_RATIO = 2000``) to load a file you trust.
# torch.save and ember.save write every member uncompressed, so their files never come near them.
MAX_INFLATE_RATIO = 100  # a compressed zip member may inflate to this many times its stored bytes ...
INFLATE_ALLOWANCE = 64 << 20  # ... or to this many bytes, whichever is more
MAX_CALL_ALLOCATION = 64 << 20  # bytes one call of an allowlisted global (bytearray(n), Tensor(n)) may allocate

# private names: Tensor.__reduce_ex__ and Parameter use _reduce_tensor; plain pickles call
# _rebuild_tensor_from_bytes; tests reach into the writer
from ._plain_pickle import _reduce_tensor, _rebuild_tensor_from_bytes  # noqa: F401
from ._reader import deserialize, get_unsafe_globals_in_checkpoint, load
from ._safetensors_io import load_safetensors, save_safetensors
from ._storage import CheckpointStorage
from ._unpickler import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from ._writer import (DEFAULT_PROTOCOL, _CheckpointPickler, _SaveContext, _TensorRebuild, _ZipWriter, _g,  # noqa: F401
                      _write_checkpoint, save, serialize)

# the public names (and the rebuild function plain pickles call) carry this module's name: reprs, and
# pickles that name ember.serialization._rebuild_tensor_from_bytes, stay as before the package split
for _obj in (save, load, serialize, deserialize, add_safe_globals, get_safe_globals, clear_safe_globals,
             safe_globals, get_unsafe_globals_in_checkpoint, save_safetensors, load_safetensors, CheckpointStorage,
             _rebuild_tensor_from_bytes):
    _obj.__module__ = __name__
del _obj
