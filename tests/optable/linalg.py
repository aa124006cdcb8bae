"""Op-table rows of ``xform.lax.linalg``: factorizations and triangular solves.

Inputs are built to keep each decomposition well defined: symmetric positive
definite for cholesky, well-separated eigen/singular values for eigh and svd (so
their derivatives exist), diagonally dominant matrices for the LU gradients (no
pivot changes under finite-difference steps). Eigen- and singular vectors enter
the gradient rows through sign-invariant products (v * v).
"""
import numpy as np

from optable import F32, rec

LA = (F32,)


def _eye(shape, dtype):
    return np.broadcast_to(np.eye(shape[-2], shape[-1]), shape).astype(dtype)


def _spd(g, shapes, dtype):
    x = np.asarray(g.real(shapes[0], dtype), np.float64)
    a = x @ np.swapaxes(x, -1, -2) + shapes[0][-1] * _eye(shapes[0], np.float64)
    return [a.astype(dtype)]


def _dominant(g, shapes, dtype):
    """Diagonally dominant, never with axis-aligned columns (where LAPACK's Householder
    sign convention makes QR discontinuous, as in every LAPACK-based library)."""
    out = []
    for s in shapes:
        x = np.asarray(g.real(s, dtype), np.float64)
        out.append((x + 0.5 + 4 * s[-1] * _eye(s, np.float64)).astype(dtype))
    return out


def _triangular(lower):
    def make(g, shapes, dtype):
        a = _dominant(g, shapes[:1], dtype)[0]
        a = np.tril(a) if lower else np.triu(a)
        return [a, g.real(shapes[1], dtype)]
    return make


def _separated_spectrum(g, shapes, dtype):
    """Symmetric for eigh / rectangular for svd: spectrum 3, 6, 9, ... plus 5% noise."""
    (s,) = shapes
    x = np.asarray(g.real(s, dtype), np.float64)
    k = min(s[-2:])
    base = np.zeros(s)
    base[..., range(k), range(k)] = 3.0 * np.arange(1, k + 1)
    a = base + 0.05 * x
    if s[-1] == s[-2]:
        a = (a + np.swapaxes(a, -1, -2)) / 2
    return [a.astype(dtype)]


def _real(g, shapes, dtype):
    return [g.real(s, dtype) for s in shapes]


def _sign_free_eigh(L, x):
    v, w = L.linalg.eigh(x)
    return w, v * v


def _sign_free_svd(L, x):
    u, s, vt = L.linalg.svd(x, full_matrices=False)
    return s, u * u, vt * vt


def _trisolve(name, shapes, lower, **params):
    return rec(name, 2, LA, shapes, _triangular(lower), op="triangular_solve",
               call=lambda L, a, b: L.linalg.triangular_solve(a, b, lower=lower, **params),
               lower=lower, **params)


RECORDS = [
    rec("cholesky", 1, LA, [((3, 3),), ((2, 4, 4),)], _spd,
        call=lambda L, x: L.linalg.cholesky(x)),
    _trisolve("triangular_solve_left_lower", [((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 1))],
              True, left_side=True),
    _trisolve("triangular_solve_right_upper_T", [((3, 3), (2, 3))], False,
              left_side=False, transpose_a=True),
    _trisolve("triangular_solve_unit", [((4, 4), (4, 2))], True, left_side=True,
              unit_diagonal=True),
    rec("lu_values", 1, LA, [((2, 5, 3),), ((3, 5),)], _real, grad_order=None,
        call=lambda L, x: L.linalg.lu(x)),
    rec("lu", 1, LA, [((4, 4),), ((3, 5),)], _dominant,
        call=lambda L, x: L.linalg.lu(x)[0]),
    rec("qr_complete_values", 1, LA, [((4, 3),), ((2, 3, 5),)], _real, grad_order=None,
        call=lambda L, x: L.linalg.qr(x, full_matrices=True)),
    rec("qr_reduced", 1, LA, [((4, 3),), ((3, 3),)], _dominant,
        call=lambda L, x: L.linalg.qr(x, full_matrices=False)),
    rec("eigh_values", 1, LA, [((4, 4),), ((2, 3, 3),)], _spd, grad_order=None,
        call=lambda L, x: L.linalg.eigh(x)),
    rec("eigh", 1, LA, [((3, 3),), ((4, 4),)], _separated_spectrum, call=_sign_free_eigh),
    rec("svd_values", 1, LA, [((4, 3),), ((2, 3, 5),)], _real, grad_order=None,
        call=lambda L, x: L.linalg.svd(x)),
    rec("svd", 1, LA, [((4, 3),), ((3, 4),)], _separated_spectrum,
        call=_sign_free_svd),
    rec("svd_values_only", 1, LA, [((4, 3),), ((3, 5),)], _separated_spectrum,
        call=lambda L, x: L.linalg.svd(x, compute_uv=False)),
]
