"""nn.Parameter and nn.Buffer: tensors that modules register as learnable state."""
from __future__ import annotations

from .._host_tensor import HostDataTensor
from ..tensor import Tensor, wrap


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter when assigned as an attribute.

    Shares memory with the tensor it wraps; ``requires_grad`` defaults to True.
    """

    _is_param = True

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True, **state):
        # ``Parameter(t, **old_param.__dict__)`` (accelerate's init_empty_weights re-wraps parameters so):
        # ember keeps private fields (``_vc``, ``_grad``, hooks) in ``__dict__``; those are not arguments
        unknown = [k for k in state if not k.startswith("_")]
        if unknown:
            raise TypeError(f"Parameter.__new__() got an unexpected keyword argument '{unknown[0]}'")
        if data is None:
            from ..ops.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, got {type(data).__name__}")
        p = object.__new__(cls)
        p._data = data._data
        p._dtype = data._dtype
        p.grad_fn = None
        p._rg = False
        p._vc = data._get_vc()
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, *args, **kwargs):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        from ..serialization import _reduce_tensor
        return _reduce_tensor(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        new = Parameter(wrap(self._data.copy(), self._dtype), self._rg)
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new


class _UninitializedUseError(ValueError):
    """The ValueError torch raises when an op meets an uninitialized parameter (a subclass, so that
    ``ember.compile`` can tell it apart and run a lazy module's first call eagerly)."""


class _UninitializedData:
    """The data of an uninitialized parameter or buffer: it has a dtype and no shape; any op that reaches
    it raises torch's ValueError (see ``UninitializedTensorMixin``)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype

    @property
    def shape(self):
        self._refuse("an op reading its shape")

    ndim = size = shape

    def _refuse(self, what):
        raise _UninitializedUseError(
            f"Attempted to use an uninitialized parameter in {what}. This error happens when you are using a "
            "`LazyModule` or explicitly manipulating `ember.nn.parameter.UninitializedParameter` objects. When "
            "using LazyModules Call `forward` with a dummy batch to initialize the parameters before calling "
            "ember functions")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._refuse(name)

    def __array__(self, *a, **k):
        self._refuse("conversion to an array")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self._refuse(ufunc.__name__)

    def __array_function__(self, func, types, args, kwargs):
        self._refuse(func.__name__)

    def __getitem__(self, key):
        self._refuse("indexing")


class UninitializedTensorMixin(HostDataTensor):
    """A parameter or buffer whose shape is not known yet (lazy modules): it keeps a dtype and
    ``requires_grad``, converts dtype with ``to``/``float``/``double``/``half``, and ``materialize(shape)``
    turns it, in place, into a ``cls_to_become`` of that shape (the same object: optimizers and modules
    holding it see the new tensor)."""

    cls_to_become = Tensor

    def materialize(self, shape, device=None, dtype=None) -> None:
        from ..ops.creation import empty
        new = empty(tuple(shape), dtype=dtype or self._dtype, device=device)
        self._data = new._data
        self._dtype = new._dtype
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
            "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
            "`forward` to initialize the parameters before accessing their attributes.")

    def size(self, dim=None):
        return self.shape

    def dim(self) -> int:
        return self.shape

    def numel(self) -> int:
        return self.shape

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
                           "initialize the parameters before calling `module.share_memory()`.")

    def to(self, *args, **kwargs):
        from .. import dtypes as _dt
        dtype = kwargs.get("dtype")
        for a in args:
            if isinstance(a, _dt.dtype):
                dtype = a
        if dtype is not None and dtype.is_floating_point:
            self._dtype = dtype
            self._data = _UninitializedData(dtype)
        return self

    def float(self, memory_format=None):
        from .. import dtypes as _dt
        return self.to(_dt.float32)

    def double(self, memory_format=None):
        from .. import dtypes as _dt
        return self.to(_dt.float64)

    def half(self, memory_format=None):
        from .. import dtypes as _dt
        return self.to(_dt.float16)

    def cpu(self, memory_format=None):
        return self

    def detach(self):
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, proto):
        return (type(self), (self._rg,))

    def __deepcopy__(self, memo):
        new = type(self)(self._rg, dtype=self._dtype)
        memo[id(self)] = new
        return new


def _uninitialized(cls, requires_grad, dtype):
    from .. import dtypes as _dt
    t = object.__new__(cls)
    t._dtype = dtype or _dt.get_default_dtype()
    t._data = _UninitializedData(t._dtype)
    t.grad_fn = None
    t._rg = bool(requires_grad)
    return t


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """torch.nn.parameter.UninitializedParameter: a Parameter of a lazy module before its first forward."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return _uninitialized(cls, requires_grad, dtype)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """torch.nn.parameter.UninitializedBuffer: a buffer of a lazy module before its first forward."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        t = _uninitialized(cls, requires_grad, dtype)
        t.persistent = persistent
        return t


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module (``persistent`` flag)."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            from ..ops.creation import empty
            data = empty(0)
        b = object.__new__(cls)
        b._data = data._data
        b._dtype = data._dtype
        b.grad_fn = None
        b._rg = data._rg
        b.persistent = persistent
        return b

    def __init__(self, *a, **k):
        pass


def is_lazy(p) -> bool:
    return isinstance(p, UninitializedTensorMixin)
