"""The factorizations with orthogonal/unitary factors, ``qr``, ``eigh`` and ``svd``, as
primitives lowered to jaxlib's LAPACK kernels, cuSOLVER's on GPU (part of
``xform.lax.linalg``, which re-exports them; the shared helpers are in
``linalg_common.py``).
"""
import enum

import numpy as np

from xform.core import dtypes
from xform.core.config import config
from xform.core.avals import ShapedArray
from xform.interpreters import ad, ffi, mlir
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import standard_primitive
from xform.lax.linalg_common import (_H, _batch_to_front, _check_matrix, _diag, _eye_like,
                                     _in_lowering, _info_aval, _is_complex, _matmul,
                                     _nan_on_failure, _real, symmetrize, tril, triu)
from xform.lax.linalg_triangular import _permutation_matrix, _solve, triangular_solve


# ---- qr ----

def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """QR decomposition ``x = q @ r``, ``q`` orthonormal columns, ``r`` upper triangular.

    With ``full_matrices=False`` (economy), ``q`` is (..., m, k) and ``r`` (..., k, n)
    where k = min(m, n). ``pivoting=True`` (LAPACK's geqp3; on GPU jaxlib's hybrid
    host/MAGMA kernel, as JAX) is the rank-revealing
    ``x[..., p] = q @ r`` and returns ``(q, r, p)``, ``p`` int32 of shape (..., n).

    >>> q, r = qr(xform.numpy.array([[3., 0.], [4., 5.]]))
    >>> abs(float(r[0, 0]))
    5.0
    """
    del use_magma
    _check_matrix("qr", x, square=False)
    return tuple(qr_p.bind(x, pivoting=bool(pivoting), full_matrices=bool(full_matrices)))


def _qr_abstract_eval(x, *, pivoting, full_matrices):
    _check_matrix("qr", x, square=False)
    *batch, m, n = x.shape
    cols = m if full_matrices else min(m, n)
    outs = [ShapedArray((*batch, m, cols), x.dtype), ShapedArray((*batch, cols, n), x.dtype)]
    return outs + [ShapedArray((*batch, n), np.dtype(np.int32))] * pivoting


def _geqp3(ctx, x, aval):
    """Column-pivoted geqrf: ``(a, 0-based pivots, taus)``. LAPACK's on CPU; on GPU, as
    JAX, jaxlib's hybrid kernel (host LAPACK, or MAGMA per ``jax_use_magma``)."""
    *batch, m, n = aval.shape
    p_aval = ShapedArray((*batch, n), np.dtype(np.int32))
    tau_aval = ShapedArray((*batch, min(m, n)), aval.dtype)
    (jpvt,) = _in_lowering(ctx, lambda: [shapes.full(p_aval.shape, 0, np.int32)], [], [])
    magma = {"magma": ffi.ir_attribute(str(config.jax_use_magma))}
    a, jpvt, tau = ffi.solver_call(ctx, ("geqp3_ffi", {}), ("hybrid_geqp3", magma),
                                   [x, jpvt], [aval, p_aval],
                                   [aval, p_aval, tau_aval], aliases=[(0, 0), (1, 1)])
    (p,) = _in_lowering(ctx, lambda j: [ew.sub(j, np.int32(1))], [jpvt], [p_aval])
    return a, tau, p


def _qr_lowering(ctx, x, *, pivoting, full_matrices):
    aval = ctx.avals_in[0]
    q_aval, r_aval = ctx.avals_out[:2]
    *batch, m, n = aval.shape
    cols = q_aval.shape[-1]
    tau_aval = ShapedArray((*batch, min(m, n)), aval.dtype)
    p = []
    if pivoting and m and n:
        a, tau, *p = _geqp3(ctx, x, aval)
    else:
        if pivoting:   # (as JAX: zeros for an empty matrix)
            p = _in_lowering(ctx, lambda: [shapes.full((*batch, n), 0, np.int32)], [], [])
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
    return [q, r, *p]


def _thin_qr_jvp(q, r, dx):
    """dq, dr of ``x = q r`` with m >= n and economy factors. See J. Townsend,
    "Differentiating the QR decomposition" (2018)."""
    dx_rinv = triangular_solve(r, dx)                          # dx @ r^{-1}
    qt_dx_rinv = _matmul(_H(q), dx_rinv)
    low = tril(qt_dx_rinv, -1)
    do = ew.sub(low, _H(low))                                  # skew-symmetric
    if _is_complex(dx):
        imag_diag = ew.sub(qt_dx_rinv, ew.convert_element_type(_real(qt_dx_rinv), dx.dtype))
        do = ew.add(do, ew.mul(_eye_like(do), imag_diag))
    dq = ew.add(_matmul(q, ew.sub(do, qt_dx_rinv)), dx_rinv)
    dr = _matmul(ew.sub(qt_dx_rinv, do), r)
    return dq, dr


def _cols(x, start, stop):
    return shapes.slice(x, (0,) * (x.ndim - 1) + (start,), (*x.shape[:-1], stop))


def _rows(x, start, stop):
    return shapes.slice(x, (0,) * (x.ndim - 2) + (start, 0),
                        (*x.shape[:-2], stop, x.shape[-1]))


def _qr_jvp(primals, tangents, *, pivoting, full_matrices):
    # JAX's rule: the thin (m >= n) case, and from it the wide one (x = [x1 x2],
    # dr2 = dq^H x2 + q^H dx2) and the full-q one for m > n (arXiv:2409.13374, eqs. 32-33).
    (x,), (dx,) = primals, tangents
    q, r, *p = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices)
    dx = ad.instantiate_zeros(dx)
    m, n = x.shape[-2:]
    if pivoting:   # dx[..., p] = dx @ P^T
        dx = _matmul(dx, _H(_permutation_matrix(p[0], dx.dtype)))
    if m < n:
        dq, dr1 = _thin_qr_jvp(q, _cols(r, 0, m), _cols(dx, 0, m))
        x2 = _cols(x, m, n)
        if pivoting:
            x2 = _cols(_matmul(x, _H(_permutation_matrix(p[0], x.dtype))), m, n)
        dr2 = ew.add(_matmul(_H(dq), x2), _matmul(_H(q), _cols(dx, m, n)))
        dr = shapes.concatenate([dr1, dr2], dr1.ndim - 1)
    elif not full_matrices or m == n:
        dq, dr = _thin_qr_jvp(q, r, dx)
    else:
        q_mn, q_mp = _cols(q, 0, n), _cols(q, n, m)
        dq_mn, dr_nn = _thin_qr_jvp(q_mn, _rows(r, 0, n), dx)
        q_nn, q_pn = _rows(q_mn, 0, n), _rows(q_mn, n, m)
        dq_nn, dq_pn = _rows(dq_mn, 0, n), _rows(dq_mn, n, m)
        # z_pn = q_pn (q_nn - I)^{-1}, by solving (q_nn - I)^H z_pn^H = q_pn^H
        z_pn_h = _solve(_H(ew.sub(q_nn, _eye_like(q_nn))), _H(q_pn))
        z_pn = _H(z_pn_h)
        dq_mp = ew.sub(_matmul(dq_mn, z_pn_h),
                       _matmul(ew.add(q_mn, _matmul(q_mp, z_pn)),
                               _H(ew.sub(dq_pn, _matmul(z_pn, dq_nn)))))
        dq = shapes.concatenate([dq_mn, dq_mp], dq_mn.ndim - 1)
        zeros = shapes.full((*dr_nn.shape[:-2], m - n, n), 0, dr_nn.dtype)
        dr = shapes.concatenate([dr_nn, zeros], dr_nn.ndim - 2)
    return [q, r, *p], [dq, dr] + [ad.Zero(v.aval) for v in p]


qr_p = standard_primitive("qr", _qr_abstract_eval, multiple_results=True)
ad.primitive_jvps[qr_p] = _qr_jvp
_batch_to_front(qr_p)
mlir.register_lowering(qr_p, _qr_lowering)


def geqrf(x):
    """LAPACK's QR in its raw form: ``(a, taus)``, ``r`` in ``a``'s upper triangle and
    the Householder reflectors below it (``jnp.linalg.qr(mode="raw")``). Not
    differentiable, as JAX's."""
    return tuple(geqrf_p.bind(x))


def _geqrf_abstract_eval(x):
    _check_matrix("geqrf", x, square=False)
    *batch, m, n = x.shape
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*batch, min(m, n)), x.dtype)]


def _geqrf_lowering(ctx, x):
    return ffi.solver_call(ctx, ("geqrf_ffi", {}), ("geqrf_ffi", {}), [x], ctx.avals_in,
                           ctx.avals_out, aliases=[(0, 0)])


geqrf_p = standard_primitive("geqrf", _geqrf_abstract_eval, multiple_results=True)
_batch_to_front(geqrf_p)
mlir.register_lowering(geqrf_p, _geqrf_lowering)


# ---- eigh ----

class EighImplementation(enum.Enum):
    """Algorithm of ``eigh``: QR (LAPACK's syevd on CPU, cuSOLVER's on GPU: the default
    there), JACOBI (cuSOLVER's syevj, GPU only) or QDWH (TPU only, as JAX)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True,
         subset_by_index=None, implementation=None):
    """Eigendecomposition of a Hermitian matrix: returns ``(v, w)`` with ascending
    eigenvalues ``w`` and eigenvectors in the columns of ``v``. ``implementation`` (an
    ``EighImplementation``) picks the algorithm; one the platform lacks raises
    NotImplementedError when lowered, as JAX.

    >>> v, w = eigh(xform.numpy.array([[2., 0.], [0., 1.]]))
    >>> w
    Array([1., 2.], dtype=float32)
    """
    _check_matrix("eigh", x)
    if subset_by_index is not None and tuple(subset_by_index) != (0, x.shape[-1]):
        raise NotImplementedError("subset_by_index not supported on CPU and GPU")
    if symmetrize_input:
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower), algorithm=implementation)
    return v, w


def _eigh_abstract_eval(x, *, lower, algorithm):
    _check_matrix("eigh", x)
    real = np.dtype(np.finfo(x.dtype).dtype)
    return [ShapedArray(x.shape, x.dtype), ShapedArray(x.shape[:-1], real)]


def _eigh_lowering(ctx, x, *, lower, algorithm):
    if algorithm == EighImplementation.QDWH:
        raise NotImplementedError("QDWH implementation is only supported on TPU")
    if algorithm == EighImplementation.JACOBI and ctx.module_ctx.platform == "cpu":
        raise NotImplementedError("Jacobi implementation is not supported on CPU")
    gpu_algorithm = 0 if algorithm is None else 2 if algorithm == EighImplementation.JACOBI \
        else 1   # (cuSOLVER's: 0 picks by size, 1 QR, 2 Jacobi)
    aval = ctx.avals_in[0]
    v_aval, w_aval = ctx.avals_out
    info_aval = _info_aval(aval)
    prefix = "he" if dtypes.issubdtype(aval.dtype, np.complexfloating) else "sy"
    v, w, info = ffi.solver_call(
        ctx, (f"{prefix}evd_ffi", {"mode": ffi.u8(ord("V")),
                                   "uplo": ffi.u8(ord("L" if lower else "U"))}),
        ("syevd_ffi", {"lower": ffi.flag(lower), "algorithm": ffi.u8(gpu_algorithm)}),
        [x], [aval], [v_aval, w_aval, info_aval], aliases=[(0, 0)])
    return _in_lowering(ctx, _nan_on_failure, [info, v, w], [info_aval, v_aval, w_aval])


def _eigh_jvp(primals, tangents, *, lower, algorithm):
    # dw = diag(V^H dA V);  dV = V (F o (V^H dA V)),  F_ij = 1 / (w_j - w_i), F_ii = 0.
    (a,), (t,) = primals, tangents
    v, w = eigh_p.bind(a, lower=lower, algorithm=algorithm)
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

class SvdAlgorithm(enum.Enum):
    """Algorithm of ``svd``. DEFAULT: LAPACK's gesdd on CPU; on GPU cuSOLVER's Jacobi
    (gesvdj) up to 1024 x 1024, else QR (gesvd). QR: gesvd. JACOBI, POLAR (gesvdp): GPU
    only. DIVIDE_AND_CONQUER: gesdd (CPU, ROCm)."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """Singular value decomposition ``x = u @ diag(s) @ vt``, ``s`` descending.

    Returns ``(u, s, vt)``, or ``s`` alone when ``compute_uv=False``. ``algorithm`` (an
    ``SvdAlgorithm``) picks the kernel; one the platform lacks raises
    NotImplementedError when lowered, as JAX.

    >>> svd(xform.numpy.array([[3., 0.], [0., -4.]]), compute_uv=False)
    Array([4., 3.], dtype=float32)
    """
    _check_matrix("svd", x, square=False)
    rank = min(x.shape[-2:])
    if subset_by_index is not None and tuple(subset_by_index) != (0, rank):
        if full_matrices:
            raise ValueError("full_matrices and subset_by_index cannot both be set")
        raise NotImplementedError("subset_by_index not implemented for CPU and GPU")
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                      algorithm=algorithm)
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


def _svd_abstract_eval(x, *, full_matrices, compute_uv, algorithm):
    _check_matrix("svd", x, square=False)
    real = np.dtype(np.finfo(x.dtype).dtype)
    s, u, vt = _svd_shapes(x.shape, full_matrices, compute_uv)
    if not compute_uv:
        return [ShapedArray(s, real)]
    return [ShapedArray(s, real), ShapedArray(u, x.dtype), ShapedArray(vt, x.dtype)]


def _svd_lowering(ctx, x, *, full_matrices, compute_uv, algorithm):
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
        s, u, vt, info = _svd_gpu(ctx, x, full_matrices=full_matrices, compute_uv=compute_uv,
                                  algorithm=algorithm)
    else:
        if algorithm in (None, SvdAlgorithm.DEFAULT, SvdAlgorithm.DIVIDE_AND_CONQUER):
            fn = "gesdd_ffi"
        elif algorithm == SvdAlgorithm.QR:
            fn = "gesvd_ffi"
        else:
            raise NotImplementedError(
                "The SVD Jacobi and Polar algorithms are not implemented on CPU.")
        s_shape, u_shape, vt_shape = _svd_shapes(aval.shape, full_matrices, compute_uv)
        real = np.dtype(np.finfo(aval.dtype).dtype)
        avals = [aval, ShapedArray(s_shape, real), ShapedArray(u_shape, aval.dtype),
                 ShapedArray(vt_shape, aval.dtype), _info_aval(aval)]
        mode = "N" if not compute_uv else ("A" if full_matrices else "S")
        _, s, u, vt, info = ffi.solver_call(ctx, (fn, {"mode": ffi.u8(ord(mode))}),
                                            None, [x], [aval], avals, aliases=[(0, 0)])
    outs = [s, u, vt] if compute_uv else [s]
    return _in_lowering(ctx, _nan_on_failure, [info, *outs], [_info_aval(aval), *ctx.avals_out])


def _gpu_svd_kernel(platform, algorithm, m, n):
    """The GPU solver's kernel for ``algorithm``, as JAX resolves it."""
    if algorithm is None or algorithm == SvdAlgorithm.DEFAULT:
        return "gesvdj" if m <= 1024 and n <= 1024 else "gesvd"
    if algorithm == SvdAlgorithm.DIVIDE_AND_CONQUER:
        if platform != "rocm":
            raise NotImplementedError(
                "Divide-and-conquer SVD (SvdAlgorithm.DIVIDE_AND_CONQUER) is only supported "
                "on AMD (ROCm) GPUs, not on NVIDIA CUDA.")
        return "gesdd"
    kernels = {SvdAlgorithm.QR: "gesvd", SvdAlgorithm.JACOBI: "gesvdj",
               SvdAlgorithm.POLAR: "gesvdp"}
    if algorithm not in kernels:
        raise NotImplementedError(f"Unsupported SVD algorithm on GPU: {algorithm!r}")
    return kernels[algorithm]


def _svd_gpu(ctx, x, *, full_matrices, compute_uv, algorithm):
    """``(s, u, vt, info)`` from cuSOLVER (hipSOLVER), with JAX's choice of kernel: by
    default Jacobi (gesvdj) up to 1024 x 1024, else QR-based gesvd (on the transpose when
    m < n). Without ``compute_uv``, u and vt are whatever the kernel gave (unused)."""
    aval = ctx.avals_in[0]
    *batch, m, n = aval.shape
    k, real = min(m, n), np.dtype(np.finfo(aval.dtype).dtype)
    s_aval, info_aval = ShapedArray((*batch, k), real), _info_aval(aval)
    kernel = _gpu_svd_kernel(ctx.module_ctx.platform, algorithm, m, n)
    if kernel == "gesdd":
        _, u_shape, vt_shape = _svd_shapes(aval.shape, full_matrices, True)
        if not compute_uv:
            u_shape = vt_shape = ()
        u_aval, vt_aval = ShapedArray(u_shape, aval.dtype), ShapedArray(vt_shape, aval.dtype)
        _, s, u, vt, info = ffi.solver_call(
            ctx, None, ("gesdd_ffi", {"full_matrices": ffi.flag(full_matrices),
                                      "compute_uv": ffi.flag(compute_uv),
                                      "transposed": ffi.flag(False)}),
            [x], [aval], [aval, s_aval, u_aval, vt_aval, info_aval], aliases=[(0, 0)])
        return s, u, vt, info
    if kernel in ("gesvdj", "gesvdp"):
        # gesvdj's batched path has no economy mode (JAX uses it up to 32 x 32)
        econ = not full_matrices and (kernel == "gesvdp" or (m > 32 and n > 32))
        u_aval = ShapedArray((*batch, m, k if econ else m), aval.dtype)
        v_aval = ShapedArray((*batch, n, k if econ else n), aval.dtype)
        _, s, u, v, info = ffi.solver_call(
            ctx, None, (f"{kernel}_ffi", {"full_matrices": ffi.flag(not econ),
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


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, algorithm):
    # The standard SVD differential (e.g. Townsend 2016), with the rectangular terms.
    (a,), (da,) = primals, tangents
    outs = svd_p.bind(a, full_matrices=False, compute_uv=True, algorithm=algorithm)
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
