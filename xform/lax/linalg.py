"""``xform.lax.linalg``: matrix factorizations and triangular solves as primitives.

cholesky and triangular_solve lower to StableHLO ops; lu, qr, eigh and svd lower
to jaxlib's LAPACK kernels (FFI custom calls, see ``interpreters/ffi.py``). Every
primitive accepts leading batch dimensions, so batching moves the batch axis to
the front. JVPs follow the standard matrix-calculus rules JAX uses; reverse mode
comes from them by partial evaluation and transposition like everything else.
"""
import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.interpreters import ad, batching, ffi, mlir
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import check_dtype, standard_primitive
from xform.lax.dot import dot_general

hlo, ir = mlir.hlo, mlir.ir

_inexact = tuple(np.dtype(d) for d in (np.float32, np.float64, np.complex64, np.complex128))
_floating = _inexact[:2]


# ---- small matrix helpers (lax compositions) ----

def _T(x):
    """Swap the last two axes."""
    return shapes.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _is_complex(x):
    return dtypes.issubdtype(x.dtype, np.complexfloating)


def _conj(x):
    if _is_complex(x):
        from xform.lax import conj
        return conj(x)
    return x


def _H(x):
    """Conjugate transpose of the last two axes."""
    return _conj(_T(x))


def _real(x):
    if _is_complex(x):
        from xform.lax import real
        return real(x)
    return x


def _matmul(a, b):
    """Batched matrix product over equal leading (batch) dimensions."""
    batch = tuple(range(a.ndim - 2))
    return dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch)))


def _tri_mask(shape, k, lower):
    rows = shapes.broadcasted_iota(np.int32, shape, len(shape) - 2)
    cols = shapes.broadcasted_iota(np.int32, shape, len(shape) - 1)
    return ew.ge(ew.add(rows, np.int32(k)), cols) if lower else \
        ew.le(ew.add(rows, np.int32(k)), cols)


def tril(x, k=0):
    """Entries on and below the k-th diagonal of the last two axes; zeros above."""
    return ew.select_n(_tri_mask(x.shape, k, True), shapes.full_like(x, 0), x)


def triu(x, k=0):
    """Entries on and above the k-th diagonal of the last two axes; zeros below."""
    return ew.select_n(_tri_mask(x.shape, k, False), shapes.full_like(x, 0), x)


def _eye_like(x, n=None, m=None):
    """Identity of x's dtype, shaped (..., n, m) with x's batch dimensions."""
    n = x.shape[-1] if n is None else n
    m = n if m is None else m
    shape = (*x.shape[:-2], n, m)
    rows = shapes.broadcasted_iota(np.int32, shape, len(shape) - 2)
    cols = shapes.broadcasted_iota(np.int32, shape, len(shape) - 1)
    return ew.convert_element_type(ew.eq(rows, cols), x.dtype)


def _diag(x):
    """Diagonal of the last two axes, as a vector (...,k)."""
    k = min(x.shape[-2:])
    sq = shapes.slice(x, (0,) * x.ndim, (*x.shape[:-2], k, k))
    from xform.lax.reductions import reduce_sum
    return reduce_sum(ew.mul(sq, _eye_like(sq)), (x.ndim - 1,))


def _nan_unless(ok, x):
    """x where LAPACK reported success (``ok`` per batch element), NaN elsewhere."""
    ok = shapes.broadcast_in_dim(ok, x.shape, tuple(range(ok.ndim)))
    return ew.select_n(ok, shapes.full_like(x, np.nan), x)


def _check_matrix(name, x, square=True):
    if x.ndim < 2:
        raise ValueError(f"{name}: argument must have at least 2 dimensions, got shape "
                         f"{x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: argument must be a batch of square matrices, got shape "
                         f"{x.shape}")
    check_dtype(name, x.dtype, _inexact)


def _batch_to_front(prim):
    """Batching for primitives that accept leading batch dimensions on all operands."""
    def rule(vals, dims, **params):
        size = batching.axis_size_of(vals, dims)
        vals = [batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
        out = prim.bind(*vals, **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    batching.primitive_batchers[prim] = rule


# ---- cholesky ----

def symmetrize(x):
    """(x + x^H) / 2: the symmetric (Hermitian) part, as factorizations assume."""
    return ew.div(ew.add(x, _H(x)), ew.convert_element_type(np.array(2), x.dtype))


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
_batch_to_front(triangular_solve_p)
mlir.register_lowering(triangular_solve_p, _triangular_solve_lowering)


# ---- LAPACK-backed factorizations: shared pieces ----

def _in_lowering(ctx, fun, args, avals_in, **params):
    """Emit ``fun`` (lax ops) inline inside a lowering rule, traced at ``avals_in``."""
    sub = mlir.LoweringRuleContext(ctx.module_ctx, None, list(avals_in), None)
    return mlir.lower_fun(fun)(sub, *args, **params)


def _info_aval(x):
    return ShapedArray(x.shape[:-2], np.dtype(np.int32))


def _nan_on_failure(info, *xs):
    ok = ew.eq(info, np.int32(0))
    return [_nan_unless(ok, x) if dtypes.issubdtype(x.dtype, np.inexact) else x
            for x in xs]


def _not_differentiable_directly(name, use):
    def jvp(primals, tangents, **params):
        raise NotImplementedError(f"{name} is an internal primitive; differentiate {use}.")
    return jvp


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
    lu_, ipiv, _ = ffi.lapack_call("getrf_ffi", aval.dtype, [x], [aval],
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
    a, tau = ffi.lapack_call("geqrf_ffi", aval.dtype, [x], [aval], [aval, tau_aval],
                             aliases=[(0, 0)])

    def householder_input(a):   # the first `cols` columns, zero-padded if cols > n
        if cols <= n:
            return [shapes.slice(a, (0,) * a.ndim, (*batch, m, cols))]
        return [shapes.pad(a, np.zeros((), a.dtype),
                           [(0, 0, 0)] * len(batch) + [(0, 0, 0), (0, cols - n, 0)])]
    (qa,) = _in_lowering(ctx, householder_input, [a], [aval])
    prefix = "un" if dtypes.issubdtype(aval.dtype, np.complexfloating) else "or"
    (q,) = ffi.lapack_call(f"{prefix}gqr_ffi", aval.dtype, [qa, tau], [q_aval, tau_aval],
                           [q_aval], aliases=[(0, 0)])
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
    v, w, info = ffi.lapack_call(
        f"{prefix}evd_ffi", aval.dtype, [x], [aval], [v_aval, w_aval, info_aval],
        attributes={"mode": ffi.u8(ord("V")), "uplo": ffi.u8(ord("L" if lower else "U"))},
        aliases=[(0, 0)])
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
    s_shape, u_shape, vt_shape = _svd_shapes(aval.shape, full_matrices, compute_uv)
    real = np.dtype(np.finfo(aval.dtype).dtype)
    avals = [aval, ShapedArray(s_shape, real), ShapedArray(u_shape, aval.dtype),
             ShapedArray(vt_shape, aval.dtype), _info_aval(aval)]
    mode = "N" if not compute_uv else ("A" if full_matrices else "S")
    _, s, u, vt, info = ffi.lapack_call("gesdd_ffi", aval.dtype, [x], [aval], avals,
                                        attributes={"mode": ffi.u8(ord(mode))},
                                        aliases=[(0, 0)])
    outs = [s, u, vt] if compute_uv else [s]
    return _in_lowering(ctx, _nan_on_failure, [info, *outs], [avals[-1], *avals[1:1 + len(outs)]])


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
