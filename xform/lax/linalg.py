"""``xform.lax.linalg``: matrix factorizations, solves and products as primitives.

The face of the modules: ``linalg_triangular.py`` (cholesky, triangular_solve, lu,
lu_pivots_to_permutation), ``linalg_orthogonal.py`` (qr, eigh, svd: the factorizations
with orthogonal/unitary factors, and their algorithm enums), ``linalg_nonsymmetric.py``
(eig, schur, hessenberg: the last two CPU only, as JAX; and householder_product),
``linalg_tridiagonal.py`` (tridiagonal, tridiagonal_solve), ``linalg_products.py``
(ormqr, symmetric_product, cholesky_update), ``linalg_qdwh.py`` (qdwh, a composition
with loops: this face sits in L5 beside control flow) and ``linalg_common.py`` (the
helpers they share). triangular_solve lowers to a StableHLO op; the rest lower to the
kernels JAX calls (jaxlib's LAPACK on CPU, cuSOLVER/cuSPARSE on CUDA: FFI custom calls,
see ``interpreters/ffi.py``), or to lax compositions where JAX's are. Every batched
primitive accepts leading batch dimensions, so batching moves the batch axis to the
front. JVPs follow the standard matrix-calculus rules JAX uses; reverse mode comes from
them by partial evaluation and transposition like everything else.
"""
from xform.lax.linalg_common import symmetrize, tril, triu  # noqa: F401
from xform.lax.linalg_nonsymmetric import (  # noqa: F401
    EigImplementation, eig, eig_p, hessenberg, hessenberg_p, householder_product,
    householder_product_p, schur, schur_p)
from xform.lax.linalg_orthogonal import (  # noqa: F401
    EighImplementation, SvdAlgorithm, eigh, eigh_p, geqrf, geqrf_p, qr, qr_p, svd, svd_p)
from xform.lax.linalg_products import (  # noqa: F401
    cholesky_update, cholesky_update_p, ormqr, ormqr_p, symmetric_product,
    symmetric_product_p)
from xform.lax.linalg_qdwh import qdwh  # noqa: F401
from xform.lax.linalg_triangular import (  # noqa: F401
    _permutation_matrix, cholesky, cholesky_p, lu, lu_p, lu_pivots_to_permutation,
    lu_pivots_to_permutation_p, triangular_solve, triangular_solve_p)
from xform.lax.linalg_tridiagonal import (  # noqa: F401
    tridiagonal, tridiagonal_p, tridiagonal_solve, tridiagonal_solve_p)
