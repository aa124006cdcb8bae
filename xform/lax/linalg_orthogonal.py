"""The factorizations with orthogonal/unitary factors, ``qr``, ``eigh`` and ``svd``, as
primitives lowered to jaxlib's LAPACK kernels, cuSOLVER's on GPU (part of
``xform.lax.linalg``, which re-exports them; the shared helpers are in
``linalg_common.py``).
"""
import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.interpreters import ad, ffi, mlir
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import standard_primitive
from xform.lax.linalg_common import (_H, _batch_to_front, _check_matrix, _diag, _eye_like,
                                     _in_lowering, _info_aval, _is_complex, _matmul,
                                     _nan_on_failure, _real, symmetrize, tril, triu)
from xform.lax.linalg_triangular import triangular_solve


# ---- qr ----

def qr(x, *, pivoting=False, full_matrices=True):
    """QR decomposition ``x = q @ r``, ``q`` orthonormal columns, ``r`` upper triangular.

    With ``full_matrices=False`` (economy), ``q`` is (..., m, k) and ``r`` (..., k, n)
    where k = min(m, n).

    >>> q, r = qr(xform.numpy.array([[3., 0.], [4., 5.]]))
    >>> abs(float(r[0, 0]))
    5.0
    """
    if pivoting:
        raise NotImplementedError("qr(pivoting=True) is not supported")
    _check_matrix("qr", x, square=False)
    return tuple(qr_p.bind(x, full_matrices=bool(full_matrices)))


def _qr_abstract_eval(x, *, full_matrices):
    _check_matrix("qr", x, square=False)
    *batch, m, n = x.shape
    cols = m if full_matrices else min(m, n)
    return [ShapedArray((*batch, m, cols), x.dtype), ShapedArray((*batch, cols, n), x.dtype)]


def _qr_lowering(ctx, x, *, full_matrices):
    aval = ctx.avals_in[0]
    q_aval, r_aval = ctx.avals_out
    *batch, m, n = aval.shape
    cols = q_aval.shape[-1]
    tau_aval = ShapedArray((*batch, min(m, n)), aval.dtype)
    a, tau = ffi.solver_call(ctx, ("geqrf_ffi", {}), ("geqrf_ffi", {}), [x], [aval],
                             [aval, tau_aval], aliases=[(0, 0)])

    def householder_input(a):   # the first `cols` columns, zero-padded if cols > n
        if cols <= n:
            return [shapes.slice(a, (0,) * a.ndim, (*batch, m, cols))]
        return [shapes.pad(a, np.zeros((), a.dtype),
                           [(0, 0, 0)] * len(batch) + [(0, 0, 0), (0, cols - n, 0)])]
    (qa,) = _in_lowering(ctx, householder_input, [a], [aval])
    prefix = "un" if dtypes.issubdtype(aval.dtype, np.complexfloating) else "or"
    (q,) = ffi.solver_call(ctx, (f"{prefix}gqr_ffi", {}), ("orgqr_ffi", {}), [qa, tau],
                           [q_aval, tau_aval], [q_aval], aliases=[(0, 0)])
    (r,) = _in_lowering(ctx, lambda a: [triu(shapes.slice(a, (0,) * a.ndim, r_aval.shape))],
                        [a], [aval])
    return [q, r]


def _qr_jvp(primals, tangents, *, full_matrices):
    # See J. Townsend, "Differentiating the QR decomposition" (2018).
    (x,), (dx,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    m, n = x.shape[-2:]
    if m < n or (full_matrices and m != n):
        raise NotImplementedError("Unimplemented case of QR decomposition derivative: "
                                  "needs m >= n and full_matrices=False (or square).")
    dx_rinv = triangular_solve(r, ad.instantiate_zeros(dx))   # dx @ r^{-1}
    qt_dx_rinv = _matmul(_H(q), dx_rinv)
    low = tril(qt_dx_rinv, -1)
    do = ew.sub(low, _H(low))                                  # skew-symmetric
    if _is_complex(x):
        imag_diag = ew.sub(qt_dx_rinv, ew.convert_element_type(_real(qt_dx_rinv), x.dtype))
        do = ew.add(do, ew.mul(_eye_like(do), imag_diag))
    dq = ew.add(_matmul(q, ew.sub(do, qt_dx_rinv)), dx_rinv)
    dr = _matmul(ew.sub(qt_dx_rinv, do), r)
    return [q, r], [dq, dr]


qr_p = standard_primitive("qr", _qr_abstract_eval, multiple_results=True)
ad.primitive_jvps[qr_p] = _qr_jvp
_batch_to_front(qr_p)
mlir.register_lowering(qr_p, _qr_lowering)


# ---- eigh ----

def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True,
         subset_by_index=None):
    """Eigendecomposition of a Hermitian matrix: returns ``(v, w)`` with ascending
    eigenvalues ``w`` and eigenvectors in the columns of ``v``.

    >>> v, w = eigh(xform.numpy.array([[2., 0.], [0., 1.]]))
    >>> w
    Array([1., 2.], dtype=float32)
    """
    if subset_by_index is not None:
        raise NotImplementedError("eigh(subset_by_index=...) is not supported")
    _check_matrix("eigh", x)
    if symmetrize_input:
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower))
    return v, w


def _eigh_abstract_eval(x, *, lower):
    _check_matrix("eigh", x)
    real = np.dtype(np.finfo(x.dtype).dtype)
    return [ShapedArray(x.shape, x.dtype), ShapedArray(x.shape[:-1], real)]


def _eigh_lowering(ctx, x, *, lower):
    aval = ctx.avals_in[0]
    v_aval, w_aval = ctx.avals_out
    info_aval = _info_aval(aval)
    prefix = "he" if dtypes.issubdtype(aval.dtype, np.complexfloating) else "sy"
    v, w, info = ffi.solver_call(
        ctx, (f"{prefix}evd_ffi", {"mode": ffi.u8(ord("V")),
                                   "uplo": ffi.u8(ord("L" if lower else "U"))}),
        ("syevd_ffi", {"lower": ffi.flag(lower), "algorithm": ffi.u8(0)}),
        [x], [aval], [v_aval, w_aval, info_aval], aliases=[(0, 0)])
    return _in_lowering(ctx, _nan_on_failure, [info, v, w], [info_aval, v_aval, w_aval])


def _eigh_jvp(primals, tangents, *, lower):
    # dw = diag(V^H dA V);  dV = V (F o (V^H dA V)),  F_ij = 1 / (w_j - w_i), F_ii = 0.
    (a,), (t,) = primals, tangents
    v, w = eigh_p.bind(a, lower=lower)
    wc = ew.convert_element_type(w, a.dtype)
    n = a.shape[-1]
    shape = (*w.shape, n)
    w_row = shapes.broadcast_in_dim(wc, shape, (*range(w.ndim - 1), w.ndim))
    w_col = shapes.broadcast_in_dim(wc, shape, tuple(range(w.ndim)))
    eye = _eye_like(a)
    F = ew.sub(ew.div(ew.convert_element_type(np.array(1), a.dtype),
                      ew.add(eye, ew.sub(w_row, w_col))), eye)
    vdag_adot_v = _matmul(_matmul(_H(v), ad.instantiate_zeros(t)), v)
    dv = _matmul(v, ew.mul(F, vdag_adot_v))
    dw = _real(_diag(vdag_adot_v))
    return [v, w], [dv, dw]


eigh_p = standard_primitive("eigh", _eigh_abstract_eval, multiple_results=True)
ad.primitive_jvps[eigh_p] = _eigh_jvp
_batch_to_front(eigh_p)
mlir.register_lowering(eigh_p, _eigh_lowering)


# ---- svd ----

def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """Singular value decomposition ``x = u @ diag(s) @ vt``, ``s`` descending.

    Returns ``(u, s, vt)``, or ``s`` alone when ``compute_uv=False``.

    >>> svd(xform.numpy.array([[3., 0.], [0., -4.]]), compute_uv=False)
    Array([4., 3.], dtype=float32)
    """
    if subset_by_index is not None:
        raise NotImplementedError("svd(subset_by_index=...) is not supported")
    _check_matrix("svd", x, square=False)
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vt = outs
    return u, s, vt


def _svd_shapes(shape, full_matrices, compute_uv):
    *batch, m, n = shape
    k = min(m, n)
    if full_matrices or not compute_uv:
        return (*batch, k), (*batch, m, m), (*batch, n, n)
    return (*batch, k), (*batch, m, k), (*batch, k, n)


def _svd_abstract_eval(x, *, full_matrices, compute_uv):
    _check_matrix("svd", x, square=False)
    real = np.dtype(np.finfo(x.dtype).dtype)
    s, u, vt = _svd_shapes(x.shape, full_matrices, compute_uv)
    if not compute_uv:
        return [ShapedArray(s, real)]
    return [ShapedArray(s, real), ShapedArray(u, x.dtype), ShapedArray(vt, x.dtype)]


def _svd_lowering(ctx, x, *, full_matrices, compute_uv):
    aval = ctx.avals_in[0]
    if not np.prod(aval.shape):  # as JAX's: no values, identity factors (LAPACK rejects it)
        def empty():
            s_aval, *uv = ctx.avals_out
            eyes = [shapes.broadcast_in_dim(
                ew.convert_element_type(ew.eq(shapes.broadcasted_iota(np.int32, a.shape[-2:], 0),
                                              shapes.broadcasted_iota(np.int32, a.shape[-2:], 1)),
                                        a.dtype), a.shape, (a.ndim - 2, a.ndim - 1)) for a in uv]
            return [shapes.full(s_aval.shape, 0, s_aval.dtype)] + eyes
        return _in_lowering(ctx, empty, [], [])
    if ctx.module_ctx.platform in ffi.GPU_PLATFORMS:
        s, u, vt, info = _svd_gpu(ctx, x, full_matrices=full_matrices, compute_uv=compute_uv)
    else:
        s_shape, u_shape, vt_shape = _svd_shapes(aval.shape, full_matrices, compute_uv)
        real = np.dtype(np.finfo(aval.dtype).dtype)
        avals = [aval, ShapedArray(s_shape, real), ShapedArray(u_shape, aval.dtype),
                 ShapedArray(vt_shape, aval.dtype), _info_aval(aval)]
        mode = "N" if not compute_uv else ("A" if full_matrices else "S")
        _, s, u, vt, info = ffi.solver_call(ctx, ("gesdd_ffi", {"mode": ffi.u8(ord(mode))}),
                                            None, [x], [aval], avals, aliases=[(0, 0)])
    outs = [s, u, vt] if compute_uv else [s]
    return _in_lowering(ctx, _nan_on_failure, [info, *outs], [_info_aval(aval), *ctx.avals_out])


def _svd_gpu(ctx, x, *, full_matrices, compute_uv):
    """``(s, u, vt, info)`` from cuSOLVER, as JAX picks the kernel: Jacobi (gesvdj) up to
    1024 x 1024, else QR-based gesvd (on the transpose when m < n). Without
    ``compute_uv``, u and vt are whatever the kernel gave (unused)."""
    aval = ctx.avals_in[0]
    *batch, m, n = aval.shape
    k, real = min(m, n), np.dtype(np.finfo(aval.dtype).dtype)
    s_aval, info_aval = ShapedArray((*batch, k), real), _info_aval(aval)
    if m <= 1024 and n <= 1024:
        econ = not full_matrices and m > 32 and n > 32   # gesvdj's batched path has none
        u_aval = ShapedArray((*batch, m, k if econ else m), aval.dtype)
        v_aval = ShapedArray((*batch, n, k if econ else n), aval.dtype)
        _, s, u, v, info = ffi.solver_call(
            ctx, None, ("gesvdj_ffi", {"full_matrices": ffi.flag(not econ),
                                       "compute_uv": ffi.flag(compute_uv)}),
            [x], [aval], [aval, s_aval, u_aval, v_aval, info_aval], aliases=[(0, 0)])
        if not compute_uv:
            return s, u, v, info

        def finish(u, v):   # vt = v^H, cut to the economy shapes if asked
            vt = _H(v)
            if not full_matrices and not econ:
                u = shapes.slice(u, (0,) * u.ndim, (*batch, m, k))
                vt = shapes.slice(vt, (0,) * vt.ndim, (*batch, k, n))
            return [u, vt]
        u, vt = _in_lowering(ctx, finish, [u, v], [u_aval, v_aval])
        return s, u, vt, info
    transposed = m < n   # gesvd wants m >= n: it factors the transpose, row-major
    _, u_shape, vt_shape = _svd_shapes(aval.shape, full_matrices, True)
    if not compute_uv:   # the kernel writes neither
        u_shape = vt_shape = ()
    u_aval, vt_aval = ShapedArray(u_shape, aval.dtype), ShapedArray(vt_shape, aval.dtype)
    outs = [aval, s_aval, vt_aval, u_aval] if transposed else [aval, s_aval, u_aval, vt_aval]
    attributes = {"full_matrices": ffi.flag(full_matrices), "compute_uv": ffi.flag(compute_uv),
                  "transposed": ffi.flag(transposed)}
    _, s, a, b, info = ffi.solver_call(ctx, None, ("gesvd_ffi", attributes), [x], [aval],
                                       [*outs, info_aval], aliases=[(0, 0)],
                                       column_major=not transposed)
    return (s, b, a, info) if transposed else (s, a, b, info)


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    # The standard SVD differential (e.g. Townsend 2016), with the rectangular terms.
    (a,), (da,) = primals, tangents
    outs = svd_p.bind(a, full_matrices=False, compute_uv=True)
    s, u, vt = outs
    if compute_uv and full_matrices:
        raise NotImplementedError("Singular value decomposition JVP not implemented for "
                                  "full matrices; use full_matrices=False.")
    da = ad.instantiate_zeros(da)
    ut, v = _H(u), _H(vt)
    ds_mat = _matmul(_matmul(ut, da), v)
    ds = _real(_diag(ds_mat))
    if not compute_uv:
        return [s], [ds]
    k = s.shape[-1]
    mat = (*s.shape, k)
    sc = ew.convert_element_type(s, a.dtype)
    s_row = shapes.broadcast_in_dim(sc, mat, (*range(s.ndim - 1), s.ndim))   # s_j
    s_col = shapes.broadcast_in_dim(sc, mat, tuple(range(s.ndim)))            # s_i
    s_diffs = ew.mul(ew.add(s_row, s_col), ew.sub(s_row, s_col))
    one = ew.convert_element_type(np.array(1), a.dtype)
    is_zero = ew.convert_element_type(ew.eq(s_diffs, ew.convert_element_type(
        np.array(0), a.dtype)), a.dtype)
    F = ew.sub(ew.div(one, ew.add(s_diffs, is_zero)), is_zero)
    dSS = ew.mul(s_row, ds_mat)
    SdS = ew.mul(s_col, ds_mat)
    s_zero = ew.convert_element_type(ew.eq(sc, ew.convert_element_type(np.array(0), a.dtype)),
                                     a.dtype)
    s_inv = ew.sub(ew.div(one, ew.add(sc, s_zero)), s_zero)
    s_inv_mat = ew.mul(_eye_like(ds_mat), shapes.broadcast_in_dim(
        s_inv, mat, (*range(s.ndim - 1), s.ndim)))
    half = ew.convert_element_type(np.array(0.5), a.dtype)
    dUdV_diag = ew.mul(ew.mul(half, ew.sub(ds_mat, _H(ds_mat))), s_inv_mat)
    du = _matmul(u, ew.add(ew.mul(F, ew.add(dSS, _H(dSS))), dUdV_diag))
    dv = _matmul(v, ew.mul(F, ew.add(SdS, _H(SdS))))
    m, n = a.shape[-2:]
    if m > n:
        dav = _matmul(da, v)
        du = ew.add(du, ew.div(ew.sub(dav, _matmul(u, _matmul(ut, dav))),
                               _bcast_rows(sc, dav.shape)))
    if n > m:
        dahu = _matmul(_H(da), u)
        dv = ew.add(dv, ew.div(ew.sub(dahu, _matmul(v, _matmul(vt, dahu))),
                               _bcast_rows(sc, dahu.shape)))
    return [s, u, vt], [ds, du, _H(dv)]


def _bcast_rows(vec, shape):
    """vec (..., k) broadcast along rows of a (..., r, k) matrix."""
    return shapes.broadcast_in_dim(vec, shape, (*range(vec.ndim - 1), vec.ndim))


svd_p = standard_primitive("svd", _svd_abstract_eval, multiple_results=True)
ad.primitive_jvps[svd_p] = _svd_jvp
_batch_to_front(svd_p)
mlir.register_lowering(svd_p, _svd_lowering)
