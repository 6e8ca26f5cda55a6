"""``ember.linalg``: torch.linalg's namespace (inv, solve, det, cholesky, qr, eigh, svd, norms, ...).

The implementations live in the ``ember/ops/linalg*.py`` files (products, solvers, decompositions,
norms, ...; see ``ember/ops/linalg.py``); the norms are implemented in ``ember/ops/reduce_norm.py``
and reached through lazy wrappers.
"""
from .ops.linalg import LinAlgError  # noqa: F401
from .ops.linalg_products import matmul, vecdot, multi_dot  # noqa: F401
from .ops.linalg_solvers import inv, inv_ex, solve, solve_ex, solve_triangular, matrix_power, matrix_exp  # noqa: F401
from .ops.linalg_decompositions import (  # noqa: F401
    cholesky, cholesky_ex, qr, eigh, eigvalsh, svd, svdvals, pinv, lstsq,
)
from .ops.linalg_norms import det, slogdet, matrix_rank, cond, norm, vector_norm, matrix_norm  # noqa: F401
from .ops.linalg_products import linalg_cross as cross  # noqa: F401
from .ops.linalg_parts import linalg_diagonal as diagonal  # noqa: F401
from .ops.stats import linalg_vander as vander  # noqa: F401
from .ops.linalg_lu import lu_factor, lu_factor_ex, lu, lu_solve  # noqa: F401
from .ops.linalg_householder import householder_product  # noqa: F401
from .ops.linalg_eig import eig, eigvals  # noqa: F401
from .ops.linalg_tensor import tensorinv, tensorsolve  # noqa: F401

__all__ = [
    "LinAlgError", "matmul", "vecdot", "multi_dot", "matrix_power", "inv", "inv_ex", "solve", "solve_ex",
    "solve_triangular", "det", "slogdet", "cholesky", "cholesky_ex", "qr", "eigh", "eigvalsh", "svd", "svdvals",
    "pinv", "lstsq", "matrix_rank", "cond", "norm", "vector_norm", "matrix_norm", "cross", "diagonal", "matrix_exp", "vander",
    "lu_factor", "lu_factor_ex", "lu", "lu_solve", "householder_product", "eig", "eigvals", "tensorinv", "tensorsolve",
]
