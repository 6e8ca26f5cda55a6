"""ember.Tensor: a NumPy array plus torch's metadata (dtype, autograd fields, version counter).

Design: a tensor *is* a NumPy array view (``_data``). Views made by ember ops are NumPy views of the
same buffer, so writes go through exactly as in torch, and ``stride()`` is NumPy's byte strides
divided by the item size. Views share their base's version counter (``_vc``, created lazily) so that
an in-place write bumps the version every saved reference checks.

Hot fields live in ``__slots__``; rarely-set fields (``_grad``, ``_base``, hooks) live in the instance
dict with class-level defaults, so making a tensor assigns only four attributes. ``_base`` marks an
autograd view (of the root tensor); ``_storage_src`` marks an alias that shares memory without being a
view (``detach()``, ``.data``); together they define ``storage_offset`` and ``untyped_storage``.

Operators are not defined here: each op family in ``ember/ops`` registers its function and attaches
the method form to this class (see ``ember/ops/registry.py``).
"""
from __future__ import annotations

import weakref

import numpy as np

from . import dtypes as _dt

_BY_NP = _dt._BY_NP


class device:
    """torch.device: ``device("cpu")``, ``device("cpu", 0)``, ``device("cpu:0")``."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if not isinstance(type, str):
            raise TypeError(f"device() expected a string or device, got {type.__class__.__name__}")
        if ":" in type:
            type, idx = type.split(":", 1)
            if not (idx.isascii() and idx.isdigit()) or idx[:1] == "0" != idx:  # torch: no leading 0
                raise RuntimeError(f"Invalid device string: '{type}:{idx}'")
            index = int(idx)
        if type not in ("cpu", "cuda", "meta", "opencl", "mps"):
            if not type.replace("_", "a").isalpha():        # torch: a device type is letters and '_'
                raise RuntimeError(f"Invalid device string: '{type}'")
            raise RuntimeError(
                f"Expected one of cpu, cuda, opencl, meta device type at start of device string: {type}")
        self.type = type
        self.index = index

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __enter__(self):
        # as torch: factories inside the block make their tensors on this device
        _DEVICE_STACK.append(_DEFAULT_DEVICE[0])
        _DEFAULT_DEVICE[0] = _check_device(self)
        return self

    def __exit__(self, *a):
        _DEFAULT_DEVICE[0] = _DEVICE_STACK.pop()
        return False


CPU = device("cpu")
META = device("meta")       # tensors with shapes and no data (ember/devices/meta.py)
_DEVICE_STACK: list = []    # the default devices that ``with ember.device(...)`` blocks replaced


_DEFAULT_DEVICE = [CPU]     # ember.set_default_device


def _check_device(d) -> device:
    """The ``ember.device`` that ``d`` names (None: the default device), refused with a clear error when
    this machine does not have it. OpenCL devices come back with their index (``opencl:0``)."""
    if d is None:
        return _DEFAULT_DEVICE[0]
    if d is CPU:
        return CPU
    dd = d if isinstance(d, device) else device(d) if isinstance(d, str) else None
    if dd is None:
        raise TypeError(f"expected a device (str or ember.device), got {type(d).__name__}")
    if dd.type == "cpu" and dd.index in (None, 0):
        return CPU
    if dd.type == "meta":
        return META
    if dd.type == "opencl":
        from .devices import opencl
        if not opencl.is_available():
            raise RuntimeError(f"device '{dd}' is not available: {opencl.unavailable_reason()}")
        n = opencl.device_count()
        if (dd.index or 0) >= n:
            raise RuntimeError(f"device '{dd}' is not available: this machine has {n} OpenCL device(s)")
        return device("opencl", dd.index or 0)
    raise RuntimeError(f"device '{dd}' is not available: ember has the 'cpu' and 'opencl' devices")


def _on_device(t: "Tensor", d) -> "Tensor":
    """``t`` (just made on the CPU by a factory) moved to the device ``d`` returned by _check_device."""
    if d is CPU:
        return t
    from .devices.dispatch import to_device
    return to_device(t, d)


class Size(tuple):
    """torch.Size: a tuple of ints with ``numel()``.

        >>> ember.Size([2, 3]).numel()
        6
    """

    __slots__ = ()

    def __new__(cls, sizes=()):
        sizes = tuple(sizes)
        for i, s in enumerate(sizes):
            if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
                if hasattr(s, "__index__") and not isinstance(s, (float, bool)):
                    continue
                raise TypeError(f"ember.Size() takes an iterable of 'int' (item {i} is '{type(s).__name__}')")
        # (an int subclass stays itself: ember.compile's symbolic sizes are ints that remember their formula)
        return tuple.__new__(cls, (s if isinstance(s, int) else int(s) for s in sizes))

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"ember.Size([{', '.join(str(s) for s in self)}])"

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return tuple.__new__(Size, r) if isinstance(i, slice) else r

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __reduce__(self):
        return (Size, (tuple(self),))


_FLOAT_WARNED = [False]     # float() of a tensor that requires grad: warned once, as torch does

class Tensor:
    """A multi-dimensional array with torch's semantics (see the module docstring)."""

    __slots__ = ("_data", "_dtype", "_rg", "grad_fn", "__dict__", "__weakref__")

    # defaults for fields kept in the instance dict (set only when used)
    _grad = None
    _base = None          # the tensor this is a view of (autograd's notion of a view)
    _storage_src = None   # for non-view aliases (detach, .data): the tensor whose storage this shares
    _acc_node = None      # this leaf's AccumulateGrad node, made when next_functions asks for it
    _vc = None            # [version] shared with views; created on first need
    _output_nr = 0
    _views = None         # autograd's registry of live views (set in __dict__ by autograd.views; never pickled)
    _hooks = None         # tensor hooks of a leaf
    _post_acc_hooks = None
    _retains_grad = False
    _is_param = False
    __array_priority__ = 1000  # make ndarray OP tensor defer to Tensor's reflected operators

    def __new__(cls, *args, **kwargs):
        self = object.__new__(cls)
        self._rg = False
        self.grad_fn = None
        if cls is Tensor and args and not kwargs:
            # ember.Tensor([1, 2]) and Tensor(2, 3) as in torch (legacy constructor)
            if len(args) == 1 and not isinstance(args[0], int):
                arr = np.array(args[0], dtype=_dt.get_default_dtype().np)
            else:
                arr = np.empty(tuple(args), dtype=_dt.get_default_dtype().np)
            if _mem_track is not None:
                _mem_track(arr)
            self._data = arr
            self._dtype = _BY_NP[arr.dtype]
        elif cls is Tensor and not args:
            self._data = np.empty((0,), dtype=_dt.get_default_dtype().np)
            self._dtype = _dt.get_default_dtype()
        return self

    def __init__(self, *args, **kwargs):
        pass

    # ---- metadata -------------------------------------------------------------------------
    @property
    def dtype(self) -> _dt.dtype:
        return self._dtype

    @property
    def device(self) -> device:
        if type(self._data) is np.ndarray:
            return CPU
        from .devices.dispatch import device_of
        return device_of(self)

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_cpu(self) -> bool:
        return type(self._data) is np.ndarray

    @property
    def is_meta(self) -> bool:
        return type(self._data) is not np.ndarray and getattr(self._data, "is_meta", False)

    @property
    def layout(self):
        from ._layout import strided
        return strided

    @property
    def shape(self) -> Size:
        return tuple.__new__(Size, self._data.shape)

    def size(self, dim: int | None = None):
        """The shape as ``ember.Size``, or the size of one dimension."""
        if dim is None:
            return tuple.__new__(Size, self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    def stride(self, dim: int | None = None):
        """Strides in elements (NumPy's byte strides divided by the item size)."""
        a = self._data
        isz = a.itemsize
        if a.size == 0:
            st = _empty_strides(a.shape)
        elif type(a) is not np.ndarray:
            st = a.strides              # a device array's strides are in elements already
        else:
            st = tuple(s // isz for s in a.strides)
        if dim is None:
            return st
        return st[_wrap_dim(dim, self._data.ndim, "stride")]

    def storage_offset(self) -> int:
        """Offset (in elements) of this tensor's first element in its storage.

        A tensor made by an op owns its storage (offset 0); views and aliases (detach, ``.data``) sit
        at their byte distance from the tensor they were taken from, plus that tensor's offset."""
        owner = self._base if self._base is not None else self._storage_src
        if owner is None:
            return 0
        diff = self._data.__array_interface__["data"][0] - owner._data.__array_interface__["data"][0]
        return diff // self._data.itemsize + owner.storage_offset() * owner._data.itemsize // self._data.itemsize

    def _storage_root(self) -> "Tensor":
        """The tensor whose data starts this tensor's storage (for as_strided and storage views)."""
        t = self
        while True:
            owner = t._base if t._base is not None else t._storage_src
            if owner is None:
                return t
            t = owner

    def _is_view(self) -> bool:
        return self._base is not None

    def data_ptr(self) -> int:
        a = self._data
        if type(a) is not np.ndarray:
            return 0 if getattr(a, "is_meta", False) else a.block.buffer.int_ptr + a.offset
        return a.__array_interface__["data"][0]

    def untyped_storage(self) -> "UntypedStorage":
        """The memory this tensor is a view of (shared by all its views and aliases)."""
        return UntypedStorage(self._storage_root())

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def ndimension(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    def is_signed(self) -> bool:
        return self._dtype.is_signed

    def is_contiguous(self, memory_format=None) -> bool:
        a = self._data
        if memory_format is not None and getattr(memory_format, "name", None) != "contiguous_format":
            from ._memory_format import tensor_is_contiguous        # (channels_last...; refuses non-formats)
            return tensor_is_contiguous(self, memory_format)
        if type(a) is not np.ndarray:
            return a.is_contiguous()
        return a.flags.c_contiguous or a.size <= 1 or _c_contig(a)

    def is_shared(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False

    def get_device(self) -> int:
        a = self._data
        return -1 if type(a) is np.ndarray else a.device

    def _host(self) -> np.ndarray:
        """The values as a NumPy array: the data itself on the CPU, a copy from a device."""
        a = self._data
        if type(a) is np.ndarray:
            return a
        if getattr(a, "is_meta", False):
            raise a.no_data_error()
        from .devices import opencl
        return opencl.to_numpy(a)

    @property
    def _version(self) -> int:
        return 0 if self._vc is None else self._vc[0]

    def _get_vc(self):
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        return vc

    def _bump(self) -> None:
        vc = self._vc
        if vc is None:
            self._vc = [1]
        else:
            vc[0] += 1

    # ---- autograd fields -------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self.grad_fn is None and not self._dtype.grad_ok:
            # torch words the attribute form differently from requires_grad_()
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set whether autograd records operations on this (leaf) tensor; returns ``self``."""
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a "
                    "computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach().")
            return self
        if requires_grad and not self._dtype.grad_ok:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self._rg = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self):
        """The gradient accumulated by backward (None until then, and for non-leaves)."""
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '[{', '.join(map(str, value._data.shape))}]' to a "
                    f"tensor of size '[{', '.join(map(str, self._data.shape))}]'. Please ensure that the "
                    "gradient and the tensor are the same size")
            if value._dtype is not self._dtype:
                from .ops.registry import dtype_name
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{_C_NAMES[value._dtype.name]}' to a tensor "
                    f"with grad_dtype '{dtype_name(self._dtype)}'. The gradient must match the tensor's "
                    "grad_dtype (defaults to the tensor's dtype). You can set the tensor's grad_dtype "
                    "attribute with a specific dtype, or None to allow any dtype. Set grad_dtype with caution. "
                    "Diverging the dtypes of a tensor and its gradient may break downstream systems that "
                    "assume they match.")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    def retain_grad(self) -> None:
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        ref = weakref.ref(self)
        from .autograd.grad_mode import GRAD

        def _retain(g):
            t = ref()
            if t is not None:
                if t.grad is None:
                    t.grad = g.detach().clone() if GRAD[0] is False else g.clone()
                else:
                    t.grad = t.grad + g
            return None
        handle = self.grad_fn._add_tensor_hook(self._output_nr, _retain, retain=True)
        handle.node = self.grad_fn
        self._retain_handle = handle    # moved to the new node if this tensor is later modified in place

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def register_hook(self, hook):
        """Register ``hook(grad) -> Tensor | None`` run when this tensor's gradient is computed.

        On a leaf the hook sees the summed gradient before it is accumulated into ``.grad``; a returned
        tensor replaces the gradient. Returns a handle whose ``remove()`` unregisters the hook."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = {}
            key = object()
            self._hooks[key] = hook
            return _RemovableHandle(self._hooks, key)
        return self.grad_fn._add_tensor_hook(self._output_nr, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Register ``hook(tensor)`` run after a gradient was accumulated into this leaf's ``.grad``."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        key = object()
        self._post_acc_hooks[key] = hook
        return _RemovableHandle(self._post_acc_hooks, key)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        """Accumulate the gradient of this tensor into the leaves' ``.grad`` (see ``autograd.backward``)."""
        run = _BACKWARD[0] if _BACKWARD else _backward_fn()
        run((self,), None if gradient is None else (gradient,), retain_graph, create_graph, inputs=inputs)

    @property
    def data(self) -> "Tensor":
        """This tensor's values outside autograd: shares memory, but not history or version counter."""
        out = wrap(self._data, self._dtype)
        out._storage_src = self
        return out

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, not {type(value).__name__}")
        self._data = value._data
        self._dtype = value._dtype

    @property
    def output_nr(self) -> int:
        return self._output_nr

    # ---- conversion -------------------------------------------------------------------------
    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        a = self._host()
        return a.reshape(()).item() if self._dtype is not _dt.bfloat16 else float(a.reshape(()))

    def tolist(self):
        if self._dtype is _dt.bfloat16 or self._dtype is _dt.float16:
            return self._host().astype(np.float32).tolist()
        return self._host().tolist()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The NumPy array behind this tensor (shared memory: writes go both ways)."""
        if self._rg and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if self._dtype is _dt.bfloat16 and not force:
            raise TypeError("Got unsupported ScalarType BFloat16")
        if type(self._data) is not np.ndarray:
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        a = self._data
        if type(a) is not np.ndarray:
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first.")
        return a if dtype is None else a.astype(dtype)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __bool__(self) -> bool:
        n = self._data.size
        if n != 1:
            raise RuntimeError(f"Boolean value of Tensor with {'no values' if n == 0 else 'more than one value'} "
                               "is ambiguous")
        return bool(self._host().reshape(()))

    def __float__(self) -> float:
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        if self._rg and not _FLOAT_WARNED[0]:       # (torch warns once per process)
            _FLOAT_WARNED[0] = True
            import warnings
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
                          "behavior.\nConsider using tensor.detach() first.", UserWarning, stacklevel=2)
        return float(self.item())

    def __int__(self) -> int:
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __complex__(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return complex(self.item())

    def __index__(self) -> int:
        if self._dtype.category == 2 or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._host().reshape(()))

    def __contains__(self, element) -> bool:
        if isinstance(element, (Tensor, int, float, bool, np.number, np.bool_)):
            return bool((self == element).any().item())
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                           f"{type(element)}.")

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __reversed__(self):
        return iter(self.flip(0).unbind(0)) if self._data.ndim else iter(())

    def __repr__(self) -> str:
        from ._tensor_str import tensor_repr
        return tensor_repr(self)

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec) if spec else repr(self)

    def __reduce_ex__(self, proto):
        from .serialization import _reduce_tensor
        return _reduce_tensor(self)

    def __setstate__(self, state):
        pass

    def cpu(self, memory_format=None) -> "Tensor":
        if type(self._data) is np.ndarray:
            return self
        from .devices.dispatch import to_device
        return to_device(self, CPU)

    def opencl(self, device=None, non_blocking: bool = False) -> "Tensor":
        """This tensor on the OpenCL device ``device`` (an index or "opencl:N"; default 0)."""
        from .devices.dispatch import to_device
        d = f"opencl:{device or 0}" if device is None or isinstance(device, int) else device
        return to_device(self, d, non_blocking)

    def cuda(self, *a, **k):
        raise RuntimeError("ember has no CUDA device: use the 'cpu' device")

    def pin_memory(self) -> "Tensor":
        return self

    def share_memory_(self) -> "Tensor":
        return self

    def __dlpack__(self, stream=None):
        return self._data.__dlpack__()

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()


_BACKWARD: list = []    # ember.autograd.engine.backward, imported on the first backward()


def _backward_fn():
    from .autograd.engine import backward
    _BACKWARD.append(backward)
    return backward


_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
            "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
            "complex128": "c10::complex<double>"}


def _empty_strides(shape) -> tuple:
    # NumPy reports 0 strides for empty arrays; torch keeps contiguous strides (sizes of 0 count as 1)
    st = []
    acc = 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


class UntypedStorage:
    """The bytes behind a tensor and its views (read-only description: pointer, size, device)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: Tensor):
        self._owner = owner

    def data_ptr(self) -> int:
        return int(np.lib.array_utils.byte_bounds(self._owner._data)[0])

    def nbytes(self) -> int:
        lo, hi = np.lib.array_utils.byte_bounds(self._owner._data)
        return int(hi - lo)

    def size(self) -> int:
        return self.nbytes()

    __len__ = size

    def element_size(self) -> int:
        return 1

    @property
    def device(self) -> device:
        return CPU

    def __repr__(self):
        return f"UntypedStorage(data_ptr={self.data_ptr()}, nbytes={self.nbytes()}, device=cpu)"


def _c_contig(a: np.ndarray) -> bool:
    # torch ignores strides of size-1 dims when deciding contiguity
    expected = a.itemsize
    for size, st in zip(reversed(a.shape), reversed(a.strides)):
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


def _wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    n = ndim if ndim > 0 else 1
    if type(dim) is not int:
        dim = _dim_int(dim, op)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def _dim_int(dim, op: str = "") -> int:
    """A dim that is not a Python int: a NumPy int or a one-element integer tensor, never a float, bool or str."""
    if isinstance(dim, np.integer) or (isinstance(dim, Tensor) and dim._data.size == 1 and dim._dtype.category == 1):
        return int(dim)
    name = "Tensor" if isinstance(dim, Tensor) else type(dim).__name__
    raise TypeError(f"{op + '(): ' if op else ''}argument 'dim' must be int, not {name}")


class _RemovableHandle:
    """Returned by register_hook & co.: ``remove()`` unregisters the hook (also a context manager)."""

    __slots__ = ("_d", "_k", "node")
    _next_id = 0

    def __init__(self, d: dict, k):
        self._d = d
        self._k = k
        self.node = None

    @property
    def id(self):
        return id(self._k)

    def remove(self) -> None:
        self._d.pop(self._k, None)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.remove()


_object_new = object.__new__


_mem_track = None   # set by ember.memory while statistics are on: counts each new storage once


def wrap(arr: np.ndarray, dtype: _dt.dtype | None = None) -> Tensor:
    """Make a Tensor around an ndarray (no copy). The hot path of every op."""
    if _mem_track is not None:
        _mem_track(arr)
    t = _object_new(Tensor)
    t._data = arr
    t._dtype = dtype or _BY_NP[arr.dtype]
    t._rg = False
    t.grad_fn = None
    return t


# deepcopy (storage sharing kept across one deepcopy call) lives in its own module
from ._tensor_copy import tensor_deepcopy as _tensor_deepcopy  # noqa: E402  (it needs wrap, above)

Tensor.__deepcopy__ = _tensor_deepcopy
