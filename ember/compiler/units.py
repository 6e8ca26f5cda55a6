"""Split a generated graph source into translation units that the C compiler builds in parallel.

Why: one big translation unit is one compiler process, and it is most of a cold compile (the small
GPT's training step: 65 kernel functions, ~1.7 s of gcc -O3 spread evenly over them, ~35 ms each).
``build.compile_source`` compiles a list of units at the same time (as many processes as this process
may use cores) and links them into one library, so the wall time divides by the cores.

How: ``native`` renders one source whose shared head (the primitives, OpenMP, BLAS and GEMM preludes)
ends with :data:`HEAD_END`. The kernel functions after it (``static void kernN(...) { ... }``, the
format ``render_c.render_program`` writes; a function is moved only when its braces balance) are dealt
to units 1.. by size; each of those gets the head and its kernels, made hidden non-static functions;
unit 0 keeps the rest (the entry points, timing tables, extern glue) with a prototype in place of each moved
kernel. Units after the first define ``EM_UNIT_EXTERN``, so a head's data (the GEMM pointer) is defined
once. The split depends only on the source, never on the core count: the cache key is the same on
every machine and under any ``taskset``.
"""
from __future__ import annotations

import re

__all__ = ["HEAD_END", "UNIT_CHARS", "MAX_UNITS", "ENTRY_FLAGS", "Unit", "split"]

HEAD_END = "/* ember: end of the head every translation unit repeats (ember.compiler.units) */"
UNIT_CHARS = 12000      # about this much kernel text per unit (~0.4 s of gcc -O3 here)
MAX_UNITS = 5      # unit 0 (the entries) and up to four kernel units

# unit 0 holds the entries: straight-line calls of the kernels (hundreds in a training step), no loops.
# gcc -O3 spends 1.2-1.5 s of CPU on them for the small GPT's step, the longest unit of the build;
# ENTRY_FLAGS build them in a third of that, and a call runs the same kernels (their own units keep -O3).
# Only when no loop is left in unit 0 (see split)
ENTRY_FLAGS = ("-O0",)


class Unit(str):
    """A translation unit's text; ``cflags`` are added after the library's flags when it is compiled
    (``build.compile_source`` reads them; a later ``-O`` wins)."""

    def __new__(cls, text: str, cflags=()):
        u = super().__new__(cls, text)
        u.cflags = tuple(cflags)
        return u


# a kernel: its head line, then its text up to the first line that is a lone "}" (found in two searches:
# one lazy pattern over the whole text spent most of a split's time)
_KERNEL_HEAD = re.compile(r"^static void (kern\d+)\(([^)]*)\) \{\n", re.M)
_KERNEL_END = re.compile(r"\n\}$", re.M)
_HIDDEN = '__attribute__((visibility("hidden"))) void'


def _kernels(body: str) -> list:
    """(definition text, name, params, span) of the kernel functions in ``body`` whose braces balance and
    whose text appears once (one pass over ``body``)."""
    out, seen = [], {}
    at = 0
    while True:
        m = _KERNEL_HEAD.search(body, at)
        if m is None:
            break
        e = _KERNEL_END.search(body, m.end())
        if e is None:
            break
        start, at = m.start(), e.end()
        text = body[start:at]
        if text.count("{") == text.count("}"):
            seen[text] = seen.get(text, 0) + 1
            out.append((text, m.group(1), m.group(2), (start, at)))
    return [k for k in out if seen[k[0]] == 1]


def split(source: str):
    """``source`` itself (a str) when it is small or has no head marker, else a list of units."""
    at = source.find(HEAD_END)
    if at < 0:
        return source
    cut = at + len(HEAD_END)
    head, body = source[:cut] + "\n", source[cut:]
    kernels = _kernels(body)
    size = sum(len(k[0]) for k in kernels)
    n = -(-size // UNIT_CHARS)
    if n < 2:
        return source
    # unit 0 keeps the entries and no kernel: a static kernel there is inlined into the entry calling it,
    # and gcc then optimizes the two together (measured on the small GPT's step: its entries alone 0.13 s,
    # with a quarter of the kernels 0.84 s). The kernels go to the other units, largest first into the
    # lightest: the kernel units are about equal, so cores finish them together
    n = min(MAX_UNITS - 1, n) + 1
    load = [0] * n
    mine: list = [[] for _ in range(n)]
    for k in sorted(kernels, key=lambda k: -len(k[0])):
        u = load.index(min(load[1:]), 1)
        load[u] += len(k[0])
        mine[u].append(k)
    units = []
    for u in range(1, n):
        if not mine[u]:
            continue
        defs = "\n\n".join(_HIDDEN + k[0][len("static void"):] for k in sorted(mine[u], key=_order))
        units.append("#define EM_UNIT_EXTERN 1\n" + head + "\n" + defs + "\n")
    # unit 0: the body with a prototype in place of each moved kernel (every kernel moved; in one pass)
    pieces, at = [], 0
    for text, name, params, (start, end) in kernels:
        pieces.append(body[at:start])
        pieces.append(f"{_HIDDEN} {name}({params});")
        at = end
    pieces.append(body[at:])
    body = "".join(pieces)
    # (a loop left in unit 0, one that could not be moved or extern glue, keeps the library's flags)
    loops = _has_loop(body)
    return [Unit(head + body, () if loops else ENTRY_FLAGS)] + units


def _has_loop(text: str) -> bool:
    """Whether ``text`` holds a ``for (`` or ``while (`` that is not the end of a longer name (found with
    str.find: a regular expression for it took 3-8 ms on a training step's loop-free entries)."""
    for word in ("for", "while"):
        at = text.find(word)
        while at >= 0:
            end = at + len(word)
            if (at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_")) and _LOOP_TAIL.match(text, end):
                return True
            at = text.find(word, end)
    return False


_LOOP_TAIL = re.compile(r"\s*\(")


def _order(k) -> int:
    return int(k[1][len("kern"):])
