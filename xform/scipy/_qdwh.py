"""QDWH (QR-based dynamically weighted Halley) polar decomposition, JAX's algorithm
(``jax.lax.linalg.qdwh``; Nakatsukasa, Bai and Gygi, SIAM J. Matrix Anal. Appl. 31(5),
2010), for ``xform.scipy.linalg.polar(method='qdwh')``.

The weights (a, b, c) of each Halley step are known before the loop (they depend only
on ``eps``): the first steps (c > 100) use a QR factorization, the rest a Cholesky one,
then plain Halley steps until the iterate stops moving, and one Newton-Schulz
refinement. NB: JAX's version also takes padded inputs (``dynamic_shape``); xform's
shapes are always the true ones, so it has no masks.
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.lax import linalg as lax_linalg
from xform.numpy import linalg as np_linalg

_CHOLESKY_CUTOFF = 100


def _h(x):
    return jnp.conj(x.T)


def _use_qr(u, params):
    a_minus_e_by_sqrt_c, sqrt_c, e = params[0], params[1], params[2]
    m, n = u.shape
    y = jnp.concatenate([sqrt_c * u, jnp.eye(n, dtype=u.dtype)])
    q, _ = lax_linalg.qr(y, full_matrices=False)
    return e * u + a_minus_e_by_sqrt_c * (q[:m] @ _h(q[m:]))


def _use_cholesky(u, params):
    a_minus_e, c, e = params[0], params[1], params[2]
    x = c * (_h(u) @ u) + jnp.eye(u.shape[1], dtype=u.dtype)
    y = lax_linalg.cholesky(x, symmetrize_input=False)        # lower triangular
    z = jnp.conj(lax_linalg.triangular_solve(y, u.T, left_side=True, lower=True,
                                             conjugate_a=True))
    z = _h(lax_linalg.triangular_solve(y, z, left_side=True, lower=True, transpose_a=True,
                                       conjugate_a=True))
    return e * u + a_minus_e * z


def _weights(eps, max_iterations):
    """The (a, b, c) of each dynamically weighted step, split into QR and Cholesky steps
    as the parameters those updates take."""
    qr_coefs, chol_coefs = [], []
    l, tol_l, k = eps, 10.0 * eps / 2.0, 0
    while l + tol_l < 1 and k < max_iterations:
        k += 1
        l2 = l * l
        dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = (1.0 + dd) ** (1 / 2)
        a = sqd + (2 - dd + 2 * (2 - l2) / (l2 * sqd)) ** (1 / 2)
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        l = l * (a + b * l2) / (1 + c * l2)
        if c > _CHOLESKY_CUTOFF:
            qr_coefs.append(((a - b / c) / c ** (1 / 2), c ** (1 / 2), b / c))
        else:
            chol_coefs.append((a - b / c, c, b / c))
    return qr_coefs, chol_coefs


def qdwh(x, *, max_iterations=10, eps=None):
    """``(u, h, num_iters, is_converged)`` with ``x = u @ h`` for an m x n ``x``, m >= n
    (full rank): ``u`` with orthonormal columns, ``h`` Hermitian positive definite."""
    m, n = x.shape
    if m < n:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    eps = float(np.finfo(x.dtype).eps) if eps is None else eps
    one_norm, inf_norm = np_linalg.norm(x, ord=1), np_linalg.norm(x, ord=np.inf)
    alpha_inverse = jnp.where(one_norm == 0, 1, lax.rsqrt(one_norm) * lax.rsqrt(inf_norm))
    u = x * alpha_inverse.astype(x.dtype)
    tol_norm = jnp.cbrt(10.0 * eps / 2.0)
    qr_coefs, chol_coefs = _weights(eps, max_iterations)
    not_converged = jnp.array(True)

    def iterate(u, coefs, update, test):
        def body(k, state):
            u_prev, not_converged = state
            u = update(u_prev, lax.dynamic_index_in_dim(coefs, k, keepdims=False))
            return u, (np_linalg.norm(u - u_prev) > tol_norm) if test else not_converged
        return lax.fori_loop(0, len(coefs), body, (u, not_converged))

    if qr_coefs:
        u, _ = iterate(u, jnp.array(qr_coefs).astype(x.dtype), _use_qr, False)
    if chol_coefs:
        u, not_converged = iterate(u, jnp.array(chol_coefs).astype(x.dtype),
                                   _use_cholesky, True)
    halley = jnp.array((3 - 1 / 3, 3, 1 / 3)).astype(x.dtype)   # a, b, c -> 3, 1, 3

    def halley_step(state):   # until the iterate converges
        k, u_prev, _ = state
        u = _use_cholesky(u_prev, halley)
        return k + 1, u, np_linalg.norm(u - u_prev) > tol_norm
    num_iters, u, not_converged = lax.while_loop(
        lambda s: s[2] & (s[0] < max_iterations), halley_step,
        (len(qr_coefs) + len(chol_coefs), u, not_converged))
    u = 1.5 * u - 0.5 * u @ (_h(u) @ u)                   # Newton-Schulz refinement
    h = _h(u) @ x
    return u, (h + _h(h)) / 2, num_iters, jnp.logical_not(not_converged)
