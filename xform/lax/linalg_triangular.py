"""The triangular factorizations and solve as primitives: ``cholesky``,
``triangular_solve`` and ``lu`` (part of ``xform.lax.linalg``, which re-exports them).

triangular_solve lowers to a StableHLO op; lu and (on CPU, as JAX) cholesky lower to
jaxlib's LAPACK kernels (FFI custom calls, see ``interpreters/ffi.py``).
"""
import numpy as np

from xform.core.avals import ShapedArray
from xform.interpreters import ad, ffi, mlir
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import standard_primitive
from xform.lax.linalg_common import (_T, _batch_to_front, _check_matrix, _conj,
                                     _eye_like, _in_lowering, _info_aval, _is_complex,
                                     _matmul, _nan_on_failure, symmetrize, tril, triu)

hlo, ir = mlir.hlo, mlir.ir


# ---- cholesky ----

def cholesky(x, *, symmetrize_input=True):
    """Lower Cholesky factor ``L`` of a positive-definite matrix, ``x = L @ L^H``.

    Returns NaNs where ``x`` is not positive definite.

    >>> float(cholesky(xform.numpy.array([[4., 2.], [2., 5.]]))[1, 1])
    2.0
    """
    _check_matrix("cholesky", x)
    if symmetrize_input:
        x = symmetrize(x)
    return cholesky_p.bind(x)


def _square_abstract_eval(name):
    def rule(x, **params):
        _check_matrix(name, x)
        return ShapedArray(x.shape, x.dtype)
    return rule


def _cholesky_jvp(primals, tangents):
    # dL = L phi(L^{-1} dA L^{-H}), phi = lower triangle with the diagonal halved.
    (x,), (t,) = primals, tangents
    L = cholesky_p.bind(x)
    tmp = triangular_solve(L, ad.instantiate_zeros(t), left_side=False, transpose_a=True,
                           conjugate_a=True, lower=True)
    inner = triangular_solve(L, tmp, left_side=True, lower=True)
    half = ew.div(_eye_like(inner), ew.convert_element_type(np.array(2), x.dtype))
    phi = ew.sub(tril(inner), ew.mul(inner, half))
    return L, _matmul(L, phi)


def _cholesky_finish(l):
    # StableHLO defines only the lower triangle; a failed factorization (not positive
    # definite) has NaNs in it, and like JAX we then return NaNs everywhere.
    from xform.lax.reductions import reduce_and
    l = tril(l)
    ok = reduce_and(ew.eq(l, l), (l.ndim - 2, l.ndim - 1))
    return [_nan_unless(ok, l)]


def _cholesky_lowering(ctx, x):
    if ctx.module_ctx.platform in ("cpu", *ffi.GPU_PLATFORMS):
        # potrf (LAPACK's, cuSOLVER's), as JAX (stablehlo.cholesky rounds differently)
        aval = ctx.avals_in[0]
        out, info = ffi.solver_call(ctx, ("potrf_ffi", {"uplo": ffi.u8(ord("L"))}),
                                    ("potrf_ffi", {"lower": ffi.flag(True)}), [x], [aval],
                                    [aval, _info_aval(aval)], aliases=[(0, 0)])
        return _in_lowering(ctx, lambda l, i: [tril(_nan_on_failure(i, l)[0])],
                            [out, info], [aval, _info_aval(aval)])[0]
    out = hlo.cholesky(x, lower=ir.BoolAttr.get(True))
    return _in_lowering(ctx, _cholesky_finish, [out], ctx.avals_out)[0]


cholesky_p = standard_primitive("cholesky", _square_abstract_eval("cholesky"))
ad.primitive_jvps[cholesky_p] = _cholesky_jvp
_batch_to_front(cholesky_p)
mlir.register_lowering(cholesky_p, _cholesky_lowering)


# ---- triangular_solve ----

def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False):
    """Solve ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for triangular ``a``.

    ``op(a)`` is ``a``, its transpose or conjugate transpose. Only the triangle named
    by ``lower`` is read.

    >>> a = xform.numpy.array([[2., 0.], [1., 1.]])
    >>> triangular_solve(a, xform.numpy.array([[2.], [3.]]), left_side=True, lower=True)
    Array([[1.],
           [2.]], dtype=float32)
    """
    return triangular_solve_p.bind(
        a, b, left_side=bool(left_side), lower=bool(lower), transpose_a=bool(transpose_a),
        conjugate_a=bool(conjugate_a), unit_diagonal=bool(unit_diagonal))


def _triangular_solve_abstract_eval(a, b, *, left_side, **_):
    _check_matrix("triangular_solve", a)
    if b.ndim < 2:
        raise ValueError(f"triangular_solve: b must have at least 2 dimensions, got shape "
                         f"{b.shape}")
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve: a and b must have the same dtype, got "
                        f"{a.dtype.name} and {b.dtype.name}")
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"triangular_solve: batch dimensions of a {a.shape} and b "
                         f"{b.shape} must be equal")
    k = b.shape[-2] if left_side else b.shape[-1]
    if k != a.shape[-1]:
        side = "rows" if left_side else "columns"
        raise ValueError(f"triangular_solve: a {a.shape} and b {b.shape} don't match: b's "
                         f"{side} must equal a's size (left_side={left_side})")
    return ShapedArray(b.shape, b.dtype)


def _triangular_solve_jvp_a(t, ans, a, b, *, left_side, lower, transpose_a, conjugate_a,
                            unit_diagonal):
    # x = op(a)^{-1} b  =>  dx = -op(a)^{-1} op(da) x  (left), -x op(da) op(a)^{-1}.
    k = 1 if unit_diagonal else 0
    da = ew.neg(tril(t, -k) if lower else triu(t, k))
    if transpose_a:
        da = _T(da)
    if conjugate_a:
        da = _conj(da)
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    if left_side:
        return triangular_solve_p.bind(a, _matmul(da, ans), **params)
    return triangular_solve_p.bind(a, _matmul(ans, da), **params)


def _triangular_solve_jvp_b(t, ans, a, b, **params):
    return triangular_solve_p.bind(a, t, **params)


def _triangular_solve_transpose(ct, a, b, *, left_side, lower, transpose_a, conjugate_a,
                                unit_diagonal):
    assert ad.is_undefined_primal(b) and not ad.is_undefined_primal(a)
    if type(ct) is ad.Zero:
        return [None, ad.Zero(b.aval)]
    ct_b = triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower,
                                   transpose_a=not transpose_a, conjugate_a=conjugate_a,
                                   unit_diagonal=unit_diagonal)
    return [None, ct_b]


def _triangular_solve_lowering(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a,
                               unit_diagonal):
    if not transpose_a:
        mode = "NO_TRANSPOSE"
    else:
        mode = "ADJOINT" if conjugate_a else "TRANSPOSE"
    if conjugate_a and not transpose_a and _is_complex(ctx.avals_in[0]):
        # StableHLO has no "conjugate only" mode: conjugate a first.
        a = hlo.complex(hlo.real(a), hlo.negate(hlo.imag(a)))
    return hlo.triangular_solve(a, b, ir.BoolAttr.get(left_side), ir.BoolAttr.get(lower),
                                ir.BoolAttr.get(unit_diagonal),
                                hlo.TransposeAttr.get(mode))


triangular_solve_p = standard_primitive("triangular_solve", _triangular_solve_abstract_eval)
ad.defjvp2(triangular_solve_p, _triangular_solve_jvp_a, _triangular_solve_jvp_b)
ad.primitive_transposes[triangular_solve_p] = _triangular_solve_transpose
ad.defnonlinear_operands(triangular_solve_p, slice(0, 1))   # the matrix
_batch_to_front(triangular_solve_p)
mlir.register_lowering(triangular_solve_p, _triangular_solve_lowering)



# ---- lu ----

def lu(x):
    """LU decomposition with partial pivoting: ``x[perm] = L @ U``.

    Returns ``(lu, pivots, permutation)``: ``L`` (unit diagonal, below) and ``U`` packed
    in ``lu``; ``pivots[i]`` is the row swapped with row ``i``; ``permutation`` is the
    resulting row order (int32).

    >>> lu_, piv, perm = lu(xform.numpy.array([[1., 2.], [3., 4.]]))
    >>> perm
    Array([1, 0], dtype=int32)
    """
    _check_matrix("lu", x, square=False)
    return tuple(lu_p.bind(x))


def _lu_abstract_eval(x):
    _check_matrix("lu", x, square=False)
    *batch, m, n = x.shape
    i32 = np.dtype(np.int32)
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*batch, min(m, n)), i32),
            ShapedArray((*batch, m), i32)]


def lu_pivots_to_permutation(pivots, permutation_size):
    """The row permutation (int32) that LAPACK-style row swaps ``pivots`` produce.

    >>> lu_pivots_to_permutation(xform.numpy.array([2, 2, 2], "int32"), 3)
    Array([2, 0, 1], dtype=int32)
    """
    return _pivots_to_permutation(pivots, m=permutation_size)


def _pivots_to_permutation(pivots, *, m):
    # Apply the row swaps in order to the identity permutation (unrolled: k swaps).
    shape = (*pivots.shape[:-1], m)
    iota = shapes.broadcasted_iota(np.int32, shape, len(shape) - 1)
    perm = iota
    from xform.lax.reductions import reduce_sum
    for i in range(pivots.shape[-1]):
        j = shapes.slice(pivots, (0,) * pivots.ndim, (*pivots.shape[:-1], i + 1),
                         None)
        j = shapes.slice(j, (0,) * (pivots.ndim - 1) + (i,), j.shape)
        j = shapes.broadcast_in_dim(j, shape, tuple(range(len(shape))))
        at_j = ew.eq(iota, j)
        p_i = shapes.slice(perm, (0,) * (len(shape) - 1) + (i,), (*shape[:-1], i + 1))
        p_i = shapes.broadcast_in_dim(p_i, shape, tuple(range(len(shape))))
        p_j = reduce_sum(ew.select_n(at_j, shapes.full_like(perm, 0), perm), (len(shape) - 1,))
        p_j = shapes.broadcast_in_dim(p_j, shape, tuple(range(len(shape) - 1)))
        perm = ew.select_n(at_j, perm, p_i)
        perm = ew.select_n(ew.eq(iota, np.int32(i)), perm, p_j)
    return perm


def _lu_lowering(ctx, x):
    aval, piv_aval, perm_aval = ctx.avals_in[0], ctx.avals_out[1], ctx.avals_out[2]
    lu_, ipiv, _ = ffi.solver_call(ctx, ("getrf_ffi", {}), ("getrf_ffi", {}), [x], [aval],
                                   [aval, piv_aval, _info_aval(aval)], aliases=[(0, 0)])
    (pivots,) = _in_lowering(ctx, lambda p: [ew.sub(p, np.int32(1))], [ipiv], [piv_aval])
    (perm,) = _in_lowering(ctx, lambda p, m: [_pivots_to_permutation(p, m=m)], [pivots],
                           [piv_aval], m=perm_aval.shape[-1])
    return [lu_, pivots, perm]


def _permutation_matrix(perm, dtype):
    """P with P[..., i, j] = (perm[i] == j), so that P @ x == x[perm]."""
    m = perm.shape[-1]
    shape = (*perm.shape, m)
    cols = shapes.broadcasted_iota(np.int32, shape, len(shape) - 1)
    rows = shapes.broadcast_in_dim(perm, shape, tuple(range(perm.ndim)))
    return ew.convert_element_type(ew.eq(rows, cols), dtype)


def _lu_jvp(primals, tangents):
    # With P a = L U: P da = dL U + L dU, so L^{-1} P da U^{-1} = L^{-1} dL + dU U^{-1},
    # a strictly lower plus an upper triangular part.
    (a,), (t,) = primals, tangents
    lu_, pivots, perm = lu_p.bind(a)
    *batch, m, n = a.shape
    k = min(m, n)
    x = _matmul(_permutation_matrix(perm, a.dtype), ad.instantiate_zeros(t))
    zero = np.zeros((), a.dtype)
    nb = len(batch)
    l = shapes.slice(lu_, (0,) * a.ndim, (*batch, m, k))
    l = ew.add(tril(l, -1), _eye_like(l, m, k))
    l = shapes.pad(l, zero, [(0, 0, 0)] * nb + [(0, 0, 0), (0, m - k, 0)])
    l = ew.add(l, shapes.pad(_eye_like(l, m - k, m - k), zero,
                             [(0, 0, 0)] * nb + [(k, 0, 0), (k, 0, 0)])) if m > k else l
    u = triu(shapes.slice(lu_, (0,) * a.ndim, (*batch, k, n)))
    if n > k:
        u = shapes.pad(u, zero, [(0, 0, 0)] * nb + [(0, n - k, 0), (0, 0, 0)])
        u = ew.add(u, shapes.pad(_eye_like(u, n - k, n - k), zero,
                                 [(0, 0, 0)] * nb + [(k, 0, 0), (k, 0, 0)]))
    la = triangular_solve(l, x, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(u, la, left_side=False, lower=False)
    l_dot = _matmul(l, tril(lau, -1))
    u_dot = _matmul(triu(lau), u)
    lu_dot = shapes.slice(ew.add(l_dot, u_dot), (0,) * a.ndim, a.shape)
    return [lu_, pivots, perm], [lu_dot, ad.Zero(pivots.aval.to_tangent_aval()),
                                 ad.Zero(perm.aval.to_tangent_aval())]


lu_p = standard_primitive("lu", _lu_abstract_eval, multiple_results=True)
ad.primitive_jvps[lu_p] = _lu_jvp
_batch_to_front(lu_p)
mlir.register_lowering(lu_p, _lu_lowering)
