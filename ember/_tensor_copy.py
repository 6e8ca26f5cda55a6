"""``copy.deepcopy`` of tensors (``Tensor.__deepcopy__``, attached by ember/tensor.py).

A deepcopy makes leaf copies with storage of their own, but tensors that shared one storage before
share one new storage after: the storage root of each view or alias is copied once per deepcopy call
(found through the ``memo`` dict) and every tensor is rebuilt as the same view of that copy.
"""
from __future__ import annotations

import copy

import numpy as np

from .tensor import Tensor, wrap


def tensor_deepcopy(self, memo):
    """A leaf copy with its own storage; tensors sharing storage are copied to share a new one."""
    if id(self) in memo:
        return memo[id(self)]
    if self.grad_fn is not None:
        raise RuntimeError(
            "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at "
            "the moment.  If you were attempting to deepcopy a module, this may be because of a "
            "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001")
    new = type(self).__new__(type(self))
    if getattr(self._data, "is_meta", False):
        new._data, storage = self._data.copy(), None
    elif type(self._data) is not np.ndarray:
        from .devices import opencl           # a device copy of its own (views are not shared yet)
        new._data = opencl.empty(self._data.shape, self._data.dtype, self._data.device, op="deepcopy")
        opencl.copy_(new._data, self._data)
        storage = None
    else:
        new._data, storage = _deepcopy_array(self, memo)
    if storage is not None:
        new._storage_src = storage
    elif type(self._data) is np.ndarray and self._storage_root() is self and self._data.flags.c_contiguous:
        # later views of self copied in this deepcopy share new's storage
        memo.setdefault(("ember.storage", id(self)), new)
        memo.setdefault(id(memo), []).append(self)
    new._dtype = self._dtype
    new._rg = self._rg
    new.grad_fn = None
    for k, v in self.__dict__.items():
        if k in ("_vc", "_base", "_grad", "_storage_src", "_acc_node", "_hooks", "_post_acc_hooks", "_views",
                 "_retain_handle", "_retains_grad"):
            continue
        new.__dict__[k] = copy.deepcopy(v, memo)
    if self._grad is not None:
        new._grad = self._grad.__deepcopy__(memo)
    memo[id(self)] = new
    return new


def _deepcopy_array(t: "Tensor", memo: dict):
    """Copy ``t``'s data. Tensors sharing one storage share one new storage: the storage (the tensor at
    the root of ``_base``/``_storage_src``) is copied once per deepcopy call, and ``t`` is rebuilt as
    the same view of the copy. Returns (array, storage tensor or None)."""
    a = t._data
    root_t = t._storage_root()
    r = root_t._data
    key = ("ember.storage", id(root_t))
    storage = memo.get(key)
    if root_t is t:
        if storage is not None:                 # a view of t was copied first: reuse its storage
            return storage._data, None
        return a.copy(order="K"), None
    if r.dtype != a.dtype or not r.flags.c_contiguous:
        return a.copy(order="K"), None
    if storage is None:
        storage = memo[key] = wrap(r.copy(), root_t._dtype)
        memo.setdefault(id(memo), []).append(root_t)   # keep the id valid while memo lives
    off = (a.__array_interface__["data"][0] - r.__array_interface__["data"][0]) // a.itemsize
    arr = np.lib.stride_tricks.as_strided(storage._data.reshape(-1)[off:], a.shape, a.strides)
    return arr, storage
