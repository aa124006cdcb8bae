"""Decompositions of ``xform.scipy.linalg`` beyond the solvers: ``schur`` and
``hessenberg`` (LAPACK, CPU only, as JAX), ``qr_multiply`` and ``eigh_tridiagonal``
(part of ``xform.scipy.linalg``, which re-exports them).
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.lax import linalg as lax_linalg
from xform.numpy import _util


def _to_complex(dtype):
    return np.dtype(np.complex128 if np.dtype(dtype) in (np.float64, np.complex128)
                    else np.complex64)


def schur(a, output="real"):
    """Schur decomposition ``a = z t z^H`` (CPU only): ``(t, z)``; ``t`` is
    quasi-upper-triangular (``output='real'``) or upper triangular (``'complex'``).

    >>> t, z = schur(xform.numpy.array([[1., 2.], [0., 3.]]))
    >>> t
    Array([[1., 2.],
           [0., 3.]], dtype=float32)
    """
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got "
                         f"output={output!r}.")
    a = jnp.asarray(a)   # not promoted: integer input is a TypeError, as JAX's
    if output == "complex":
        a = a.astype(_to_complex(a.dtype))
    return lax_linalg.schur(a)


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """Hessenberg form ``a = q h q^H`` (CPU only): ``h``, or ``(h, q)`` with ``calc_q``.

    >>> hessenberg(xform.numpy.array([[1., 2.], [3., 4.]]))
    Array([[1., 2.],
           [3., 4.]], dtype=float32)
    """
    del overwrite_a, check_finite
    a = jnp.asarray(a)
    n = a.shape[-1]
    if n == 0:
        return (jnp.zeros_like(a), jnp.zeros_like(a)) if calc_q else jnp.zeros_like(a)
    a_out, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(a_out, -1)
    if not calc_q:
        return h
    q = lax_linalg.householder_product(a_out[..., 1:, :-1], taus)
    batch = a.shape[:-2]
    q = jnp.block([[jnp.ones((*batch, 1, 1), a.dtype), jnp.zeros((*batch, 1, n - 1), a.dtype)],
                   [jnp.zeros((*batch, n - 1, 1), a.dtype), q]])
    return h, q


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """QR-decompose ``a`` and multiply by its Q: ``(q @ c, r)`` (``mode='left'``) or
    ``(c @ q, r)`` (``'right'``); ``conj(q)`` with ``conjugate``; with ``pivoting``
    (CPU only) also the column order ``p`` of the pivoted QR.

    NB: JAX applies the reflectors with LAPACK's ormqr; xform multiplies by the economy
    Q from ``qr``, which gives the same product (the padding JAX adds is zero).
    """
    del overwrite_a, overwrite_c
    a, c = _util.promote_dtypes("qr_multiply", jnp.asarray(a), jnp.asarray(c), to="inexact")
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    onedim = c.ndim == 1
    if onedim:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(
            f"Array shapes are not compatible for Q @ c operation: a has shape "
            f"{tuple(a.shape)} so Q has {k} columns, but c has {c.shape[-2]} rows "
            f"(expected {k}).")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(
            f"Array shapes are not compatible for c @ Q operation: a has shape "
            f"{tuple(a.shape)} so Q has {m} rows, but c has {c.shape[-1]} columns "
            f"(expected {m}).")
    batch = _util.broadcast_shapes(a.shape[:-2], c.shape[:-2], name="qr_multiply")
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    c = jnp.broadcast_to(c, batch + c.shape[-2:])
    q, r, *p = lax_linalg.qr(a, pivoting=pivoting, full_matrices=False)
    if conjugate:
        q = jnp.conj(q)
    # (full precision: JAX applies the reflectors with ormqr; a GPU's default f32 matmul
    # is TF32, off by ~5e-4)
    hi = lax.Precision.HIGHEST
    cq = jnp.matmul(q, c, precision=hi) if mode == "left" else jnp.matmul(c, q, precision=hi)
    return (cq.ravel() if onedim else cq), r, *p


# ---- eigh_tridiagonal ----

def _sturm_counts(alpha, beta_sq, pivmin, alpha0_perturbation, x):
    """Eigenvalues of the tridiagonal matrix below each ``x`` (Sturm sequence counts)."""
    q = alpha[0] - x
    count = jnp.where(q < 0, 1, 0).astype(np.int32)
    q = jnp.where(alpha[0] == x, alpha0_perturbation, q)

    def step(i, qc):
        q, count = qc
        q = alpha[i] - beta_sq[i - 1] / q - x
        count = jnp.where(q <= pivmin, count + 1, count)
        return jnp.where(q <= pivmin, jnp.minimum(q, -pivmin), q), count
    return lax.fori_loop(1, alpha.shape[0], step, (q, count))[1]


@composite(static=("select", "select_range"))
def _eigvals_tridiagonal(alpha, beta, select, select_range, tol):
    # JAX's bisection (after LAPACK's stebz): all wanted eigenvalues in parallel.
    n = alpha.shape[0]
    if dtypes.issubdtype(alpha.dtype, np.complexfloating):
        alpha = jnp.real(alpha)
        beta_sq = jnp.real(beta * jnp.conj(beta))
        beta_abs = jnp.sqrt(beta_sq)
    else:
        beta_abs, beta_sq = jnp.abs(beta), jnp.square(beta)
    # Gershgorin bounds on the spectrum.
    row_sum = jnp.concatenate([beta_abs[:1], beta_abs[:-1] + beta_abs[1:], beta_abs[-1:]])
    lambda_max = jnp.max(alpha + row_sum)
    lambda_min = jnp.min(alpha - row_sum)
    t_norm = jnp.maximum(jnp.abs(lambda_min), jnp.abs(lambda_max))
    finfo = np.finfo(alpha.dtype)
    one = np.ones([], dtype=alpha.dtype)
    safemin = np.maximum(one / finfo.max, (one + finfo.eps) * finfo.tiny)
    pivmin = safemin * jnp.maximum(1, jnp.max(beta_sq))
    alpha0_perturbation = jnp.square(finfo.eps * beta_abs[0])
    abs_tol = finfo.eps * t_norm
    if tol is not None:
        abs_tol = jnp.maximum(tol, abs_tol)
    max_it = finfo.nmant + 1
    if select == "a":
        target = jnp.arange(n, dtype=np.int32)
    else:
        target = jnp.arange(select_range[0], select_range[1] + 1, dtype=np.int32)
    fudge = 2.1
    norm_slack = jnp.array(n, alpha.dtype) * fudge * finfo.eps * t_norm
    shape = target.shape
    lower = jnp.broadcast_to(lambda_min - norm_slack - 2 * fudge * pivmin, shape)
    upper = jnp.broadcast_to(lambda_max + norm_slack + fudge * pivmin, shape)
    mid = 0.5 * (upper + lower)
    pivmin = jnp.broadcast_to(pivmin, shape)
    alpha0_perturbation = jnp.broadcast_to(alpha0_perturbation, shape)

    def cond(args):
        i, lower, _, upper = args
        return (i < max_it) & (abs_tol < jnp.max(upper - lower))

    def body(args):
        i, lower, mid, upper = args
        counts = _sturm_counts(alpha, beta_sq, pivmin, alpha0_perturbation, mid)
        lower = jnp.where(counts <= target, mid, lower)
        upper = jnp.where(counts > target, mid, upper)
        return i + 1, lower, 0.5 * (lower + upper), upper
    return lax.while_loop(cond, body, (0, lower, mid, upper))[2]


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None,
                     key=None):
    """Eigenvalues (ascending; and eigenvectors) of the Hermitian tridiagonal matrix with
    diagonal ``d`` and first superdiagonal ``e`` (subdiagonal ``conj(e)``).

    Eigenvalues come from JAX's Sturm-sequence bisection (``select='a'``: all;
    ``'i'``: indices ``select_range[0]..select_range[1]``).
    NB: JAX computes the eigenvectors by inverse iteration from random vectors (``key``);
    xform takes them from ``eigh`` of the assembled matrix (``key`` unused): the same
    vectors up to sign (phase), orthonormal also within clusters.

    >>> w = eigh_tridiagonal(xform.numpy.array([2., 2.]), xform.numpy.array([1.]),
    ...                      eigvals_only=True)
    >>> xform.numpy.round(w, 4)
    Array([1., 3.], dtype=float32)
    """
    del key
    alpha, beta = jnp.asarray(d), jnp.asarray(e)
    if alpha.dtype != beta.dtype:
        raise TypeError("diagonal and off-diagonal values must have same dtype, got "
                        f"{alpha.dtype} and {beta.dtype}")
    if alpha.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise TypeError("Only float32 and float64 inputs are supported as inputs to "
                        "jax.scipy.linalg.eigh_tridiagonal, got "
                        f"{alpha.dtype} and {beta.dtype}")
    if select == "i":
        if select_range is None:
            raise ValueError("for select='i', select_range must be specified.")
        if select_range[0] > select_range[1]:
            raise ValueError("Got empty index range in select_range.")
        select_range = tuple(int(i) for i in select_range)
    elif select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
    elif select != "a":
        raise ValueError("'select must have a value in {'a', 'i', 'v'}.")
    n = alpha.shape[0]
    if n <= 1:
        w = jnp.real(alpha)
        return w if eigvals_only else (w, jnp.eye(n, dtype=alpha.dtype))
    w = _eigvals_tridiagonal(alpha, beta, select, select_range, tol)
    if eigvals_only:
        return w
    t = (jnp.diag(jnp.real(alpha).astype(alpha.dtype)) + jnp.diag(beta, 1)
         + jnp.diag(jnp.conj(beta), -1))
    v, _ = lax_linalg.eigh(t, lower=True)
    lo, hi = (0, n - 1) if select == "a" else select_range
    return w, v[:, lo:hi + 1]
