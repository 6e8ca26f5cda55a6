"""``einsum``: the equation (or sublist form) is parsed into subscripts, operands are contracted pairwise
by one registered op whose kernel runs on NumPy (float16/bfloat16 in float32), and whose derivative is
einsum again with the output's subscripts swapped in.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach, dtype_name, FACTORY
from ..amp.state import AUTOCAST as _AUTOCAST, cast_args as _autocast_args
from .linalg import _const, _eye, _not_impl, _prod
from .linalg_products import _NP_NATIVE


# ---- einsum -------------------------------------------------------------------------------------------

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _einsum_single(x, sub, keep):
    """Reduce one operand to the letters in ``keep`` (taking diagonals of repeated letters)."""
    kept = "".join(c for i, c in enumerate(sub) if c in keep and c not in sub[:i])
    if kept == sub:
        return x, sub
    return np.einsum(f"{sub}->{kept}", x), kept


_PAIRS: dict = {}


def _einsum_pair(a, sa, b, sb, keep):
    """Contract two operands with one matmul: (batch, left, contracted) @ (batch, contracted, right).
    The transposes and shapes depend only on the subscripts and shapes: they are kept per those (a
    bounded cache), so a repeated call runs no string work."""
    key = (sa, sb, frozenset(keep), a.shape, b.shape)
    plan = _PAIRS.get(key)
    if plan is None:
        if len(_PAIRS) > 256:
            _PAIRS.clear()
        plan = _PAIRS[key] = _pair_plan(a, sa, b, sb, keep)
    if not plan:
        # an operand needs a diagonal or a reduction first (not kept: its plan is made after that)
        a, sa = _einsum_single(a, sa, keep | set(sb))
        b, sb = _einsum_single(b, sb, keep | set(sa))
        plan = _pair_plan(a, sa, b, sb, keep)
    pa_perm, pb_perm, sha, shb, shape, sub = plan
    r = np.matmul(a.transpose(pa_perm).reshape(sha), b.transpose(pb_perm).reshape(shb))
    return r.reshape(shape), sub


def _pair_plan(a, sa, b, sb, keep):
    """(a's and b's transposes, their matmul shapes, the result's shape and subscripts), or () when an
    operand has letters to reduce or repeat first."""
    if _einsum_single(a, sa, keep | set(sb))[1] != sa or _einsum_single(b, sb, keep | set(sa))[1] != sb:
        return ()
    batch = [c for c in sa if c in sb and c in keep]
    contr = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = {c: n for c, n in zip(sa, a.shape)}
    size.update({c: n for c, n in zip(sb, b.shape)})
    nb = _prod(size[c] for c in batch)
    nl, nc, nr = _prod(size[c] for c in left), _prod(size[c] for c in contr), _prod(size[c] for c in right)
    sub = "".join(batch + left + right)
    return (tuple(sa.index(c) for c in batch + left + contr), tuple(sb.index(c) for c in batch + contr + right),
            (nb, nl, nc) if batch else (nl, nc), (nb, nc, nr) if batch else (nc, nr),
            tuple(size[c] for c in sub), sub)


def _einsum_kernel(*xs, subs, out):
    dt = xs[0].dtype
    low = dt not in _NP_NATIVE
    if low:
        xs = [x.astype(np.float32) for x in xs]
    if len(xs) == 1:
        if dt.kind in "biu" and set(out) != set(subs[0]):
            # a one-operand reduction is a sum: integers and bools accumulate in int64, as torch.sum
            dt = np.dtype(np.int64)
            xs = [xs[0].astype(dt)]
        r = np.einsum(f"{subs[0]}->{out}", xs[0])
    else:
        cur, cs = xs[0], subs[0]
        for i in range(1, len(xs)):
            # letters still needed: the output's and those of operands not yet contracted
            keep = set(out).union(*[set(s) for s in subs[i + 1:]])
            cur, cs = _einsum_pair(cur, cs, xs[i], subs[i], keep)
        cur, cs = _einsum_single(cur, cs, set(out))
        r = cur.transpose([cs.index(c) for c in out]) if cs != out else cur
    r = np.asarray(r)
    if low:
        r = r.astype(dt)
    elif any(np.may_share_memory(r, x) for x in xs):
        r = r.copy()                                       # outputs never alias inputs
    return r.astype(dt, copy=False)


def _ones(n: int, dtype) -> Tensor:
    """A vector of ones: like ``_eye``, a constant of the shape only (a capturing compiler keeps it)."""
    t = _const(np.ones(n), dtype)
    if FACTORY[0] is not None:
        FACTORY[0](t._data)
    return t


def _einsum_bw(ctx, g):
    xs = ctx.inputs
    subs, out = ctx.attrs["subs"], ctx.attrs["out"]
    used = set(out).union(*[set(s) for s in subs])
    free = iter(c for c in _LETTERS if c not in used)
    grads = []
    for i, x in enumerate(xs):
        if ctx.edges[i] is None:
            grads.append(None)
            continue
        ops, osubs = [g], [out]
        for j, y in enumerate(xs):
            if j != i:
                ops.append(y)
                osubs.append(subs[j])
        avail = set(out).union(*[set(s) for j, s in enumerate(subs) if j != i])
        target = []
        seen = set()
        for c, n in zip(subs[i], x._data.shape):
            if c in seen:
                # a repeated letter (a diagonal): write through a Kronecker delta with a fresh letter
                f = next(free)
                ops.append(_eye(n, g._dtype))
                osubs.append(c + f)
                target.append(f)
                continue
            seen.add(c)
            if c not in avail:
                # a letter summed only in this operand: its gradient is broadcast along it
                ops.append(_ones(n, g._dtype))
                osubs.append(c)
                avail.add(c)
            target.append(c)
        grads.append(apply(EINSUM, tuple(ops), {"subs": tuple(osubs), "out": "".join(target)}))
    return tuple(grads)


EINSUM = register("einsum", _einsum_kernel, _einsum_bw, save="i")


def _einsum_node_name(args, attrs):
    """torch's einsum ends in a sum (one operand, letters summed out), a permute (one operand, none
    summed), the view after a bmm (operands with a contraction) or a mul (operands without one)."""
    subs, out = attrs["subs"], attrs["out"]
    summed = set().union(*map(set, subs)) - set(out)
    if len(subs) == 1:
        return "SumBackward1" if summed else "PermuteBackward0"
    return "ViewBackward0" if summed else "MulBackward0"


EINSUM.node_name = _einsum_node_name


def _parse_sublist_form(args):
    """einsum(op0, [0, 1], op1, [1, 2], [0, 2]) -> ("ab,bc->ac", [op0, op1])."""
    ops, parts = [], []

    def conv(sub):
        s = ""
        for v in sub:
            if v is Ellipsis:
                s += "..."
            elif isinstance(v, int) and 0 <= v < 52:
                s += _LETTERS[26 + v] if v < 26 else _LETTERS[v - 26]
            else:
                raise ValueError(f"einsum(): subscript in subscript list is not within the valid range [0, 52)")
        return s
    i = 0
    while i + 1 < len(args) and isinstance(args[i], Tensor):
        ops.append(args[i])
        parts.append(conv(args[i + 1]))
        i += 2
    eq = ",".join(parts)
    if i < len(args):
        eq += "->" + conv(args[i])
    return eq, ops


def _parse_operand(part, pos0):
    """Split one operand's subscripts into (letters before '...', has_ellipsis, letters after)."""
    if part.count("...") > 1 or part.replace("...", "").count("."):
        raise RuntimeError("einsum(): found '.' for operand that is not part of any ellipsis")
    pre, ell, post = part.partition("...")
    for k, c in enumerate(pre + post):
        if c not in _LETTERS:
            raise RuntimeError(f"einsum(): invalid subscript given at index {pos0 + k} in the equation string, "
                               f"subscripts must be in [a-zA-Z]")
    return pre, bool(ell), post


def einsum(*args) -> Tensor:
    """Einstein summation: ``einsum("ij,jk->ik", a, b)``, operands as varargs or one list, or the
    sublist form. Supports ellipsis, repeated subscripts (diagonals) and size-1 broadcasting."""
    if not args:
        raise TypeError("einsum(): must specify the equation string and at least one operand, or at least one "
                        "operand and its subscripts list")
    if isinstance(args[0], str):
        eq = args[0]
        ops = list(args[1][0:]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
    else:
        eq, ops = _parse_sublist_form(args)
    for o in ops:
        if not isinstance(o, Tensor):
            raise TypeError(f"einsum(): operands must be Tensors, got {type(o).__name__}")
    if _AUTOCAST[0] is not None and len(ops) > 1:        # contractions run as bmm, which autocasts
        ops = list(_autocast_args(*ops))
    key = (eq, tuple([o._data.shape for o in ops]))
    parsed_eq = _PARSED.get(key)
    if parsed_eq is None:
        parsed_eq = _parse_equation(eq, ops)
        if len(_PARSED) > 256:
            _PARSED.clear()
        _PARSED[key] = parsed_eq
    subs, out, wants = parsed_eq
    dt = ops[0]._dtype
    for o in ops[1:]:
        if o._dtype is not dt:
            raise RuntimeError(f"expected scalar type {dtype_name(dt)} but found {dtype_name(o._dtype)}")
    if dt is _dt.bool and len(ops) > 1:
        raise _not_impl("bmm", dt)
    # size-1 dims that broadcast: expand (a view; expand's backward sums the gradient back)
    xs = [x if want is None else x.expand(want) for want, x in zip(wants, ops)]
    return apply(EINSUM, tuple(xs), {"subs": subs, "out": out})


_PARSED: dict = {}     # (equation, operand shapes) -> what _parse_equation found (it depends on nothing else)


def _parse_equation(eq, ops):
    """(subscripts per operand, output subscripts, per operand the shape to expand it to or None) for
    ``eq`` on operands of these shapes; torch's errors for a bad equation."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    parts = lhs.split(",")
    if len(parts) > len(ops):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(parts) < len(ops):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if not ops:
        raise RuntimeError("einsum(): must provide at least one operand")
    parsed = []
    pos = 0
    for p in parts:
        parsed.append(_parse_operand(p, pos))
        pos += len(p) + 1
    used = set("".join(a + b for a, _, b in parsed)) | set(rhs.replace(".", ""))
    ell_n = 0
    for i, ((pre, ell, post), x) in enumerate(zip(parsed, ops)):
        k, nd = len(pre) + len(post), x._data.ndim
        if not ell and k != nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({k}) does not match the number "
                               f"of dimensions ({nd}) for operand {i} and no ellipsis was given")
        if ell and k > nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({k}) is more than the number "
                               f"of dimensions ({nd}) for operand {i}")
        if ell:
            ell_n = max(ell_n, nd - k)
    free = [c for c in _LETTERS if c not in used]
    if ell_n > len(free):
        raise RuntimeError("einsum(): too many dimensions: ember's einsum supports at most 52 subscripts")
    ell_letters = "".join(free[:ell_n])
    subs = []
    for (pre, ell, post), x in zip(parsed, ops):
        n = x._data.ndim - len(pre) - len(post) if ell else 0
        subs.append(pre + (ell_letters[ell_n - n:] if n else "") + post)
    # sizes per letter (repeats must agree; size 1 broadcasts across operands)
    size = {}
    for i, (s, x) in enumerate(zip(subs, ops)):
        local = {}
        for c, n in zip(s, x._data.shape):
            if c in local and local[c] != n:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {i} but the sizes don't match, "
                                   f"{n} != {local[c]}")
            local[c] = n
        for c, n in local.items():
            prev = size.get(c)
            if prev is None or prev == 1:
                size[c] = n
            elif n != prev and n != 1:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} which does not broadcast "
                                   f"with previously seen size {prev}")
    if arrow:
        opre, oell, opost = _parse_operand(rhs, len(lhs) + 2)
        for c in opre + opost:
            if c not in size:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   f"operand")
        seen = set()
        for c in opre + opost:
            if c in seen:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            seen.add(c)
        out = opre + (ell_letters if oell else "") + opost
    else:
        counts = collections.Counter("".join(a + b for a, _, b in parsed))
        out = ell_letters + "".join(c for c in _LETTERS if counts.get(c) == 1)
    wants = []
    for s, x in zip(subs, ops):
        want = tuple(size[c] for c in s)
        wants.append(None if want == x._data.shape else want)
    return tuple(subs), out, tuple(wants)


attach("einsum", einsum, method=False)
