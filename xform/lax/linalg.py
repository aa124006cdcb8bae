"""``xform.lax.linalg``: matrix factorizations and triangular solves as primitives.

The face of four modules: ``linalg_triangular.py`` (cholesky, triangular_solve, lu),
``linalg_orthogonal.py`` (qr, eigh, svd: the factorizations with orthogonal/unitary
factors), ``linalg_nonsymmetric.py`` (eig, schur, hessenberg: CPU only, as JAX; and
householder_product) and ``linalg_common.py`` (the helpers they share). triangular_solve
lowers to a StableHLO op; lu, qr, eigh, svd and (on CPU, as JAX) cholesky lower to jaxlib's LAPACK
kernels (FFI custom calls, see ``interpreters/ffi.py``). Every primitive accepts leading
batch dimensions, so batching moves the batch axis to the front. JVPs follow the
standard matrix-calculus rules JAX uses; reverse mode comes from them by partial
evaluation and transposition like everything else.
"""
from xform.lax.linalg_common import symmetrize, tril, triu  # noqa: F401
from xform.lax.linalg_nonsymmetric import (  # noqa: F401
    eig, eig_p, hessenberg, hessenberg_p, householder_product, householder_product_p, schur,
    schur_p)
from xform.lax.linalg_orthogonal import (  # noqa: F401
    eigh, eigh_p, geqrf, geqrf_p, qr, qr_p, svd, svd_p)
from xform.lax.linalg_triangular import (  # noqa: F401
    _permutation_matrix, cholesky, cholesky_p, lu, lu_p, lu_pivots_to_permutation,
    triangular_solve, triangular_solve_p)
