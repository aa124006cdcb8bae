"""``qdwh``: the QR-based dynamically weighted Halley iteration for the polar
decomposition, JAX's algorithm (Nakatsukasa, Bai and Gygi, SIAM J. Matrix Anal. Appl.
31(5), 2010), for ``xform.lax.linalg.qdwh`` and ``xform.scipy.linalg.polar``.

A composition as JAX's is, of lax ops and loops (hence L5, beside control flow, with the
``xform.lax.linalg`` face that exports it). The weights (a, b, c) of each Halley step
depend only on ``eps``, so they are known before the loop: the first steps (c > 100)
use a QR factorization, the rest a Cholesky one, then plain Halley steps until the
iterate stops moving, and one Newton-Schulz refinement. ``dynamic_shape`` takes a matrix
padded up to its static shape; the masks keep the padding out, as JAX's.
"""
import functools

import numpy as np

from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax.bitwise import bitwise_and, bitwise_not
from xform.lax.complex import real
from xform.lax.control_flow.loops import while_loop
from xform.lax.control_flow.scan_loops import fori_loop
from xform.lax.dot import Precision, dot_general
from xform.lax.dynamic_slicing import (dynamic_index_in_dim, dynamic_slice_in_dim,
                                       dynamic_update_slice_in_dim)
from xform.lax.linalg_common import _H, _T, _conj, _eye_like
from xform.lax.linalg_orthogonal import qr
from xform.lax.linalg_triangular import cholesky, triangular_solve
from xform.lax.reductions import reduce_max, reduce_sum
from xform.lax.special import cbrt
from xform.transforms.jit import jit

_CHOLESKY_CUTOFF = 100


def _mm(a, b):   # (JAX runs qdwh at float32 matmul precision)
    return dot_general(a, b, (((1,), (0,)), ((), ())), precision=Precision.HIGHEST)


def _eye(n, dtype):
    return _eye_like(shapes.full((n, n), 0, dtype))


def _mask(x, dims, alternative=None):
    """x within the true shape ``dims`` (None: the whole axis), ``alternative`` (zeros)
    outside."""
    keep = None
    for i, d in enumerate(dims):
        if d is not None:
            inside = ew.lt(shapes.broadcasted_iota(np.int32, x.shape, i),
                           ew.convert_element_type(d, np.int32))
            keep = inside if keep is None else bitwise_and(keep, inside)
    if keep is None:
        return x
    other = shapes.full_like(x, 0) if alternative is None else alternative
    return ew.select_n(keep, other, x)


def _use_qr(u, m, n, params):
    a_minus_e_by_sqrt_c, sqrt_c, e = params
    big_m, big_n = u.shape
    eye = _eye(big_n, u.dtype)
    top = ew.mul(sqrt_c, u)
    if m is None:
        y = shapes.concatenate([top, eye], 0)
    else:   # eye right below the true rows
        y = dynamic_update_slice_in_dim(
            shapes.pad(top, np.zeros((), u.dtype), [(0, big_n, 0), (0, 0, 0)]), eye, m, 0)
    q, _ = qr(y, full_matrices=False)
    q1 = _mask(shapes.slice(q, (0, 0), (big_m, big_n)), (m, n))
    q2 = (shapes.slice(q, (big_m, 0), (big_m + big_n, big_n)) if m is None
          else dynamic_slice_in_dim(q, m, big_n, axis=0))
    q2 = _H(_mask(q2, (n, n)))
    return ew.add(ew.mul(e, u), ew.mul(a_minus_e_by_sqrt_c, _mm(q1, q2)))


def _use_cholesky(u, m, n, params):
    a_minus_e, c, e = params
    big_n = u.shape[1]
    eye = _eye(big_n, u.dtype)
    x = ew.add(ew.mul(c, _mm(_H(u), u)), eye)
    # padding: identity in the lower-right corner keeps x positive definite
    x = _mask(x, (n, n), eye)
    y = cholesky(x, symmetrize_input=False)   # lower triangular
    z = _conj(triangular_solve(y, _T(u), left_side=True, lower=True, conjugate_a=True))
    z = _H(triangular_solve(y, z, left_side=True, lower=True, transpose_a=True,
                            conjugate_a=True))
    return ew.add(ew.mul(e, u), ew.mul(a_minus_e, z))


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


def _norm_fro(x):
    return ew.sqrt(reduce_sum(real(ew.mul(x, _conj(x))) if x.dtype.kind == "c"
                              else ew.mul(x, x), (0, 1)))


def _qdwh(x, m, n, max_iterations, eps):
    eps = float(np.finfo(x.dtype).eps) if eps is None else eps
    absx = ew.abs(x)
    one_norm = reduce_max(reduce_sum(absx, (0,)), (0,))
    inf_norm = reduce_max(reduce_sum(absx, (1,)), (0,))
    alpha_inverse = ew.select_n(ew.eq(one_norm, np.zeros((), one_norm.dtype)),
                                ew.mul(ew.rsqrt(one_norm), ew.rsqrt(inf_norm)),
                                np.ones((), one_norm.dtype))
    u = ew.mul(x, ew.convert_element_type(alpha_inverse, x.dtype))
    tol_norm = cbrt(np.array(10.0 * eps / 2.0, one_norm.dtype))
    qr_coefs, chol_coefs = _weights(eps, max_iterations)

    def iterate(u, coefs, update, test):
        coefs = np.asarray(coefs, np.float64).astype(x.dtype)

        def body(k, state):
            u_prev, not_converged = state
            row = dynamic_index_in_dim(coefs, k, keepdims=False)
            params = [shapes.reshape(shapes.slice(row, (i,), (i + 1,)), ()) for i in range(3)]
            u = update(u_prev, m, n, params)
            return u, (ew.gt(_norm_fro(ew.sub(u, u_prev)), tol_norm) if test
                       else not_converged)
        return fori_loop(0, len(coefs), body, (u, np.bool_(True)))

    not_converged = np.bool_(True)
    if qr_coefs:
        u, _ = iterate(u, qr_coefs, _use_qr, False)
    if chol_coefs:
        u, not_converged = iterate(u, chol_coefs, _use_cholesky, True)
    halley = [np.array(v, x.dtype) for v in (3 - 1 / 3, 3, 1 / 3)]   # a, b, c -> 3, 1, 3

    def halley_step(state):   # until the iterate converges
        k, u_prev, _ = state
        u = _use_cholesky(u_prev, m, n, halley)
        return k + 1, u, ew.gt(_norm_fro(ew.sub(u, u_prev)), tol_norm)
    num_iters, u, not_converged = while_loop(
        lambda s: bitwise_and(s[2], s[0] < max_iterations), halley_step,
        (len(qr_coefs) + len(chol_coefs), u, not_converged))
    # Newton-Schulz refinement
    u = ew.sub(ew.mul(np.array(1.5, x.dtype), u),
               ew.mul(np.array(0.5, x.dtype), _mm(u, _mm(_H(u), u))))
    h = _mm(_H(u), x)
    h = ew.div(ew.add(h, _H(h)), np.array(2, x.dtype))
    return u, h, num_iters, bitwise_not(not_converged)


@functools.partial(jit, static_argnames=("is_hermitian", "max_iterations", "eps"))
def qdwh(x, *, is_hermitian=False, max_iterations=None, eps=None, dynamic_shape=None):
    """Polar decomposition ``x = u @ h`` of a full-rank m x n ``x``, m >= n, by QDWH:
    ``(u, h, num_iters, is_converged)``, ``u`` with orthonormal columns, ``h`` Hermitian
    positive definite. ``max_iterations`` (default 10) bounds the steps; ``eps`` sets
    the tolerance (the iterate moves less than ``(4 eps)^(1/3)``); ``dynamic_shape``
    (m, n) is the true shape of a zero-padded ``x``; ``is_hermitian`` is unused, as JAX.

    >>> u, h, _, ok = qdwh(xform.numpy.array([[2., 0.], [0., 3.]]))
    >>> bool(ok), h.round(4)
    (True, Array([[2., 0.],
           [0., 3.]], dtype=float32))
    """
    del is_hermitian
    max_iterations = 10 if max_iterations is None else int(max_iterations)
    if x.ndim != 2:
        raise ValueError(f"qdwh: x must be a matrix, got shape {x.shape}")
    big_m, big_n = x.shape
    if big_m < big_n:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    m = n = None
    if dynamic_shape is not None:
        m, n = dynamic_shape
        x = _mask(x, (m, n))
    return _qdwh(x, m, n, max_iterations, eps)
