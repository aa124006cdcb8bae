"""Tridiagonal matrices: ``tridiagonal`` (reduction of a Hermitian matrix to
tridiagonal form) and ``tridiagonal_solve``, as primitives (part of ``xform.lax.linalg``,
which re-exports them).

Each lowers to the kernel JAX calls where the program runs: LAPACK's sytrd/hetrd and
gtsv on CPU, cuSOLVER's sytrd and cuSPARSE's gtsv2 on CUDA (hipSOLVER/hipSPARSE on ROCm).
``tridiagonal_solve`` is linear in ``b``: its JVP and transpose are JAX's, as is its
batching rule (an unbatched matrix solves a batch of right-hand sides as more columns).
"""
import numpy as np

from xform import backend
from xform.core.avals import ShapedArray
from xform.interpreters import ad, batching, ffi, mlir
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import standard_primitive
from xform.lax.linalg_common import (_batch_to_front, _check_operands, _in_lowering,
                                     _info_aval, _nan_on_failure)


# ---- tridiagonal ----

def tridiagonal(a, *, lower=True):
    """Reduce a symmetric/Hermitian matrix to tridiagonal form (LAPACK's sytrd/hetrd):
    ``[a, d, e, taus]`` (a list, as JAX's). ``d`` is the diagonal and ``e`` the first sub- (``lower``) or
    superdiagonal, both real; ``a`` holds them too, and the Householder reflectors
    (scaled by ``taus``) beyond them. Only the triangle named by ``lower`` is read.

    >>> a, d, e, taus = tridiagonal(xform.numpy.array([[2., 1.], [1., 3.]]))
    >>> d
    Array([2., 3.], dtype=float32)
    """
    return list(tridiagonal_p.bind(a, lower=bool(lower)))


def _tridiagonal_abstract_eval(a, *, lower):
    _check_operands("tridiagonal", [a], [2], [np.inexact])
    *batch, n, m = a.shape
    if n != m or n == 0:
        raise ValueError(f"The input to tridiagonal must be a square matrix. Got shape "
                         f"{(n, m)}.")
    real = np.dtype(np.finfo(a.dtype).dtype)
    return [ShapedArray(a.shape, a.dtype), ShapedArray((*batch, n), real),
            ShapedArray((*batch, n - 1), real), ShapedArray((*batch, n - 1), a.dtype)]


def _tridiagonal_lowering(ctx, a, *, lower):
    aval = ctx.avals_in[0]
    info = _info_aval(aval)
    prefix = "sy" if np.dtype(aval.dtype) in (np.float32, np.float64) else "he"
    *outs, info_v = ffi.solver_call(
        ctx, (f"{prefix}trd_ffi", {"uplo": ffi.u8(ord("L" if lower else "U"))}),
        ("sytrd_ffi", {"lower": ffi.flag(lower)}), [a], [aval], [*ctx.avals_out, info],
        aliases=[(0, 0)])
    return _in_lowering(ctx, _nan_on_failure, [info_v, *outs], [info, *ctx.avals_out])


tridiagonal_p = standard_primitive("tridiagonal", _tridiagonal_abstract_eval,
                                   multiple_results=True)
_batch_to_front(tridiagonal_p)
mlir.register_lowering(tridiagonal_p, _tridiagonal_lowering)


# ---- tridiagonal_solve ----

def tridiagonal_solve(dl, d, du, b, *, perturb_singular=False):
    """Solve ``A @ x = b`` for tridiagonal ``A`` given by its diagonals (each (..., m)):
    ``dl[i] = A[i, i-1]`` (``dl[0]`` unused), ``d[i] = A[i, i]``, ``du[i] = A[i, i+1]``
    (``du[m-1]`` unused); ``b`` is (..., m, k). ``perturb_singular`` perturbs tiny pivots
    (as LAPACK's gtsv would fail on them) so that a singular system gives a finite
    answer, as JAX.

    >>> one = xform.numpy.ones(3)
    >>> tridiagonal_solve(0 * one, 2 * one, 0 * one, xform.numpy.ones((3, 1)))[:, 0]
    Array([0.5, 0.5, 0.5], dtype=float32)
    """
    return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))


def _tridiagonal_solve_abstract_eval(dl, d, du, b, *, perturb_singular):
    _check_operands("tridiagonal_solve", [dl, d, du, b], [1, 1, 1, 2], [np.inexact] * 4)
    if not dl.shape == d.shape == du.shape:
        raise TypeError("tridiagonal_solve requires that all diagonal arguments have the "
                        f"same shape, got {dl.shape}, {d.shape} and {du.shape}.")
    if dl.shape != b.shape[:-1]:
        raise TypeError("tridiagonal_solve requires that the leading ndim-1 dimensions of "
                        f"b equal the dimensions of the diagonal arguments, got b {b.shape}"
                        f" and diagonals {dl.shape}.")
    return ShapedArray(b.shape, b.dtype)


def _thomas(dl, d, du, b):
    """The solve by the Thomas algorithm (JAX's lowering where no kernel is called), its
    forward and backward sweeps unrolled over the m rows."""
    m, col = d.shape[-1], d.ndim - 1

    def at(v, i):   # v[..., i:i+1] of a diagonal
        return shapes.slice(v, (0,) * col + (i,), (*v.shape[:-1], i + 1))

    def row(i):
        return shapes.slice(b, (0,) * col + (i, 0), (*b.shape[:-2], i + 1, b.shape[-1]))
    cp, dp = ew.div(at(du, 0), at(d, 0)), ew.div(row(0), _col(at(d, 0), b))
    cps, dps = [], []
    for i in range(1, m):
        a, denom = at(dl, i), ew.sub(at(d, i), ew.mul(at(dl, i), cp))
        cps.append(cp)
        dps.append(dp)
        cp, dp = ew.div(at(du, i), denom), ew.div(ew.sub(row(i), ew.mul(_col(a, b), dp)),
                                                  _col(denom, b))
    xs = [dp]
    for cp, dp in zip(reversed(cps), reversed(dps)):
        xs.append(ew.sub(dp, ew.mul(_col(cp, b), xs[-1])))
    return shapes.concatenate(xs[::-1], b.ndim - 2)


def _col(v, b):
    """A (..., 1) slice of a diagonal broadcast against a (..., 1, k) row of b."""
    shape = (*v.shape, b.shape[-1])
    return shapes.broadcast_in_dim(v, shape, tuple(range(v.ndim)))


def _tridiagonal_solve_lowering(ctx, dl, d, du, b, *, perturb_singular):
    platform = ctx.module_ctx.platform
    gpu = platform in ffi.GPU_PLATFORMS
    b_aval = ctx.avals_in[3]
    m = b_aval.shape[-2]
    if perturb_singular:
        if platform != "cpu" and not gpu:
            raise NotImplementedError("perturb_singular=True is not supported on this "
                                      "platform.")
        # JAX's own kernels (gpu_solver_target registers jaxlib's CPU linalg targets too)
        name = ("cu" if platform == "cuda" else "hip") + "_tridiagonal_solve_perturbed" \
            if gpu else "tridiagonal_solve_perturbed_ffi"
        return ffi.custom_call(backend.gpu_solver_target(name), [dl, d, du, b],
                               ctx.avals_in, [b_aval])[0]
    if platform == "cpu":
        info = _info_aval(b_aval)
        *_, x, info_v = ffi.custom_call(
            backend.lapack_target("gtsv_ffi", b_aval.dtype), [dl, d, du, b], ctx.avals_in,
            [*ctx.avals_in, info], aliases=[(0, 0), (1, 1), (2, 2), (3, 3)])
        return _in_lowering(ctx, _nan_on_failure, [info_v, x], [info, b_aval])[0]
    if gpu and m > 2:   # (cuSPARSE's gtsv2 wants m >= 3)
        target = backend.gpu_solver_target(("cu" if platform == "cuda" else "hip")
                                           + "sparse_gtsv2_ffi")
        return ffi.custom_call(target, [dl, d, du, b], ctx.avals_in, [b_aval],
                               aliases=[(0, 3)])[0]
    return _in_lowering(ctx, lambda *a: [_thomas(*a)], [dl, d, du, b], ctx.avals_in)[0]


def _tridiagonal_product(dl, d, du, b):
    """A @ b for the tridiagonal A of (dl, d, du)."""
    *batch, m, k = b.shape
    col = len(batch)
    y = ew.mul(_col(d, b), b)
    if m < 2:
        return y
    pad = [(0, 0, 0)] * col
    below = ew.mul(_col(shapes.slice(dl, (0,) * col + (1,), dl.shape), b),
                   shapes.slice(b, (0,) * b.ndim, (*batch, m - 1, k)))
    above = ew.mul(_col(shapes.slice(du, (0,) * dl.ndim, (*batch, m - 1)), b),
                   shapes.slice(b, (0,) * col + (1, 0), b.shape))
    zero = np.zeros((), b.dtype)
    y = ew.add(y, shapes.pad(below, zero, pad + [(1, 0, 0), (0, 0, 0)]))
    return ew.add(y, shapes.pad(above, zero, pad + [(0, 1, 0), (0, 0, 0)]))


def _tridiagonal_solve_jvp(primals, tangents, *, perturb_singular):
    # x = A^{-1} b  =>  dx = A^{-1} (db - dA x)
    *diags, _ = primals
    *ddiags, db = tangents
    x = tridiagonal_solve_p.bind(*primals, perturb_singular=perturb_singular)
    if all(type(t) is ad.Zero for t in ddiags):
        rhs = db
    else:
        dax = _tridiagonal_product(*map(ad.instantiate_zeros, ddiags), x)
        rhs = ew.neg(dax) if type(db) is ad.Zero else ew.sub(db, dax)
    return x, tridiagonal_solve_p.bind(*diags, rhs, perturb_singular=perturb_singular)


def _tridiagonal_solve_transpose(ct, dl, d, du, b, *, perturb_singular):
    # linear in b only: the cotangent solves with A^T, whose sub/superdiagonals are
    # du/dl shifted by one
    assert ad.is_undefined_primal(b) and not any(map(ad.is_undefined_primal, (dl, d, du)))
    if type(ct) is ad.Zero:
        return [None, None, None, ad.Zero(b.aval)]
    col = du.ndim - 1
    pad = [(0, 0, 0)] * col
    zero = np.zeros((), du.dtype)
    dl_t = shapes.pad(du, zero, pad + [(1, -1, 0)])
    du_t = shapes.pad(dl, zero, pad + [(-1, 1, 0)])
    return [None, None, None, tridiagonal_solve_p.bind(dl_t, d, du_t, ct,
                                                       perturb_singular=perturb_singular)]


def _tridiagonal_solve_batch(vals, dims, *, perturb_singular):
    dl, d, du, b = vals
    if all(dim is batching.not_mapped for dim in dims[:3]):
        # one matrix: the batch of right-hand sides becomes more columns of b
        b = batching.moveaxis(b, dims[3], b.ndim - 2)
        flat = shapes.reshape(b, (*b.shape[:-2], b.shape[-2] * b.shape[-1]))
        out = tridiagonal_solve_p.bind(dl, d, du, flat, perturb_singular=perturb_singular)
        return shapes.reshape(out, b.shape), b.ndim - 2
    size = batching.axis_size_of(vals, dims)
    vals = [batching.bdim_at_front(v, dim, size) for v, dim in zip(vals, dims)]
    return tridiagonal_solve_p.bind(*vals, perturb_singular=perturb_singular), 0


tridiagonal_solve_p = standard_primitive("tridiagonal_solve",
                                         _tridiagonal_solve_abstract_eval)
ad.primitive_jvps[tridiagonal_solve_p] = _tridiagonal_solve_jvp
ad.primitive_transposes[tridiagonal_solve_p] = _tridiagonal_solve_transpose
ad.defnonlinear_operands(tridiagonal_solve_p, slice(0, 3))   # the diagonals
batching.primitive_batchers[tridiagonal_solve_p] = _tridiagonal_solve_batch
mlir.register_lowering(tridiagonal_solve_p, _tridiagonal_solve_lowering)
