"""ember.utils.cpp_extension: plain C (or ``extern "C"`` C++) functions compiled on the fly and called
with ember tensors and Python numbers.

    lib = load_inline("shrink", c_sources=SRC, functions=["softshrink_f32"])
    lib.softshrink_f32(x, out, x.numel(), 0.5)   # void softshrink_f32(const float* x, float* out, long n, float l)

The source is built by ``ember.compiler.build.compile_source``: the system compiler (``CC``), the same
flags and the same trusted disk cache as compiled graphs (a second load of the same source compiles
nothing; ``build.STATS`` counts). ``cpp_sources`` are compiled as C++ (``-x c++``) by the same driver;
the functions called from Python must have C linkage (``extern "C"``) and C types. There is no pybind11:
ember reads each function's signature from the source. Parameters:

- pointers to float, double, (u)int8/16/32/64_t, char, short, int, long, bool (const or not) take a CPU
  tensor of that dtype, contiguous; the function gets its data pointer. A tensor passed through a
  non-const pointer is taken as written (its version counter is bumped).
- int, long, long long, short, char, (u)intN_t, size_t, bool take a Python int (bool for bool);
  float and double take a Python int or float.
- the return type is void or one of the scalar types (returned as a Python number).

Wrong types raise TypeError naming the function, the parameter and what it expects; a non-contiguous,
non-CPU or read-only tensor raises RuntimeError.
"""
from __future__ import annotations

import ctypes
import os
import re
import types

import numpy as np

from ..tensor import Tensor

__all__ = ["load_inline", "load", "CExtension"]

CALL_RECORDERS: list = []   # fn(C function, converted arguments) after each call; ember.compile's C externs

# C type (normalised: words joined by one space) -> (ctypes type, NumPy dtype for pointers, kind)
_I, _F, _B = "int", "float", "bool"
_TYPES = {
    "float": (ctypes.c_float, np.float32, _F), "double": (ctypes.c_double, np.float64, _F),
    "char": (ctypes.c_char, np.int8, _I), "signed char": (ctypes.c_byte, np.int8, _I),
    "unsigned char": (ctypes.c_ubyte, np.uint8, _I),
    "int8_t": (ctypes.c_int8, np.int8, _I), "uint8_t": (ctypes.c_uint8, np.uint8, _I),
    "int16_t": (ctypes.c_int16, np.int16, _I), "uint16_t": (ctypes.c_uint16, np.uint16, _I),
    "int32_t": (ctypes.c_int32, np.int32, _I), "uint32_t": (ctypes.c_uint32, np.uint32, _I),
    "int64_t": (ctypes.c_int64, np.int64, _I), "uint64_t": (ctypes.c_uint64, np.uint64, _I),
    "short": (ctypes.c_short, np.int16, _I), "unsigned short": (ctypes.c_ushort, np.uint16, _I),
    "int": (ctypes.c_int, np.int32, _I), "unsigned": (ctypes.c_uint, np.uint32, _I),
    "unsigned int": (ctypes.c_uint, np.uint32, _I),
    "long": (ctypes.c_long, np.dtype(ctypes.c_long).type, _I),
    "unsigned long": (ctypes.c_ulong, np.dtype(ctypes.c_ulong).type, _I),
    "long long": (ctypes.c_longlong, np.int64, _I), "unsigned long long": (ctypes.c_ulonglong, np.uint64, _I),
    "size_t": (ctypes.c_size_t, np.uintp, _I), "ptrdiff_t": (ctypes.c_ssize_t, np.intp, _I),
    "int64": (ctypes.c_int64, np.int64, _I),
    "bool": (ctypes.c_bool, np.bool_, _B), "_Bool": (ctypes.c_bool, np.bool_, _B),
}
_ALIASES = {"long int": "long", "long long int": "long long", "unsigned long int": "unsigned long",
            "short int": "short", "signed int": "int", "signed": "int", "signed long": "long",
            "signed short": "short", "signed long long": "long long"}


class _Param:
    __slots__ = ("name", "ctype", "np", "kind", "pointer", "const", "cname")

    def __init__(self, name, cname, pointer, const):
        self.name, self.cname, self.pointer, self.const = name, cname, pointer, const
        self.ctype, self.np, self.kind = _TYPES[cname]

    def __repr__(self):
        return f"{'const ' if self.const else ''}{self.cname}{'*' if self.pointer else ''} {self.name}"


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def _norm_type(words) -> str:
    t = " ".join(words)
    return _ALIASES.get(t, t)


def _parse_param(fn, text, i):
    text = text.strip()
    words = re.findall(r"[A-Za-z_]\w*|\*", text)
    stars = words.count("*")
    words = [w for w in words if w != "*" and w not in ("restrict", "__restrict", "__restrict__", "volatile")]
    const = "const" in words
    words = [w for w in words if w != "const"]
    if len(words) < 2:
        raise TypeError(f"load_inline: function {fn}: parameter {i} ({text!r}) needs a type and a name")
    name, cname = words[-1], _norm_type(words[:-1])
    if cname not in _TYPES or stars > 1:
        raise TypeError(f"load_inline: function {fn}: parameter '{name}' has type {text!r}, which ember "
                        f"cannot pass (supported: pointers to or values of {', '.join(sorted(_TYPES))})")
    return _Param(name, cname, stars == 1, const)


_DEF = re.compile(r"(?:^|[;}\s])((?:[A-Za-z_]\w*[\s*]+)+?)([A-Za-z_]\w*)\s*\(([^()]*)\)\s*\{")
_SKIP = {"if", "for", "while", "switch", "return", "sizeof", "else", "do"}


def _signatures(source: str, functions) -> dict:
    """name -> (return _Param or None, [params]) for each function definition in ``source`` (those in
    ``functions``; all non-static ones when None)."""
    src = _strip_comments(source)
    found = {}
    for m in _DEF.finditer(src):
        ret_words = re.findall(r"[A-Za-z_]\w*|\*", m.group(1))
        name = m.group(2)
        if name in _SKIP or not ret_words or ret_words[-1] in _SKIP or name in found:
            continue
        if "static" in ret_words and functions is None:
            continue
        found[name] = (ret_words, m.group(3))
    names = list(found) if functions is None else list(functions)
    out = {}
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"load_inline: functions must be names (str), got {type(name).__name__}")
        if name not in found:
            raise RuntimeError(f"load_inline: function {name!r} is not defined in the sources (ember reads "
                               "the signatures of plain C function definitions)")
        ret_words, params = found[name]
        ret_words = [w for w in ret_words if w not in ("static", "inline", "extern", "const", "__attribute__")]
        if "*" in ret_words:
            raise TypeError(f"load_inline: function {name} returns a pointer; ember supports void or scalar "
                            "return types")
        rt = _norm_type(ret_words)
        if rt == "void":
            ret = None
        elif rt in _TYPES:
            ret = _Param("return", rt, False, False)
        else:
            raise TypeError(f"load_inline: function {name} returns {rt!r}, which ember cannot convert")
        ps = [p for p in params.split(",")] if params.strip() not in ("", "void") else []
        out[name] = (ret, [_parse_param(name, p, i) for i, p in enumerate(ps)])
    return out


def _dtype_name(npdt) -> str:
    from ..ops.registry import dtype_name
    from .. import dtypes as _dt
    for d in (_dt.float32, _dt.float64, _dt.float16, _dt.int8, _dt.uint8, _dt.int16, _dt.int32, _dt.int64, _dt.bool):
        if np.dtype(d.np) == np.dtype(npdt):
            return f"{d} ({dtype_name(d)})"
    return str(np.dtype(npdt))


def tensor_arg(name, p, a, device_type):
    """The data (ndarray or DeviceArray) of tensor ``a`` passed to pointer parameter ``p`` of function
    ``name``, after checking that it is a contiguous Tensor on ``device_type`` of dtype ``p.np``
    (TypeError / RuntimeError naming the parameter)."""
    if not isinstance(a, Tensor):
        raise TypeError(f"{name}(): argument '{p.name}' ({p!r}) must be a Tensor of dtype "
                        f"{_dtype_name(p.np)}, not {type(a).__name__}")
    d = a._data
    if (type(d) is np.ndarray) != (device_type == "cpu"):
        where = "a CPU tensor" if device_type == "cpu" else f"a tensor on an {device_type} device"
        raise RuntimeError(f"{name}(): argument '{p.name}' ({p!r}) must be {where}, got one on {a.device}")
    if d.dtype != np.dtype(p.np):
        raise TypeError(f"{name}(): argument '{p.name}' ({p!r}) expects a tensor of dtype "
                        f"{_dtype_name(p.np)}, got {a.dtype}")
    contiguous = d.flags.c_contiguous if isinstance(d, np.ndarray) else d.is_contiguous()
    if not contiguous:
        raise RuntimeError(f"{name}(): argument '{p.name}' ({p!r}) must be contiguous (call .contiguous())")
    return d


def scalar_arg(name, p, a):
    """The Python number ``a`` for scalar parameter ``p`` (``.name``, ``.kind`` int/float/bool, ``.np``,
    ``.cname``) of function ``name``: TypeError naming the parameter for a wrong type, OverflowError
    for an integer out of the C type's range. Shared with ``ember.opencl.compile_shader``."""
    if isinstance(a, Tensor):
        raise TypeError(f"{name}(): argument '{p.name}' ({p!r}) must be a Python "
                        f"{'float' if p.kind == _F else p.kind}, not a Tensor (use .item())")
    if p.kind == _B:
        if not isinstance(a, (bool, np.bool_)):
            raise TypeError(f"{name}(): argument '{p.name}' ({p!r}) must be bool, not {type(a).__name__}")
        return bool(a)
    if p.kind == _I:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"{name}(): argument '{p.name}' ({p!r}) must be int, not {type(a).__name__}")
        a = int(a)
        info = np.iinfo(p.np)
        if not info.min <= a <= info.max:
            raise OverflowError(f"{name}(): argument '{p.name}' ({p!r}) = {a} is out of range for "
                                f"{p.cname} [{info.min}, {info.max}]")
        return a
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}(): argument '{p.name}' ({p!r}) must be float, not {type(a).__name__}")
    return float(a)


class _CFunction:
    """One C function: checks and converts the arguments, then makes the ctypes call."""

    def __init__(self, fn, name, ret, params):
        self.fn = fn
        self.__name__ = name
        self.ret = ret
        self.params = params
        fn.argtypes = [ctypes.c_void_p if p.pointer else p.ctype for p in params]
        fn.restype = ret.ctype if ret is not None else None
        self.__doc__ = f"{ret.cname if ret else 'void'} {name}({', '.join(map(repr, params))})"

    def __repr__(self):
        return f"<C function {self.__doc__}>"

    def __call__(self, *args):
        name, params = self.__name__, self.params
        if len(args) != len(params):
            raise TypeError(f"{name}() takes {len(params)} arguments ({', '.join(map(repr, params))}), "
                            f"got {len(args)}")
        cargs, written = [], []
        for p, a in zip(params, args):
            if p.pointer:
                cargs.append(self._pointer(p, a))
                if not p.const:
                    written.append(a)
            else:
                cargs.append(self._scalar(p, a))
        res = self.fn(*cargs)
        if CALL_RECORDERS:
            for rec in CALL_RECORDERS:
                rec(self, cargs)
        for t in written:
            t._bump()
        if self.ret is not None and self.ret.ctype is ctypes.c_char:
            res = int.from_bytes(res, "little", signed=True)
        return res

    def _pointer(self, p, a):
        d = tensor_arg(self.__name__, p, a, "cpu")
        if not p.const and not d.flags.writeable:
            raise RuntimeError(f"{self.__name__}(): argument '{p.name}' ({p!r}) is written through a non-const "
                               "pointer but the tensor's memory is read-only")
        return d.__array_interface__["data"][0]

    def _scalar(self, p, a):
        return scalar_arg(self.__name__, p, a)


class CExtension(types.ModuleType):
    """What load_inline/load return: a module with one callable per C function (and ``_library``, the
    build's CompiledLibrary)."""


_CXX_EXT = (".cpp", ".cc", ".cxx", ".c++", ".C")


def _as_text(x) -> str:
    if x is None:
        return ""
    if isinstance(x, str):
        return x
    if isinstance(x, (list, tuple)) and all(isinstance(s, str) for s in x):
        return "\n".join(x)
    raise TypeError(f"load_inline: sources must be a str or a list of str, got {type(x).__name__}")


def _build(name, source, cxx, functions, extra_cflags, extra_ldflags):
    from ..compiler import build
    if not isinstance(name, str) or not name:
        raise TypeError(f"load_inline: name must be a non-empty str, got {name!r}")
    sigs = _signatures(source, functions)
    flags = list(extra_cflags or ())
    if cxx:
        # the same driver (CC) compiles C++ with -x c++; a later -std overrides build's -std=gnu11
        flags = ["-x", "c++", "-std=gnu++17", "-Wno-pedantic", *flags]
    flags += list(extra_ldflags or ())
    if cxx:
        flags += ["-lstdc++"]
    lib = build.compile_source(source, name=f"ext_{name}", extra_flags=tuple(flags))
    mod = CExtension(name)
    mod._library = lib
    for fname, (ret, params) in sigs.items():
        try:
            fn = lib.lib[fname]
        except AttributeError:
            raise RuntimeError(f"load_inline({name!r}): {fname} is not exported by the built library"
                               + (" (C++ functions need extern \"C\" linkage)" if cxx else "")) from None
        setattr(mod, fname, _CFunction(fn, fname, ret, params))
    return mod


def load_inline(name, cpp_sources=None, cuda_sources=None, functions=None, extra_cflags=None,
                extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, build_directory=None,
                verbose=False, with_cuda=None, is_python_module=True, with_pytorch_error_handling=True,
                keep_intermediates=True, use_pch=False, *, c_sources=None):
    """torch.utils.cpp_extension.load_inline for plain C functions: compile ``c_sources`` (C) or
    ``cpp_sources`` (C++, functions with extern "C" linkage), return a module whose attributes are the
    functions named in ``functions`` (all non-static definitions when None), called with tensors and numbers.
    ``build_directory`` is ignored: builds go to ember's kernel cache (EMBER_CACHE_DIR)."""
    if cuda_sources or with_cuda:
        raise RuntimeError("load_inline: ember has no CUDA; cuda_sources/with_cuda are not supported")
    if isinstance(functions, str):
        functions = [functions]
    if c_sources is not None and cpp_sources is not None:
        raise ValueError("load_inline: pass either c_sources or cpp_sources, not both")
    cxx = c_sources is None
    source = _as_text(cpp_sources if cxx else c_sources)
    if not source.strip():
        raise ValueError("load_inline: no source given (c_sources or cpp_sources)")
    flags = list(extra_cflags or ()) + [f"-I{p}" for p in (extra_include_paths or ())]
    return _build(name, source, cxx, functions, flags, extra_ldflags)


def load(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
         build_directory=None, verbose=False, with_cuda=None, is_python_module=True, is_standalone=False,
         keep_intermediates=True, *, functions=None):
    """torch.utils.cpp_extension.load for C/C++ files: the files are concatenated into one translation
    unit (all C, or all C++ by extension .cpp/.cc/.cxx)."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    texts, kinds = [], set()
    for s in sources:
        s = os.fspath(s)
        if s.endswith((".cu", ".cuh")):
            raise RuntimeError(f"load: {s}: ember has no CUDA")
        kinds.add(s.endswith(_CXX_EXT))
        with open(s, encoding="utf-8") as f:
            texts.append(f.read())
    if len(kinds) > 1:
        raise ValueError("load: sources mix C and C++ files; ember builds one translation unit")
    if not texts:
        raise ValueError("load: no sources")
    flags = list(extra_cflags or ()) + [f"-I{p}" for p in (extra_include_paths or ())]
    return _build(name, "\n".join(texts), kinds.pop(), functions, flags, extra_ldflags)
