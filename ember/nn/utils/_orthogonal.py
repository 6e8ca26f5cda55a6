"""``parametrizations.orthogonal``: keep a weight (or a batch of them) orthogonal -- orthonormal columns,
or rows when the matrix is wide -- as torch does.

The stored tensor X maps to an orthogonal Q by one of three maps: ``"matrix_exp"`` (Q = exp(A) with A =
X - X^T from X's lower triangle), ``"cayley"`` ((I - A/2)^{-1} (I + A/2)) or ``"householder"`` (the product
of the reflectors stored below X's diagonal, with tau = 2 / (1 + |v|^2), signed by X's diagonal). A tall
or wide matrix is padded to a square one (exp, Cayley) or uses its reflectors (Householder), and a wide one
is handled transposed.

With ``use_trivialization=True`` (the default) the module keeps a ``base`` buffer, an orthogonal matrix
made from the assigned weight (its QR's Q, signed so R's diagonal is positive; a tall weight is completed
with random columns first), and the stored tensor starts at -I: the weight is ``base @ map(X)``, which
is ``base`` until an optimizer moves X. Without trivialization, assigning a weight stores its compact
QR (Householder map only).
"""
from __future__ import annotations

from ...tensor import Tensor
from ...autograd.grad_mode import no_grad
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal"]

_MAPS = ("matrix_exp", "cayley", "householder")


def _ops():
    import ember
    return ember


def _is_orthogonal(Q) -> bool:
    E = _ops()
    n, k = Q.size(-2), Q.size(-1)
    eye = E.eye(k, dtype=Q.dtype)
    eps = 10 * n * E.finfo(Q.dtype).eps
    return bool(E.allclose(Q.mT @ Q, eye, atol=eps))


def _make_orthogonal(A):
    """The Q of A's QR with R's diagonal made positive (unique for a full-rank A)."""
    E = _ops()
    X, tau = E.geqrf(A)
    Q = E.linalg.householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        E = _ops()
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = E.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == "matrix_exp":
                Q = E.linalg.matrix_exp(A)
            else:
                eye = E.eye(n, dtype=A.dtype)
                Q = E.linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = E.linalg.householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        E = _ops()
        with no_grad():
            if Q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {Q.shape}.")
            Q_init = Q
            n, k = Q.size(-2), Q.size(-1)
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                A, tau = E.geqrf(Q)
                # R's diagonal positive: the diagonal of X carries the signs the forward map applies; LAPACK
                # leaves tau exactly 0 where it used no reflection, which flips that sign
                d = A.diagonal(dim1=-2, dim2=-1)
                d.copy_(d.sign() * E.where(tau == 0, -1.0, 1.0).to(d.dtype))
                return A.mT if transpose else A
            if n == k:
                Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
            else:
                N = E.randn(*(Q.size()[:-2] + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(E.cat([Q, N], dim=-1))
            self.base = Q
            neg_id = E.zeros_like(Q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Make ``module.<name>`` orthogonal (see the module docstring for the maps)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = ("matrix_exp" if weight.size(-2) == weight.size(-1) or weight.is_complex()
                          else "householder")
    if orthogonal_map not in _MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


