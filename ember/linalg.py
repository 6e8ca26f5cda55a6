"""``ember.linalg``: torch.linalg's namespace (inv, solve, det, cholesky, qr, eigh, svd, norms, ...).

The implementations live in ``ember/ops/linalg.py``; the norms are implemented in
``ember/ops/reduce_more.py`` and reached through lazy wrappers.
"""
from .ops.linalg import (  # noqa: F401
    LinAlgError,
    matmul, vecdot, multi_dot, matrix_power,
    inv, inv_ex, solve, solve_ex, solve_triangular,
    det, slogdet, cholesky, cholesky_ex, qr, eigh, eigvalsh, svd, svdvals, pinv, lstsq,
    matrix_rank, cond, norm, vector_norm, matrix_norm, matrix_exp,
)
from .ops.linalg import linalg_cross as cross  # noqa: F401
from .ops.linalg import linalg_diagonal as diagonal  # noqa: F401
from .ops.stats import linalg_vander as vander  # noqa: F401

__all__ = [
    "LinAlgError", "matmul", "vecdot", "multi_dot", "matrix_power", "inv", "inv_ex", "solve", "solve_ex",
    "solve_triangular", "det", "slogdet", "cholesky", "cholesky_ex", "qr", "eigh", "eigvalsh", "svd", "svdvals",
    "pinv", "lstsq", "matrix_rank", "cond", "norm", "vector_norm", "matrix_norm", "cross", "diagonal", "matrix_exp", "vander",
]
