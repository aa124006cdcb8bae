"""The triangular factorizations and solve as primitives: ``cholesky``,
``triangular_solve`` and ``lu`` (part of ``xform.lax.linalg``, which re-exports them).

triangular_solve lowers to a StableHLO op; lu and (on CPU, as JAX) cholesky lower to
jaxlib's LAPACK kernels (FFI custom calls, see ``interpreters/ffi.py``).
"""
import numpy as np

from xform import backend
from xform.core.avals import ShapedArray
from xform.interpreters import ad, ffi, mlir
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import check_dtype, inexact, standard_primitive
from xform.lax.dynamic_slicing import dynamic_slice, dynamic_update_slice
from xform.lax.linalg_common import (_T, _batch_to_front, _check_matrix, _check_operands,
                                     _conj, _eye_like, _in_lowering, _info_aval, _is_complex,
                                     _matmul, _nan_on_failure, _nan_unless, symmetrize, tril,
                                     triu)
from xform.lax.reductions import reduce_and, reduce_sum

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
    # L phi is lower triangular; tril keeps the upper zeros exact where a failed
    # factorization's NaNs would spread into them (JAX's wrapper trils the tangent too)
    return L, tril(_matmul(L, phi))


def _cholesky_finish(l):
    # StableHLO defines only the lower triangle; a failed factorization (not positive
    # definite) has NaNs in it, and like JAX we then return NaNs everywhere.
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

    As JAX's, a ``b`` of one dimension fewer than ``a`` is a (batch of) vectors.
    """
    singleton = np.ndim(b) == np.ndim(a) - 1
    axis = np.ndim(b) - (0 if left_side else 1)   # where the unit axis goes
    if singleton:
        b = shapes.expand_dims(b, (axis,))
    out = triangular_solve_p.bind(
        a, b, left_side=bool(left_side), lower=bool(lower), transpose_a=bool(transpose_a),
        conjugate_a=bool(conjugate_a), unit_diagonal=bool(unit_diagonal))
    if singleton:
        out = shapes.squeeze(out, (axis,))
    return out


def _triangular_solve_abstract_eval(a, b, *, left_side, **_):
    # Any inexact dtype, as JAX's (StableHLO's op; BLAS only for the LAPACK four)
    _check_matrix("triangular_solve", a, dtype=False)
    check_dtype("triangular_solve", a.dtype, inexact)
    if b.ndim < 2:
        raise TypeError(f"Input 1 to triangular_solve must have rank at least 2, but got "
                        f"shape={b.shape}")
    if a.ndim != b.ndim:
        raise TypeError(f"All inputs to triangular_solve must have the same number of batch "
                        f"dimensions, but got {[a.ndim - 2, b.ndim - 2]} batch dimensions "
                        "for the inputs.")
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


_LAPACK_DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}


def _triangular_solve_lowering(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a,
                               unit_diagonal):
    if conjugate_a and not transpose_a and _is_complex(ctx.avals_in[0]):
        # Neither StableHLO nor BLAS has a "conjugate only" mode: conjugate a first.
        a = hlo.complex(hlo.real(a), hlo.negate(hlo.imag(a)))
        conjugate_a = False
    mod = ctx.module_ctx   # (a multi-platform export keeps the portable StableHLO op)
    if (mod.platform_index is None and mod.platform == "cpu"
            and ctx.avals_in[0].dtype in _LAPACK_DTYPES):
        # BLAS trsm, as JAX on CPU: XLA expands the StableHLO op into while loops over
        # blocks (jit(solve) of a 64x64 system was ~2.5x JAX's).
        trans = ("C" if conjugate_a else "T") if transpose_a else "N"
        attrs = {"side": ffi.u8(ord("L" if left_side else "R")),
                 "uplo": ffi.u8(ord("L" if lower else "U")), "trans_x": ffi.u8(ord(trans)),
                 "diag": ffi.u8(ord("U" if unit_diagonal else "N"))}
        target = backend.lapack_target("trsm_ffi", ctx.avals_in[0].dtype)
        return ffi.custom_call(target, [a, b], ctx.avals_in, ctx.avals_out,
                               attributes=attrs, aliases=[(0, 1)])[0]
    mode = ("ADJOINT" if conjugate_a else "TRANSPOSE") if transpose_a else "NO_TRANSPOSE"
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
    return list(lu_p.bind(x))   # (a list, as JAX's)


def _lu_abstract_eval(x):
    _check_matrix("lu", x, square=False)
    *batch, m, n = x.shape
    i32 = np.dtype(np.int32)
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*batch, min(m, n)), i32),
            ShapedArray((*batch, m), i32)]


def lu_pivots_to_permutation(pivots, permutation_size):
    """The row permutation (int32, (..., permutation_size)) that LAPACK-style row swaps
    ``pivots`` (int32, (..., k), k <= permutation_size) produce.

    >>> lu_pivots_to_permutation(xform.numpy.array([2, 2, 2], "int32"), 3)
    Array([2, 0, 1], dtype=int32)
    """
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


def _lu_pivots_to_permutation_abstract_eval(pivots, *, permutation_size):
    _check_operands("lu_pivots_to_permutation", [pivots], [1], [np.int32])
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"Output permutation size {permutation_size} has to exceed the "
                         "trailing dimension of the pivots. Got pivots size "
                         f"{pivots.shape[-1]}")
    return ShapedArray((*pivots.shape[:-1], permutation_size), np.dtype(np.int32))


def _permutation_lowering(ctx, pivots, piv_aval, perm_aval):
    """The permutation of 0-based ``pivots``: JAX's kernel on GPU (a serial while loop
    there costs a kernel launch per swap), else ``_pivots_loop``."""
    platform = ctx.module_ctx.platform
    if platform in ffi.GPU_PLATFORMS:
        target = backend.gpu_solver_target(
            ("cu" if platform == "cuda" else "hip") + "_lu_pivots_to_permutation")
        return ffi.custom_call(target, [pivots], [piv_aval], [perm_aval],
                               column_major=False)[0]
    if not (piv_aval.shape[-1] and np.prod(perm_aval.shape)):   # no swap to make
        return _in_lowering(ctx, lambda: [shapes.broadcasted_iota(
            np.int32, perm_aval.shape, perm_aval.ndim - 1)], [], [])[0]
    return _pivots_loop(ctx, pivots, piv_aval, perm_aval)


lu_pivots_to_permutation_p = standard_primitive("lu_pivots_to_permutation",
                                                _lu_pivots_to_permutation_abstract_eval)
_batch_to_front(lu_pivots_to_permutation_p)
mlir.register_lowering(lu_pivots_to_permutation_p, lambda ctx, pivots, *, permutation_size:
                       _permutation_lowering(ctx, pivots, *ctx.avals_in, *ctx.avals_out))


def _swap_step(perm, pivots, i):
    """``perm`` with entries ``i`` and ``pivots[..., i]`` swapped (``i`` a scalar)."""
    shape, last = perm.shape, perm.ndim - 1
    if last == 0:   # JAX's: two dynamic slices, two dynamic updates
        j = shapes.reshape(dynamic_slice(pivots, (i,), (1,)), ())
        at_i, at_j = dynamic_slice(perm, (i,), (1,)), dynamic_slice(perm, (j,), (1,))
        return dynamic_update_slice(dynamic_update_slice(perm, at_j, (i,)), at_i, (j,))
    start = (np.int32(0),) * last + (i,)
    def column(x):
        col = dynamic_slice(x, start, (*shape[:-1], 1))
        return shapes.broadcast_in_dim(col, shape, tuple(range(len(shape))))
    iota = shapes.broadcasted_iota(np.int32, shape, last)
    at_j = ew.eq(iota, column(pivots))
    p_j = reduce_sum(ew.select_n(at_j, shapes.full_like(perm, 0), perm), (last,))
    p_j = shapes.broadcast_in_dim(p_j, shape, tuple(range(last)))
    perm = ew.select_n(at_j, perm, column(perm))
    return ew.select_n(ew.eq(iota, i), perm, p_j)


def _pivots_loop(ctx, pivots, piv_aval, perm_aval):
    """The permutation of LAPACK's row swaps as one ``stablehlo.while`` over the k swaps
    (carry: i, perm, pivots), as JAX's: unrolled, a 64x64 solve compiled to ~9000 ops."""
    i32 = ShapedArray((), np.dtype(np.int32))
    (perm,) = _in_lowering(ctx, lambda: [shapes.broadcasted_iota(
        np.int32, perm_aval.shape, perm_aval.ndim - 1)], [], [])
    avals = [i32, perm_aval, piv_aval]
    types = [mlir.aval_to_ir_type(a) for a in avals]
    op = hlo.WhileOp(types, [mlir.ir_constant(np.int32(0)), perm, pivots])
    with ir.InsertionPoint(op.regions[0].blocks.append(*types)) as cond:
        hlo.return_(_in_lowering(ctx, lambda i: [ew.lt(i, np.int32(piv_aval.shape[-1]))],
                                 [cond.block.arguments[0]], [i32]))
    with ir.InsertionPoint(op.regions[1].blocks.append(*types)) as body:
        i, p, piv = body.block.arguments
        hlo.return_(_in_lowering(
            ctx, lambda i, p, piv: [ew.add(i, np.int32(1)), _swap_step(p, piv, i), piv],
            [i, p, piv], avals))
    return op.results[1]


def _lu_lowering(ctx, x):
    aval, piv_aval, perm_aval = ctx.avals_in[0], ctx.avals_out[1], ctx.avals_out[2]
    if not np.prod(aval.shape):  # nothing to factor (and no row to swap); as JAX's
        return [x] + _in_lowering(ctx, lambda: [
            shapes.full(piv_aval.shape, 0, np.int32),
            shapes.broadcasted_iota(np.int32, perm_aval.shape, perm_aval.ndim - 1)], [], [])
    lu_, ipiv, _ = ffi.solver_call(ctx, ("getrf_ffi", {}), ("getrf_ffi", {}), [x], [aval],
                                   [aval, piv_aval, _info_aval(aval)], aliases=[(0, 0)])
    (pivots,) = _in_lowering(ctx, lambda p: [ew.sub(p, np.int32(1))], [ipiv], [piv_aval])
    return [lu_, pivots, _permutation_lowering(ctx, pivots, piv_aval, perm_aval)]


def _permutation_matrix(perm, dtype):
    """P with P[..., i, j] = (perm[i] == j), so that P @ x == x[perm]."""
    m = perm.shape[-1]
    shape = (*perm.shape, m)
    cols = shapes.broadcasted_iota(np.int32, shape, len(shape) - 1)
    rows = shapes.broadcast_in_dim(perm, shape, tuple(range(perm.ndim)))
    return ew.convert_element_type(ew.eq(rows, cols), dtype)


def _solve(a, b):
    """a^-1 b by LU with partial pivoting (a, b batched alike)."""
    lu_, _, perm = lu_p.bind(a)
    pb = _matmul(_permutation_matrix(perm, a.dtype), b)
    y = triangular_solve(lu_, pb, left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, y, left_side=True, lower=False)


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
