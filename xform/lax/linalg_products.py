"""Products and updates of factored matrices: ``ormqr`` (multiply by the Q of a QR
factorization without forming it), ``symmetric_product`` (``alpha a a^T + beta c``) and
``cholesky_update`` (rank-1 update of a Cholesky factor), as primitives (part of
``xform.lax.linalg``, which re-exports them).

As JAX: ormqr is LAPACK's ormqr/unmqr on CPU, cuSOLVER's on GPU; symmetric_product and
cholesky_update call cuSOLVER's syrk and JAX's own CUDA kernel on CUDA and are lax
compositions elsewhere (cholesky_update unrolled over the rows, JAX's Givens rotations).
None of the three has a JVP, and cholesky_update no batching rule (JAX's have none).
"""
import numpy as np

from xform import backend
from xform.core.avals import ShapedArray
from xform.interpreters import ffi, mlir
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import standard_primitive
from xform.lax.dot import Precision, dot_general
from xform.lax.dynamic_slicing import dynamic_update_slice
from xform.lax.linalg_common import (_T, _batch_to_front, _check_operands, _in_lowering,
                                     _is_complex)


# ---- ormqr ----

def ormqr(a, taus, c, *, left=True, transpose=False):
    """``Q @ c`` (``left``) or ``c @ Q`` for the Q of a QR factorization in LAPACK's
    compact form (``a``'s reflectors below its diagonal, ``taus`` their scales, as
    ``geqrf`` returns them), without forming Q; ``transpose`` uses Q^T (Q^H if complex).
    """
    return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


def _ormqr_abstract_eval(a, taus, c, *, left, transpose):
    _check_operands("ormqr", [a, taus, c], [2, 1, 2], [np.inexact] * 3)
    m, n = a.shape[-2:]
    if left and c.shape[-2] != m:
        raise ValueError(
            "ormqr with left=True expects c to have the same number of rows as the "
            f"Householder matrix a. Got a shape {a.shape} and c shape {c.shape}.")
    if not left and c.shape[-1] != m:
        raise ValueError(
            "ormqr with left=False expects c to have the same number of columns as the "
            f"Householder matrix a has rows. Got a shape {a.shape} and c shape {c.shape}.")
    if taus.shape[-1] > min(m, n) or not a.shape[:-2] == taus.shape[:-1] == c.shape[:-2]:
        # (JAX passes a longer taus to the kernel, which reads past a's columns)
        raise ValueError(f"ormqr expects at most min(m, n) taus and equal batch dimensions, "
                         f"got a {a.shape}, taus {taus.shape} and c {c.shape}")
    return ShapedArray(c.shape, c.dtype)


def _ormqr_lowering(ctx, a, taus, c, *, left, transpose):
    prefix = "un" if _is_complex(ctx.avals_in[0]) else "or"
    attributes = {"left": ffi.flag(left), "transpose": ffi.flag(transpose)}
    return ffi.solver_call(ctx, (f"{prefix}mqr_ffi", attributes), ("ormqr_ffi", attributes),
                           [a, taus, c], ctx.avals_in, ctx.avals_out, aliases=[(0, 2)])[0]


ormqr_p = standard_primitive("ormqr", _ormqr_abstract_eval)
_batch_to_front(ormqr_p)
mlir.register_lowering(ormqr_p, _ormqr_lowering)


# ---- symmetric_product ----

def symmetric_product(a_matrix, c_matrix, *, alpha=1., beta=0., symmetrize_output=False):
    """``alpha * a @ a^T + beta * c`` for a (..., m, n) and a symmetric c (..., m, m).
    Only the lower triangle is sure to be right on every platform (CUDA's syrk writes
    that one); ``symmetrize_output`` mirrors it into the upper one.

    >>> symmetric_product(xform.numpy.ones((2, 1)), xform.numpy.eye(2), beta=2.)
    Array([[3., 1.],
           [1., 3.]], dtype=float32)
    """
    out = symmetric_product_p.bind(a_matrix, c_matrix, alpha=alpha, beta=beta)
    if symmetrize_output:
        low = _tril_mask(out.shape)
        out = ew.select_n(low, _T(out), out)
    return out


def _tril_mask(shape):
    rows = shapes.broadcasted_iota(np.int32, shape, len(shape) - 2)
    return ew.ge(rows, shapes.broadcasted_iota(np.int32, shape, len(shape) - 1))


def _symmetric_product_abstract_eval(a, c, *, alpha, beta):
    _check_operands("symmetric_product", [a, c], [2, 2], [np.floating] * 2)
    if a.shape[-2] != c.shape[-1] or c.shape[-2] != c.shape[-1]:
        raise ValueError(
            "symmetric_update expects a rectangular matrix of shape (m, n) and a square "
            f"matrix of shape (m, m). Got shapes {a.shape} and {c.shape}.")
    if a.shape[:-2] != c.shape[:-2]:
        raise ValueError(f"symmetric_product: batch dimensions of a {a.shape} and c "
                         f"{c.shape} must be equal")
    return ShapedArray(c.shape, c.dtype)


def _symmetric_product(a, c, *, alpha, beta):
    batch = tuple(range(a.ndim - 2))
    aat = dot_general(a, a, (((a.ndim - 1,), (a.ndim - 1,)), (batch, batch)),
                      precision=Precision.HIGHEST)
    return ew.add(ew.mul(np.array(alpha, a.dtype), aat), ew.mul(np.array(beta, a.dtype), c))


def _symmetric_product_lowering(ctx, a, c, *, alpha, beta):
    if ctx.module_ctx.platform == "cuda":
        a_aval, c_aval = ctx.avals_in
        scalar = ShapedArray((), a_aval.dtype)
        consts = [mlir.ir_constant(np.array(v, a_aval.dtype)) for v in (alpha, beta)]
        return ffi.custom_call(
            backend.gpu_solver_target("cusolver_syrk_ffi"), [a, c, *consts],
            [a_aval, c_aval, scalar, scalar], ctx.avals_out,
            attributes={"transpose": ffi.flag(False)}, aliases=[(0, 1)],
            column_major=False)[0]
    return _in_lowering(ctx, lambda a, c: [_symmetric_product(a, c, alpha=alpha, beta=beta)],
                        [a, c], ctx.avals_in)[0]


symmetric_product_p = standard_primitive("symmetric_product",
                                         _symmetric_product_abstract_eval)
_batch_to_front(symmetric_product_p)
mlir.register_lowering(symmetric_product_p, _symmetric_product_lowering)


# ---- cholesky_update ----

def cholesky_update(r_matrix, w_vector):
    """The upper Cholesky factor of ``r^T r + w w^T`` from that of ``r^T r``, in O(n^2)
    (unbatched, real, as JAX's).

    >>> cholesky_update(xform.numpy.eye(2), xform.numpy.array([0., 1.]))[1, 1]
    Array(1.4142135, dtype=float32)
    """
    return cholesky_update_p.bind(r_matrix, w_vector)


def _cholesky_update_abstract_eval(r, w):
    _check_operands("cholesky_update", [r, w], [2, 1], [np.floating] * 2, batched=False)
    if r.shape[0] != r.shape[1] or w.shape[0] != r.shape[1]:
        raise ValueError(
            "Rank-1 update to Cholesky decomposition takes a square matrix and a vector of "
            f"the same size as input. Got shapes {r.shape} and {w.shape} instead")
    return ShapedArray(r.shape, r.dtype)


def _givens(x, y):
    """(c, s) zeroing y against x, scaled by max(|x|, |y|) to avoid overflow; (1, 0)
    where y == 0 (JAX's drotg)."""
    ax, ay = ew.abs(x), ew.abs(y)
    scale = ew.select_n(ew.gt(ax, ay), ay, ax)
    x, y = ew.div(x, scale), ew.div(y, scale)
    rh = ew.div(np.ones((), x.dtype), ew.sqrt(ew.add(ew.mul(x, x), ew.mul(y, y))))
    zero = ew.eq(y, np.zeros((), y.dtype))
    return (ew.select_n(zero, ew.mul(x, rh), np.ones((), x.dtype)),
            ew.select_n(zero, ew.neg(ew.mul(y, rh)), np.zeros((), x.dtype)))


def _cholesky_update(r, z):
    n = z.shape[0]
    for k in range(n):
        x = shapes.reshape(shapes.slice(r, (k, k), (k + 1, k + 1)), ())
        y = shapes.reshape(shapes.slice(z, (k,), (k + 1,)), ())
        c, s = _givens(x, y)
        row = shapes.reshape(shapes.slice(r, (k, 0), (k + 1, n)), (n,))
        row, z = (ew.sub(ew.mul(c, row), ew.mul(s, z)), ew.add(ew.mul(c, z), ew.mul(s, row)))
        r = dynamic_update_slice(r, shapes.reshape(row, (1, n)), (np.int32(k), np.int32(0)))
    return r


def _cholesky_update_lowering(ctx, r, w):
    if ctx.module_ctx.platform == "cuda":   # JAX's kernel (both buffers updated in place)
        return ffi.custom_call(backend.gpu_solver_target("cu_cholesky_update_ffi"), [r, w],
                               ctx.avals_in, ctx.avals_in, aliases=[(0, 0), (1, 1)],
                               column_major=False)[0]
    return _in_lowering(ctx, lambda r, w: [_cholesky_update(r, w)], [r, w], ctx.avals_in)[0]


cholesky_update_p = standard_primitive("cholesky_update", _cholesky_update_abstract_eval)
mlir.register_lowering(cholesky_update_p, _cholesky_update_lowering)
