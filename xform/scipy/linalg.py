"""``xform.scipy.linalg``: SciPy's linear algebra with JAX's semantics: the solvers and
factorizations here, over the ``xform.lax.linalg`` primitives; schur, hessenberg,
qr_multiply and eigh_tridiagonal in ``_linalg_decomp.py``; the special matrices in
``_linalg_special.py``; matrix functions (expm, polar, sqrtm, funm) in
``_linalg_matfuncs.py``."""
import warnings

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.lax import linalg as lax_linalg
from xform.numpy import linalg as np_linalg
from xform.scipy._linalg_decomp import (  # noqa: F401
    eigh_tridiagonal, hessenberg, qr_multiply, schur)
from xform.scipy._linalg_matfuncs import (  # noqa: F401
    expm, expm_frechet, funm, polar, rsf2csf, solve_sylvester, sqrtm)
from xform.transforms.vmap import vmap
from xform.scipy._linalg_special import (  # noqa: F401
    block_diag, circulant, companion, convolution_matrix, dft, fiedler, fiedler_companion,
    hadamard, hankel, helmert, hilbert, invhilbert, invpascal, leslie, pascal, toeplitz)


def _trans_flags(trans):
    table = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
             2: (True, True), "C": (True, True)}
    if trans not in table:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
                         f"{trans!r}")
    return table[trans]


def _vector_rhs(name, a, b):
    """JAX's rule for a solver's ``b``: 1-D is one vector; ``a.ndim == b.ndim + 1`` with
    matching last axes is a batch of vectors (deprecated in JAX, with its warning); any
    other ``b`` is a (batch of) matrices, batch axes broadcast against ``a``'s."""
    if b.ndim == 1:
        return True
    if a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1]:
        warnings.warn(f"xform.scipy.linalg.{name}: batched 1D solves with b.ndim > 1 are "
                      "deprecated, and in the future will be treated as a batched 2D "
                      f"solve. Use {name}(..., b[..., None]).squeeze(-1) to avoid this "
                      "warning.", FutureWarning, stacklevel=3)
        return True
    if b.ndim < 2:
        raise ValueError(f"{name}: b must be a vector or a (batch of) matrices, got shape "
                         f"{b.shape}")
    return False


def _core_size_check(name, n, b):
    if b.shape[-2] != n:
        raise ValueError(f"{name}: b {b.shape[:-1]}'s solve axis has size {b.shape[-2]}, "
                         f"but the matrix is {n}x{n}")


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """Solve ``op(a) @ x = b`` for triangular ``a`` (only its ``lower``/upper part is read).

    >>> a = xform.numpy.array([[2., 0.], [1., 1.]])
    >>> solve_triangular(a, xform.numpy.array([2., 3.]), lower=True)
    Array([1., 2.], dtype=float32)
    """
    del overwrite_b, debug, check_finite
    a, b = np_linalg._inexact("solve_triangular", a, b)
    transpose_a, conjugate_a = _trans_flags(trans)
    np_linalg._square("solve_triangular", a)
    vector = _vector_rhs("solve_triangular", a, b)
    if vector:
        b = b[..., None]
    _core_size_check("solve_triangular", a.shape[-1], b)
    a, b = np_linalg._batch_broadcast(a, b, 2)
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower,
                                    transpose_a=transpose_a, conjugate_a=conjugate_a,
                                    unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """Cholesky factor; upper triangular unless ``lower``. As SciPy's (and JAX's), only
    that triangle of ``a`` is read (no symmetrization)."""
    del overwrite_a, check_finite
    (a,) = np_linalg._inexact("cholesky", a)
    np_linalg._square("cholesky", a)
    if not lower:
        a = jnp.conj(jnp.matrix_transpose(a))
    c = lax_linalg.cholesky(a, symmetrize_input=False)
    return c if lower else jnp.conj(jnp.matrix_transpose(c))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` for ``cho_solve``."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve ``a @ x = b`` given ``cho_factor(a)``."""
    del overwrite_b, check_finite
    c, lower = c_and_lower
    c, b = np_linalg._inexact("cho_solve", c, b)
    np_linalg._square("cho_solve", c)
    vector = _vector_rhs("cho_solve", c, b)
    if vector:
        b = b[..., None]
    _core_size_check("cho_solve", c.shape[-1], b)
    c, b = np_linalg._batch_broadcast(c, b, 2)
    # a = L L^H: solve L y = b, then L^H x = y (with L = c^H when c is upper).
    y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower,
                                    transpose_a=not lower, conjugate_a=not lower)
    x = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower,
                                    transpose_a=lower, conjugate_a=lower)
    return x[..., 0] if vector else x


def lu_factor(a, overwrite_a=False, check_finite=True):
    """``(lu, piv)`` for ``lu_solve`` (``piv`` as LAPACK's row swaps, 0-based)."""
    (a,) = np_linalg._inexact("lu_factor", a)
    lu_, pivots, _ = lax_linalg.lu(a)
    return lu_, pivots


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solve ``op(a) @ x = b`` given ``lu_factor(a)``; ``op`` is the identity
    (``trans=0``), the transpose (1) or the conjugate transpose (2)."""
    del overwrite_b, check_finite
    if trans not in (0, 1, 2):
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    lu_, pivots = lu_and_piv
    lu_, b = np_linalg._inexact("lu_solve", lu_, b)
    np_linalg._square("lu_solve", lu_)
    perm = lax_linalg.lu_pivots_to_permutation(jnp.asarray(pivots), lu_.shape[-2])
    vector = _vector_rhs("lu_solve", lu_, b)
    if vector:
        b = b[..., None]
    _core_size_check("lu_solve", lu_.shape[-1], b)
    batch = np.broadcast_shapes(lu_.shape[:-2], perm.shape[:-1], b.shape[:-2])
    lu_ = jnp.broadcast_to(lu_, (*batch, *lu_.shape[-2:]))
    perm = jnp.broadcast_to(perm, (*batch, perm.shape[-1]))
    b = jnp.broadcast_to(b, (*batch, *b.shape[-2:]))
    if trans == 0:
        x = np_linalg._permute_and_solve(lu_, perm, b)
    else:
        x = np_linalg._solve_transposed(lu_, perm, b, conjugate=trans == 2)
    return x[..., 0] if vector else x


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """``(p, l, u)`` with ``a = p @ l @ u`` (or ``(p @ l, u)`` with ``permute_l``)."""
    (a,) = np_linalg._inexact("lu", a)
    lu_, _, perm = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    l_ = jnp.tril(lu_[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
    u = jnp.triu(lu_[..., :k, :])
    p = jnp.matrix_transpose(lax_linalg._permutation_matrix(  # (real, as JAX's)
        perm, np.finfo(a.dtype).dtype))
    return (jnp.matmul(p, l_), u) if permute_l else (p, l_, u)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """Solve ``a @ x = b``; ``assume_a="pos"`` uses Cholesky. As JAX's, that is a
    ``custom_linear_solve`` over the whole of ``a`` (derivatives see both triangles)."""
    del overwrite_a, overwrite_b, debug, check_finite
    valid = ["gen", "sym", "her", "pos"]
    if assume_a not in valid:
        raise ValueError(f"Expected assume_a to be one of {valid}; got {assume_a!r}")
    if assume_a != "pos":
        return np_linalg.solve(a, b)
    a, b = np_linalg._inexact("solve", a, b)
    if not (a.ndim >= 2 and b.ndim in (a.ndim, a.ndim - 1)
            and a.shape[-1] == a.shape[-2] == b.shape[a.ndim - 2]):
        raise ValueError("The arguments to solve must have shapes a=[..., m, m] and "
                         f"b=[..., m, k] or b=[..., m]; got a={a.shape} and b={b.shape}")
    factors = cho_factor(lax.stop_gradient(a), lower=lower)
    custom_solve = lambda rhs: lax.custom_linear_solve(  # noqa: E731
        lambda x: jnp.matmul(a, x[..., None])[..., 0], rhs,
        solve=lambda _, x: cho_solve(factors, x), symmetric=True)
    if a.ndim == b.ndim + 1:
        return custom_solve(b)
    return vmap(custom_solve, b.ndim - 1, max(a.ndim, b.ndim) - 1)(b)


def inv(a, overwrite_a=False, check_finite=True):
    """Inverse of a square matrix (jnp.linalg.inv; SciPy's flags are accepted)."""
    del overwrite_a, check_finite
    return np_linalg.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    """Determinant of a square matrix (jnp.linalg.det; SciPy's flags are accepted)."""
    del overwrite_a, check_finite
    return np_linalg.det(a)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):
    """Eigenvalues ``w`` (ascending) and eigenvectors ``v`` of a Hermitian ``a``:
    ``(w, v)``, or ``w`` alone. As JAX's, only the standard problem (no ``b``)."""
    del overwrite_a, overwrite_b, turbo, check_finite
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented")
    if type != 1:
        raise NotImplementedError("Only the type=1 case of eigh is implemented.")
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
    (a,) = np_linalg._inexact("eigh", a)
    v, w = lax_linalg.eigh(a, lower=lower)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """``(u, s, vh)`` (a plain tuple, as JAX's), or ``s`` alone."""
    del overwrite_a, check_finite, lapack_driver
    (a,) = np_linalg._inexact("svd", a)
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """scipy.linalg.qr: ``(q, r)``, or ``(r,)`` for ``mode="r"`` (full-size ``r``); with
    ``pivoting`` (CPU only) also the column order ``p``, ``a[:, p] = q @ r``. As JAX's,
    ``mode="raw"`` is not supported."""
    del overwrite_a, lwork, check_finite
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    (a,) = np_linalg._inexact("qr", a)
    q, r, *p = lax_linalg.qr(a, pivoting=pivoting, full_matrices=mode != "economic")
    return (r, *p) if mode == "r" else (q, r, *p)
