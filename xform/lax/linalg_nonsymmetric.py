"""The factorizations of general (non-Hermitian) square matrices, ``eig``, ``schur`` and
``hessenberg``, and ``householder_product`` (Q from Householder reflectors), as
primitives lowered to jaxlib's LAPACK kernels (geev, gees, gehrd, orgqr/ungqr); part of
``xform.lax.linalg``, which re-exports them.

As in JAX, ``schur`` and ``hessenberg`` run on CPU only; ``eig`` runs on CPU and GPU,
where it calls what JAX picks by default: cuSOLVER's geev on CUDA when no left
eigenvectors are asked for, else jaxlib's "hybrid" kernel (LAPACK on the host or MAGMA).
Only ``eig`` is differentiable (eigenvalues; eigenvectors on request, as JAX's
``enable_eigvec_derivs``); ``schur``, ``hessenberg`` and ``householder_product`` are
not, as in JAX.
"""
import enum
import warnings

import numpy as np

from xform.core import dtypes
from xform.core.config import config
from xform.core.avals import ShapedArray
from xform.interpreters import ad, ffi, mlir
from xform.lax import bitwise
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import standard_primitive
from xform.lax.complex import complex as make_complex
from xform.lax.complex import conj, imag
from xform.lax.cumulative import cumsum
from xform.lax.linalg_common import (_H, _T, _batch_to_front, _check_matrix, _diag,
                                     _eye_like, _in_lowering, _info_aval, _is_complex,
                                     _matmul, _nan_on_failure, _real)
from xform.lax.linalg_triangular import _solve
from xform.lax.reductions import argmax, reduce_sum


def _complex_dtype(dtype):
    return np.dtype(np.complex128 if np.dtype(dtype) in (np.float64, np.complex128)
                    else np.complex64)


def _lapack_call(ctx, fn, attributes, operands, avals_out, aliases=()):
    """jaxlib's LAPACK kernel ``fn`` on CPU; NotImplementedError naming the primitive
    elsewhere (JAX implements schur and hessenberg on CPU only)."""
    platform = ctx.module_ctx.platform
    if platform != "cpu":
        raise NotImplementedError(
            f"{ctx.primitive.name} is only implemented on CPU (xform lowers it to LAPACK's "
            f"{fn.removesuffix('_ffi')}), not on {platform}")
    return ffi.solver_call(ctx, (fn, attributes), None, operands, ctx.avals_in, avals_out,
                           aliases=aliases)


def _check_square(name, x, square_msg=None):
    """JAX's checks and messages: rank, then squareness, then dtype."""
    if x.ndim < 2:
        raise TypeError(f"Input 0 to {name} must have rank at least 2, but got "
                        f"shape={x.shape}")
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(square_msg or f"The input to {name} must be a square matrix. Got "
                         f"shape {x.shape}.")
    _check_matrix(name, x)


# ---- eig ----

class EigImplementation(enum.Enum):
    """Algorithm of ``eig``: LAPACK (geev on the host, also from GPU programs through
    jaxlib's hybrid kernel), CUSOLVER (cuSOLVER's geev, CUDA, right eigenvectors only)
    or MAGMA (the hybrid kernel's MAGMA path, GPU)."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        enable_eigvec_derivs=False, implementation=None, use_magma=None):
    """Eigendecomposition of a general square matrix (CPU, GPU): ``[w, vl, vr]``, with
    ``vl``/``vr`` left out when not asked for; complex whatever ``x``'s dtype. A batch element the solver fails on comes back as
    NaNs. ``implementation`` (an ``EigImplementation``) picks the kernel as JAX's does;
    ``use_magma`` (deprecated in JAX) is ``implementation=MAGMA`` or ``LAPACK``.

    >>> w, vr = eig(xform.numpy.array([[2., 0.], [0., 3.]]), compute_left_eigenvectors=False)
    >>> w
    Array([2.+0.j, 3.+0.j], dtype=complex64)
    """
    if use_magma is not None:
        warnings.warn("use_magma is deprecated, please use "
                      "implementation=EigImplementation.MAGMA instead.", DeprecationWarning,
                      stacklevel=2)
        implementation = EigImplementation.MAGMA if use_magma else EigImplementation.LAPACK
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs),
                      implementation=implementation)


def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors,
                       enable_eigvec_derivs, implementation):
    _check_square("eig", x)
    dt = _complex_dtype(x.dtype)
    count = compute_left_eigenvectors + compute_right_eigenvectors
    return [ShapedArray(x.shape[:-1], dt)] + [ShapedArray(x.shape, dt)] * count


def _eig_lowering(ctx, x, *, compute_left_eigenvectors, compute_right_eigenvectors,
                  enable_eigvec_derivs, implementation):
    if ctx.module_ctx.platform in ffi.GPU_PLATFORMS:
        return _eig_gpu_lowering(ctx, x, compute_left_eigenvectors, compute_right_eigenvectors,
                                 implementation)
    if implementation and implementation != EigImplementation.LAPACK:
        raise ValueError("Only the lapack implementation is supported on CPU.")
    aval = ctx.avals_in[0]
    w_aval = ctx.avals_out[0]
    v_aval = ShapedArray(aval.shape, w_aval.dtype)
    real = not _is_complex(aval)
    w_parts = [ShapedArray(aval.shape[:-1], aval.dtype)] * (2 if real else 1)
    mode = {True: ffi.u8(ord("V")), False: ffi.u8(ord("N"))}
    *w, vl, vr, info = _lapack_call(
        ctx, "geev_ffi", {"compute_left": mode[compute_left_eigenvectors],
                          "compute_right": mode[compute_right_eigenvectors]},
        [x], [*w_parts, v_aval, v_aval, _info_aval(aval)])
    if real:   # w = wr + i wi
        w = _in_lowering(ctx, lambda re, im: [make_complex(re, im)], w, w_parts)
    outs = [w[0]] + [vl] * compute_left_eigenvectors + [vr] * compute_right_eigenvectors
    return _in_lowering(ctx, _nan_on_failure, [info, *outs],
                        [_info_aval(aval), *ctx.avals_out])


def _eig_gpu_lowering(ctx, x, compute_left, compute_right, implementation):
    """As JAX: cuSOLVER's geev on CUDA without left eigenvectors (or with
    ``implementation=CUSOLVER``), else jaxlib's hybrid kernel (host LAPACK, or MAGMA per
    ``jax_use_magma`` unless ``implementation`` says)."""
    if implementation == EigImplementation.CUSOLVER:
        if ctx.module_ctx.platform != "cuda":
            raise RuntimeError("Nonsymmetric eigendecomposition requires cusolver 11.7.1 or "
                               "newer")
        if compute_left:
            raise NotImplementedError("Left eigenvectors are not supported by cusolver")
    elif ctx.module_ctx.platform != "cuda" or compute_left or implementation is not None:
        magma = (None if implementation is None
                 else "on" if implementation == EigImplementation.MAGMA else "off")
        return _eig_hybrid_lowering(ctx, x, compute_left, compute_right, magma)
    aval = ctx.avals_in[0]
    w_aval = ctx.avals_out[0]
    v_aval = ShapedArray(aval.shape, aval.dtype)   # real input: conjugate pairs packed
    _, w, _, vr, info = ffi.solver_call(
        ctx, None, ("geev_ffi", {"left": ffi.flag(False), "right": ffi.flag(compute_right)}),
        [x], [aval], [aval, w_aval, v_aval, v_aval, _info_aval(aval)])
    outs = [w]
    if compute_right:
        if not _is_complex(aval):
            (vr,) = _in_lowering(ctx, lambda w, v: [_unpack_conjugate_pairs(w, v)], [w, vr],
                                 [w_aval, v_aval])
        outs.append(vr)
    return _in_lowering(ctx, _nan_on_failure, [info, *outs],
                        [_info_aval(aval), *ctx.avals_out])


def _eig_hybrid_lowering(ctx, x, compute_left, compute_right, magma):
    aval = ctx.avals_in[0]
    w_aval = ctx.avals_out[0]
    v_aval = ShapedArray(aval.shape, w_aval.dtype)
    real = not _is_complex(aval)
    w_parts = [ShapedArray(aval.shape[:-1], aval.dtype)] * (2 if real else 1)
    magma = str(config.jax_use_magma) if magma is None else magma
    attributes = {"magma": ffi.ir_attribute(magma),
                  "left": ffi.flag(compute_left), "right": ffi.flag(compute_right)}
    *w, vl, vr, info = ffi.solver_call(
        ctx, None, ("hybrid_eig_" + ("real" if real else "comp"), attributes), [x], [aval],
        [*w_parts, v_aval, v_aval, _info_aval(aval)])
    if real:   # w = wr + i wi
        w = _in_lowering(ctx, lambda re, im: [make_complex(re, im)], w, w_parts)
    outs = [w[0]] + [vl] * compute_left + [vr] * compute_right
    return _in_lowering(ctx, _nan_on_failure, [info, *outs],
                        [_info_aval(aval), *ctx.avals_out])


def _unpack_conjugate_pairs(w, v):
    """Complex eigenvectors from LAPACK's real packing: for a conjugate pair of
    eigenvalues (j, j+1), columns j and j+1 hold the real and imaginary parts of v_j,
    and v_{j+1} = conj(v_j)."""
    nb = w.ndim - 1
    cols = (*range(nb), nb + 1)   # w's axes among v's: all but the rows
    is_complex = ew.ne(imag(w), np.zeros((), v.dtype))
    # A pair starts where the count of complex eigenvalues so far is odd.
    count = cumsum(ew.convert_element_type(is_complex, np.int32), axis=nb)
    start = ew.eq(bitwise.bitwise_and(count, np.int32(1)), np.int32(1))
    is_real = bitwise.bitwise_not(is_complex)
    is_real, start = (shapes.broadcast_in_dim(b, v.shape, cols) for b in (is_real, start))
    zero = np.zeros((), v.dtype)
    pads = [(0, 0, 0)] * (v.ndim - 1)
    next_col = shapes.pad(v, zero, pads + [(-1, 1, 0)])   # next_col[..., j] = v[..., j+1]
    prev_col = shapes.pad(v, zero, pads + [(1, -1, 0)])   # prev_col[..., j] = v[..., j-1]
    re = ew.select_n(bitwise.bitwise_or(is_real, start), prev_col, v)
    im = ew.select_n(start, ew.neg(v), next_col)
    im = ew.select_n(is_real, im, shapes.full_like(v, 0))
    return make_complex(re, im)


def _eig_vec_jvp(w, v, da):
    # Nondegenerate perturbation theory (as JAX's): with P = v^-1 da v, dw = diag(P) and
    # dv = v (F o P) + v diag(c), F_ij = 1/(w_j - w_i), c fixing geev's normalization
    # (unit 2-norm, real largest-magnitude component).
    n = w.shape[-1]
    eye = _eye_like(v)
    shape = (*w.shape, n)
    w_row = shapes.broadcast_in_dim(w, shape, (*range(w.ndim - 1), w.ndim))
    w_col = shapes.broadcast_in_dim(w, shape, tuple(range(w.ndim)))
    one = ew.convert_element_type(np.array(1), v.dtype)
    F = ew.sub(ew.div(one, ew.add(eye, ew.sub(w_row, w_col))), eye)
    P = _matmul(_solve(v, da), v)
    U = _matmul(v, ew.mul(F, P))
    rows = v.ndim - 2
    k = argmax(ew.abs(v), rows, np.int32)
    mask = ew.convert_element_type(
        ew.eq(shapes.broadcasted_iota(np.int32, v.shape, rows),
              shapes.broadcast_in_dim(k, v.shape, (*range(rows), v.ndim - 1))), v.dtype)
    c = make_complex(ew.neg(_real(reduce_sum(ew.mul(conj(v), U), (rows,)))),
                     ew.neg(ew.div(imag(reduce_sum(ew.mul(mask, U), (rows,))),
                                   _real(reduce_sum(ew.mul(mask, v), (rows,))))))
    c = shapes.broadcast_in_dim(c, v.shape, (*range(rows), v.ndim - 1))
    return _diag(P), ew.add(U, ew.mul(v, c))


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs, implementation):
    (a,), (da,) = primals, tangents
    if (compute_left_eigenvectors or compute_right_eigenvectors) and not enable_eigvec_derivs:
        raise NotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on "
            "the input that JAX cannot check (see the enable_eigvec_derivs argument to "
            "jax.lax.linalg.eig). Pass enable_eigvec_derivs=True to jax.lax.linalg.eig to "
            "opt in. See https://github.com/jax-ml/jax/issues/2748 for discussion.")
    outs = eig_p.bind(a, compute_left_eigenvectors=compute_left_eigenvectors,
                      compute_right_eigenvectors=True,
                      enable_eigvec_derivs=enable_eigvec_derivs, implementation=implementation)
    w, vr = outs[0], outs[-1]
    da = ew.convert_element_type(ad.instantiate_zeros(da), vr.dtype)
    if not (compute_left_eigenvectors or compute_right_eigenvectors):
        # dw_i = (v^-1 da v)_ii
        return [w], [reduce_sum(ew.mul(_solve(vr, da), _T(vr)), (a.ndim - 1,))]
    dw, dvr = _eig_vec_jvp(w, vr, da)
    primal_out, tangent_out = [w], [dw]
    if compute_left_eigenvectors:
        _, dvl = _eig_vec_jvp(conj(w), outs[1], _H(da))
        primal_out.append(outs[1])
        tangent_out.append(dvl)
    if compute_right_eigenvectors:
        primal_out.append(vr)
        tangent_out.append(dvr)
    return primal_out, tangent_out


eig_p = standard_primitive("eig", _eig_abstract_eval, multiple_results=True)
ad.primitive_jvps[eig_p] = _eig_jvp
_batch_to_front(eig_p)
mlir.register_lowering(eig_p, _eig_lowering)


# ---- schur ----

def schur(x, *, compute_schur_vectors=True, sort_eig_vals=False, select_callable=None):
    """Schur decomposition ``x = q u q^H`` (CPU only): ``(u, q)``, or ``u`` alone without
    ``compute_schur_vectors``; ``u`` is quasi-upper-triangular for real ``x`` (2x2
    blocks for complex pairs), upper triangular for complex ``x``.

    >>> u, q = schur(xform.numpy.array([[1., 2.], [0., 3.]]))
    >>> u
    Array([[1., 2.],
           [0., 3.]], dtype=float32)
    """
    del select_callable
    outs = schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors),
                        sort_eig_vals=bool(sort_eig_vals))
    return list(outs)   # (a list, [t] without vectors, as JAX's)


def _schur_abstract_eval(x, *, compute_schur_vectors, sort_eig_vals):
    _check_square("schur", x)
    return [ShapedArray(x.shape, x.dtype)] * (2 if compute_schur_vectors else 1)


def _schur_lowering(ctx, x, *, compute_schur_vectors, sort_eig_vals):
    if sort_eig_vals:
        raise NotImplementedError(
            "The sort feature of LAPACK's gees routine is not implemented.")
    aval = ctx.avals_in[0]
    w_aval = ShapedArray(aval.shape[:-1], aval.dtype)
    info = _info_aval(aval)
    ws = [w_aval] * (1 if _is_complex(aval) else 2)   # w, or (wr, wi)
    t, q, *_, info_v = _lapack_call(
        ctx, "gees_ffi", {"mode": ffi.u8(ord("V" if compute_schur_vectors else "N")),
                          "sort": ffi.u8(ord("N"))},
        [x], [aval, aval, *ws, info, info], aliases=[(0, 0)])
    outs = [t, q] if compute_schur_vectors else [t]
    return _in_lowering(ctx, _nan_on_failure, [info_v, *outs], [info, *ctx.avals_out])


schur_p = standard_primitive("schur", _schur_abstract_eval, multiple_results=True)
_batch_to_front(schur_p)
mlir.register_lowering(schur_p, _schur_lowering)


# ---- hessenberg ----

def hessenberg(a):
    """Reduction to upper Hessenberg form (CPU only), LAPACK's compact ``(a, taus)``:
    the Hessenberg matrix on and above the first subdiagonal, Householder reflectors
    below it with their scale factors ``taus`` (..., n - 1)."""
    return list(hessenberg_p.bind(a))   # (a list, as JAX's)


def _hessenberg_abstract_eval(a):
    _check_square("hessenberg", a, "Argument to Hessenberg reduction must have shape "
                  f"[..., n, n], got shape {a.shape}")
    return [ShapedArray(a.shape, a.dtype),
            ShapedArray((*a.shape[:-2], a.shape[-1] - 1), a.dtype)]


def _hessenberg_lowering(ctx, a):
    aval = ctx.avals_in[0]
    info = _info_aval(aval)
    h, taus, info_v = _lapack_call(
        ctx, "gehrd_ffi", {"low": ffi.i32(1), "high": ffi.i32(aval.shape[-1])}, [a],
        [*ctx.avals_out, info], aliases=[(0, 0)])
    return _in_lowering(ctx, _nan_on_failure, [info_v, h, taus], [info, *ctx.avals_out])


hessenberg_p = standard_primitive("hessenberg", _hessenberg_abstract_eval,
                                  multiple_results=True)
_batch_to_front(hessenberg_p)
mlir.register_lowering(hessenberg_p, _hessenberg_lowering)


# ---- householder_product ----

def householder_product(a, taus):
    """The product of the Householder reflectors stored below the diagonal of ``a``
    (..., m, n), m >= n, scaled by ``taus`` (..., k), k <= n: LAPACK's orgqr/ungqr."""
    return householder_product_p.bind(a, taus)


def _householder_product_abstract_eval(a, taus):
    _check_matrix("householder_product", a, square=False)
    m, n = a.shape[-2:]
    if m < n:
        raise ValueError("The first argument to householder_product must have at least as "
                         f"many rows as columns, got shape {a.shape}")
    if taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2] or taus.shape[-1] > n:
        raise ValueError(
            "The second argument to householder_product must not have more rows than the "
            "minimum of the first argument's rows and columns (and the same batch "
            f"dimensions), got shapes {a.shape} and {taus.shape}")
    if taus.dtype != a.dtype:
        raise TypeError(f"householder_product: a and taus must have one dtype, got "
                        f"{a.dtype} and {taus.dtype}")
    return ShapedArray(a.shape, a.dtype)


def _householder_product_lowering(ctx, a, taus):
    aval = ctx.avals_in[0]
    prefix = "un" if dtypes.issubdtype(aval.dtype, np.complexfloating) else "or"
    return ffi.solver_call(ctx, (f"{prefix}gqr_ffi", {}), ("orgqr_ffi", {}), [a, taus],
                           ctx.avals_in, ctx.avals_out, aliases=[(0, 0)])[0]


householder_product_p = standard_primitive("householder_product",
                                           _householder_product_abstract_eval)
_batch_to_front(householder_product_p)
mlir.register_lowering(householder_product_p, _householder_product_lowering)
