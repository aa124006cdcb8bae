"""dot_general: contraction with batch dimensions (matmul, einsum-like products)."""
import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import check_dtype, numeric, standard_primitive
from xform.lax import shapes

hlo, ir = mlir.hlo, mlir.ir


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """General tensor contraction.

    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    The result's dimensions are the batch dimensions, then lhs's free dimensions,
    then rhs's free dimensions (each in order).
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(int(i) for i in lc), tuple(int(i) for i in rc)),
          (tuple(int(i) for i in lb), tuple(int(i) for i in rb)))
    pet = None if preferred_element_type is None else dtypes.canonicalize_dtype(
        preferred_element_type)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=precision,
                              preferred_element_type=pet)


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix products: contracts lhs's last and rhs's first dimension."""
    l, r = get_aval(lhs), get_aval(rhs)
    if l.ndim not in (1, 2) or r.ndim not in (1, 2):
        raise TypeError(f"dot only supports rank 1 or 2 operands, got shapes {l.shape} and "
                        f"{r.shape}; use dot_general")
    return dot_general(lhs, rhs, (((l.ndim - 1,), (0,)), ((), ())), precision,
                       preferred_element_type)


def _free(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision,
                               preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    check_dtype("dot_general", lhs.dtype, numeric)
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"dot_general requires operands of the same dtype, got "
                        f"{lhs.dtype.name} and {rhs.dtype.name}")
    for dims, x, what in ((lc, lhs, "lhs contracting"), (rc, rhs, "rhs contracting"),
                          (lb, lhs, "lhs batch"), (rb, rhs, "rhs batch")):
        if any(not 0 <= d < x.ndim for d in dims) or len(set(dims)) != len(dims):
            raise TypeError(f"dot_general {what} dimensions {dims} are invalid for shape "
                            f"{x.shape}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError("dot_general requires equal numbers of lhs and rhs contracting and "
                        f"batch dimensions, got {dimension_numbers}")
    lc_shape, rc_shape = [lhs.shape[i] for i in lc], [rhs.shape[i] for i in rc]
    if lc_shape != rc_shape:
        raise TypeError(f"dot_general requires contracting dimensions to have the same "
                        f"shape, got {lc_shape} and {rc_shape} (operand shapes {lhs.shape} "
                        f"and {rhs.shape}).")
    lb_shape, rb_shape = [lhs.shape[i] for i in lb], [rhs.shape[i] for i in rb]
    if lb_shape != rb_shape:
        raise TypeError(f"dot_general requires lhs batch dimensions and rhs batch "
                        f"dimensions to have the same shape, got {lb_shape} and {rb_shape}.")
    shape = (tuple(lb_shape) + tuple(lhs.shape[i] for i in _free(lhs.ndim, lc, lb))
             + tuple(rhs.shape[i] for i in _free(rhs.ndim, rc, rb)))
    dt = lhs.dtype if preferred_element_type is None else preferred_element_type
    return ShapedArray(shape, dt, lhs.weak_type and rhs.weak_type)


def _transpose_lhs(ct, x_aval, y, dimension_numbers, swap_ans=False):
    """Cotangent of the lhs ``x``: contract ct with y, then permute into x's layout."""
    (xc, yc), (xb, yb) = dimension_numbers
    y_aval = get_aval(y)
    x_kept = _free(x_aval.ndim, xc, xb)
    y_kept = _free(y_aval.ndim, yc, yb)
    nb = len(xb)
    if swap_ans:
        ans_y = range(nb, nb + len(y_kept))
    else:
        ans_y = range(nb + len(x_kept), nb + len(x_kept) + len(y_kept))
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(range(nb)), tuple(yb)))
    out = dot_general(ct, y, dims, preferred_element_type=x_aval.dtype)
    # out dims: batch (in xb order), x's free dims, then y's contracting dims in sorted order.
    y_rest = sorted(yc)
    pos = {d: i for i, d in enumerate(xb)}
    pos.update({d: nb + i for i, d in enumerate(x_kept)})
    pos.update({cx: nb + len(x_kept) + y_rest.index(cy) for cx, cy in zip(xc, yc)})
    return shapes.transpose(out, tuple(pos[d] for d in range(x_aval.ndim)))


def _dot_general_transpose_lhs(ct, x, y, *, dimension_numbers, **_):
    return _transpose_lhs(ct, x.aval, y, dimension_numbers)


def _dot_general_transpose_rhs(ct, x, y, *, dimension_numbers, **_):
    (xc, yc), (xb, yb) = dimension_numbers
    return _transpose_lhs(ct, y.aval, x, ((yc, xc), (yb, xb)), swap_ans=True)


def _dot_general_batch(vals, dims, *, dimension_numbers, precision, preferred_element_type):
    (x, y), (dx, dy) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    shift = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731  (after moving bdim to 0)
    params = dict(precision=precision, preferred_element_type=preferred_element_type)
    if dx is not None and dy is not None:
        x, y = batching.moveaxis(x, dx, 0), batching.moveaxis(y, dy, 0)
        dn = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
        return dot_general_p.bind(x, y, dimension_numbers=dn, **params), 0
    if dx is not None:
        x = batching.moveaxis(x, dx, 0)
        dn = ((shift(lc), rc), (shift(lb), rb))
        return dot_general_p.bind(x, y, dimension_numbers=dn, **params), len(lb)
    y = batching.moveaxis(y, dy, 0)
    dn = ((lc, shift(rc)), (lb, shift(rb)))
    n_lhs_free = get_aval(x).ndim - len(lc) - len(lb)
    return dot_general_p.bind(x, y, dimension_numbers=dn, **params), len(lb) + n_lhs_free


def _dot_general_lowering(ctx, x, y, *, dimension_numbers, precision, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    dn = hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
        lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
    out_aval = ctx.avals_out[0]
    in_dtype = ctx.avals_in[0].dtype
    if preferred_element_type is not None and np.dtype(preferred_element_type) != in_dtype \
            and not (dtypes.is_inexact(in_dtype) and dtypes.is_integer(preferred_element_type)):
        result = hlo.dot_general(mlir.aval_to_ir_type(out_aval), x, y, dn)
        return result
    result = hlo.dot_general(mlir.aval_to_ir_type(out_aval.update(dtype=in_dtype)), x, y, dn)
    if out_aval.dtype != in_dtype:
        result = hlo.convert(mlir.aval_to_ir_type(out_aval), result)
    return result


dot_general_p = standard_primitive("dot_general", _dot_general_abstract_eval)
ad.defbilinear(dot_general_p, _dot_general_transpose_lhs, _dot_general_transpose_rhs)
batching.primitive_batchers[dot_general_p] = _dot_general_batch
mlir.register_lowering(dot_general_p, _dot_general_lowering)
