"""``ember.opencl.compile_shader``: OpenCL C kernels written by the user, called with ember tensors
(``torch.mps.compile_shader`` for the OpenCL device).

    lib = ember.opencl.compile_shader('''
    __kernel void softshrink(__global float* out, __global const float* x, float l) {
        size_t i = get_global_id(0);
        out[i] = x[i] > l ? x[i] - l : (x[i] < -l ? x[i] + l : 0.0f);
    }''')
    lib.softshrink(out, x, 0.5)                 # threads = out.numel() (the first tensor argument)
    lib.softshrink(out, x, 0.5, threads=n, group_size=64)

How it works
    The source is built by ``ember.devices.opencl.build`` (the program cache: memory, then the trusted
    disk cache of driver binaries, so another process loading the same source builds nothing) for the
    device the library is used on (device 0 at once, so compile errors surface in ``compile_shader``).
    Each ``__kernel`` function's parameter list is read from the source; calling ``lib.<kernel>``
    checks every argument against it: a ``__global``/``__constant`` pointer takes a contiguous tensor
    on the OpenCL device whose dtype matches the pointee (``float`` float32, ``half`` float16, ``int``
    int32, ``long`` int64, ``uchar`` uint8, ...), a scalar parameter a Python number (range-checked),
    a ``__local`` pointer an int (the bytes of local memory to reserve). A wrong dtype, a CPU tensor, a
    non-contiguous tensor or a wrong number raises naming the kernel and the argument.

    Tensors are views into allocator blocks at a byte offset, and OpenCL sub-buffers need aligned
    origins, so the source is rewritten before building: each pointer parameter ``T* x`` becomes
    ``T* __ember_base_x, long __ember_off_x`` and the body starts with ``T* x = __ember_base_x +
    __ember_off_x;``. The rewrite adds no line, so the compiler's line numbers are the user's.

    The kernel is enqueued on the device's one in-order queue with ``ember.devices.opencl.launch``, so
    it is ordered with every other op, ``ember.opencl.Event`` brackets it, and the profilers record it
    as a device kernel under its function name (nested in the op that called it, e.g. a custom op).
    Tensors passed through non-const pointers count as written (their version counters are bumped).
    ``threads`` (an int or up to three sizes) is the global work size, by default the number of
    elements of the first tensor argument; ``group_size`` the work-group size (None: the driver picks).
"""
from __future__ import annotations

import re
import types

import numpy as np

from ember.tensor import Tensor
from ember.utils.cpp_extension import scalar_arg, tensor_arg

__all__ = ["compile_shader", "ShaderLibrary", "ShaderKernel"]

_I, _F = "int", "float"
# OpenCL C scalar type -> (NumPy dtype, kind)
_TYPES = {
    "float": (np.float32, _F), "double": (np.float64, _F), "half": (np.float16, _F),
    "char": (np.int8, _I), "uchar": (np.uint8, _I), "unsigned char": (np.uint8, _I),
    "short": (np.int16, _I), "ushort": (np.uint16, _I), "unsigned short": (np.uint16, _I),
    "int": (np.int32, _I), "uint": (np.uint32, _I), "unsigned int": (np.uint32, _I), "unsigned": (np.uint32, _I),
    "long": (np.int64, _I), "ulong": (np.uint64, _I), "unsigned long": (np.uint64, _I),
}
_SPACES = {"__global": "global", "global": "global", "__constant": "constant", "constant": "constant",
           "__local": "local", "local": "local", "__private": "private", "private": "private"}
_QUALIFIERS = {"const", "restrict", "__restrict", "volatile"}
_KERNEL = re.compile(r"(?:\b__kernel|\bkernel)\s+(?:__attribute__\s*\(\([^;{]*?\)\)\s*)*void\s+([A-Za-z_]\w*)"
                     r"\s*\(([^()]*)\)\s*\{")


class _Param:
    """One kernel parameter: ``space`` (global/constant/local/private), pointer or value, the pointee
    or value type ``cname`` and its NumPy dtype."""
    __slots__ = ("name", "cname", "np", "kind", "pointer", "const", "space", "text")

    def __init__(self, name, cname, pointer, const, space, text):
        self.name, self.cname, self.pointer, self.const, self.space, self.text = \
            name, cname, pointer, const, space, text
        self.np, self.kind = _TYPES[cname]

    def __repr__(self):
        return " ".join(self.text.split())


def _blank_comments(src: str) -> str:
    """``src`` with comments replaced by spaces (newlines kept, so positions and lines still match)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, src, flags=re.S)


def _parse_param(kernel, text, i) -> _Param:
    words = re.findall(r"[A-Za-z_]\w*|\*", text)
    stars = words.count("*")
    space = "private"
    for w in words:
        if w in _SPACES:
            space = _SPACES[w]
    const = "const" in words
    core = [w for w in words if w != "*" and w not in _SPACES and w not in _QUALIFIERS]
    if len(core) < 2:
        raise TypeError(f"compile_shader: kernel {kernel}: parameter {i} ({' '.join(text.split())!r}) needs a "
                        "type and a name")
    name, cname = core[-1], " ".join(core[:-1])
    if cname not in _TYPES or stars > 1 or (stars == 1) != (space != "private"):
        raise TypeError(f"compile_shader: kernel {kernel}: parameter '{name}' ({' '.join(text.split())}) is not "
                        "supported: ember passes __global/__constant pointers to (and values of) "
                        f"{', '.join(sorted(_TYPES))}, and __local pointers")
    return _Param(name, cname, stars == 1, const, space, text)


def _rewrite(source: str):
    """(the source to build, {kernel: [params]}): pointer parameters get an element-offset parameter
    (see the module docstring); no line is added or removed."""
    src = _blank_comments(source)
    kernels, out, pos = {}, [], 0
    for m in _KERNEL.finditer(src):
        name, plist = m.group(1), m.group(2)
        texts = [] if plist.strip() in ("", "void") else plist.split(",")
        params = [_parse_param(name, t, i) for i, t in enumerate(texts)]
        if name in kernels:
            raise RuntimeError(f"compile_shader: kernel {name} is defined twice")
        kernels[name] = params
        new_texts, prologue = [], []
        for p, t in zip(params, texts):
            if p.pointer and p.space in ("global", "constant"):
                base = f"__ember_base_{p.name}"
                # the parameter's own text with the name swapped (its newlines kept), then the offset
                head, _, tail = t.rpartition(p.name)
                new_texts.append(f"{head}{base}{tail.rstrip()}, long __ember_off_{p.name}"
                                 + "\n" * tail.count("\n"))
                decl = " ".join(head.split())
                prologue.append(f"{decl} {p.name} = {base} + __ember_off_{p.name};")
            else:
                new_texts.append(t)
        out.append(src[pos:m.start(2)])
        out.append(",".join(new_texts) if texts else plist)
        out.append(src[m.end(2):m.end()])
        out.append(" ".join(prologue))
        pos = m.end()
    out.append(src[pos:])
    if not kernels:
        raise RuntimeError("compile_shader: the source defines no kernel (a '__kernel void name(...) { ... }' "
                           "function)")
    return "".join(out), kernels


_LOG_LINE = re.compile(r"(?:^|\s)(?:\S*?):(\d+):(\d+):\s*(?:(?:fatal )?error:\s*)?(.*)")


def _compile_error(source: str, log: str) -> RuntimeError:
    """The compiler's message with the offending source line (and a caret) for each error it names."""
    lines = source.split("\n")
    out = []
    for raw in log.splitlines():
        if "error" not in raw and "warning" not in raw:
            continue
        m = _LOG_LINE.search(raw)
        if not m:
            continue
        ln, col, msg = int(m.group(1)), int(m.group(2)), m.group(3).strip()
        kind = "warning" if "warning" in raw and "error" not in raw else "error"
        out.append(f"line {ln}:{col}: {kind}: {msg}")
        if 1 <= ln <= len(lines):
            out.append(f"    {lines[ln - 1]}")
            out.append("    " + " " * max(col - 1, 0) + "^")
    detail = "\n".join(out) if out else log.strip()
    return RuntimeError(f"compile_shader: the OpenCL compiler rejected the source:\n{detail}")


class ShaderKernel:
    """One ``__kernel`` of a :class:`ShaderLibrary`, called with tensors and numbers."""

    def __init__(self, library, name, params):
        self._lib = library
        self.__name__ = name
        self.params = params
        # one entry per OpenCL argument: None for memory objects, the NumPy type of scalars (a pointer
        # is a buffer and its element offset)
        self._arg_dtypes = []
        for p in params:
            if p.pointer and p.space != "local":
                self._arg_dtypes += [None, np.int64]
            else:
                self._arg_dtypes.append(None if p.pointer else p.np)
        self.__doc__ = f"__kernel void {name}({', '.join(map(repr, params))})"

    def __repr__(self):
        return f"<OpenCL kernel {self.__doc__}>"

    def __call__(self, *args, threads=None, group_size=None):
        from ember.devices import opencl as rt
        name, params = self.__name__, self.params
        if len(args) != len(params):
            raise TypeError(f"{name}() takes {len(params)} arguments ({', '.join(map(repr, params))}), "
                            f"got {len(args)}")
        cl_args, written, device, first = [], [], None, None
        for p, a in zip(params, args):
            if p.pointer and p.space == "local":
                import pyopencl
                cl_args.append(pyopencl.LocalMemory(self._local_bytes(p, a)))
            elif p.pointer:
                d = tensor_arg(name, p, a, "opencl")
                if device is None:
                    device, first = d.device, a
                elif d.device != device:
                    raise RuntimeError(f"{name}(): argument '{p.name}' is on opencl:{d.device} but earlier "
                                       f"arguments are on opencl:{device}: pass tensors of one device")
                if not p.const:
                    written.append(a)
                cl_args += [d, np.int64(d.element_offset)]
            else:
                cl_args.append(p.np(scalar_arg(name, p, a)))
        if device is None:
            raise TypeError(f"{name}(): no tensor argument, so no device to run on")
        gs = self._sizes("threads", threads, first.numel() if threads is None else None)
        ls = None if group_size is None else self._sizes("group_size", group_size, None)
        if ls is not None:
            if len(ls) != len(gs):
                raise ValueError(f"{name}(): group_size {ls} and threads {gs} have different numbers of dims")
            bad = [i for i, (g, l) in enumerate(zip(gs, ls)) if l == 0 or g % l]
            if bad:
                raise ValueError(f"{name}(): threads {gs} must be a multiple of group_size {ls} in every dim "
                                 "(OpenCL 1.2 work groups are uniform): round threads up and guard the index "
                                 "in the kernel")
        prg = self._lib._program(device)
        rt.launch(prg, name, gs, ls, cl_args, device=device)
        for t in written:
            t._bump()

    def _sizes(self, what, v, default):
        if v is None:
            v = default
        vals = (v,) if isinstance(v, (int, np.integer)) else tuple(v) if isinstance(v, (tuple, list)) else None
        if (vals is None or not 1 <= len(vals) <= 3 or
                any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0 for x in vals)):
            raise TypeError(f"{self.__name__}(): {what} must be a non-negative int or a list of 1 to 3 of "
                            f"them, got {v!r}")
        return tuple(int(x) for x in vals)

    def _local_bytes(self, p, a) -> int:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or a <= 0:
            raise TypeError(f"{self.__name__}(): argument '{p.name}' ({p!r}) takes the number of bytes of local "
                            f"memory to reserve (a positive int), not {a!r}")
        return int(a)


class ShaderLibrary(types.SimpleNamespace):
    """What ``compile_shader`` returns: one :class:`ShaderKernel` attribute per ``__kernel``."""

    def __init__(self, source: str, built: str, kernels: dict):
        super().__init__(**{k: ShaderKernel(self, k, ps) for k, ps in kernels.items()})
        object.__setattr__(self, "_source", source)
        object.__setattr__(self, "_built", built)
        object.__setattr__(self, "_programs", {})

    def __getattr__(self, name):
        raise AttributeError(f"the shader library has no kernel {name!r} (kernels: "
                             f"{', '.join(k for k in vars(self) if not k.startswith('_'))})")

    def __repr__(self):
        return f"<ember.opencl.ShaderLibrary kernels={[k for k in vars(self) if not k.startswith('_')]}>"

    def _program(self, device: int):
        prg = self._programs.get(device)
        if prg is None:
            from ember.devices import opencl as rt
            try:
                prg = rt.build(self._built, device=device)
            except RuntimeError as e:
                raise _compile_error(self._source, str(e)) from None
            for name, k in vars(self).items():
                if isinstance(k, ShaderKernel):
                    # pyopencl packs scalars with a generated invoker once it knows their types (setting
                    # them one by one without is ~100x slower); launch uses this same cl.Kernel object
                    rt._runtime(device).kernel(prg, name).set_scalar_arg_dtypes(k._arg_dtypes)
            self._programs[device] = prg
        return prg


def compile_shader(source: str) -> ShaderLibrary:
    """Build OpenCL C ``source`` and return a library whose kernels are attributes called with tensors
    and numbers (``lib.softshrink(out, x, 0.5, threads=None, group_size=None)``); see the module
    docstring. Compile errors raise RuntimeError with the compiler's message and the source line."""
    if not isinstance(source, str):
        raise TypeError(f"compile_shader(): source must be a str, not {type(source).__name__}")
    from ember.devices import opencl as rt
    if not rt.is_available():
        raise RuntimeError(f"compile_shader: no OpenCL device: {rt.unavailable_reason()}")
    built, kernels = _rewrite(source)
    lib = ShaderLibrary(source, built, kernels)
    lib._program(0)
    return lib
