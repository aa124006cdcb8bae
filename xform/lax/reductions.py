"""Reductions over static axes: reduce_sum, reduce_max, reduce_min, argmax."""
import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import check_dtype, numeric, standard_primitive
from xform.lax import shapes
from xform.lax.elementwise import convert_element_type, div, eq, mul

hlo, ir = mlir.hlo, mlir.ir


def _canonical_axes(axes, ndim, name):
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < max(ndim, 1) or (ndim == 0):
            raise ValueError(f"{name}: axis {a} is out of bounds for array of dimension {ndim}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: duplicate value in axes {tuple(axes)}")
    return tuple(sorted(out))


def _reduce_abstract_eval(name, allowed=numeric):
    def rule(x, *, axes):
        check_dtype(name, x.dtype, allowed)
        if any(not 0 <= a < x.ndim for a in axes):
            raise ValueError(f"{name}: axes {axes} out of bounds for shape {x.shape}")
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in axes),
                           x.dtype, x.weak_type)
    return rule


def _reduce_batch(prim):
    def rule(vals, dims, *, axes):
        (x,), (d,) = vals, dims
        new_axes = tuple(a if a < d else a + 1 for a in axes)
        out_d = d - sum(1 for a in new_axes if a < d)
        return prim.bind(x, axes=new_axes), out_d
    return rule


def _lower_reduce(ctx, operands, inits, axes, body):
    scalar_types = [mlir.aval_to_ir_type(ShapedArray((), a.dtype)) for a in ctx.avals_in]
    out_types = [mlir.aval_to_ir_type(a) for a in ctx.avals_out]
    op = hlo.ReduceOp(out_types, list(operands), list(inits), mlir.dense_i64(axes))
    block = op.regions[0].blocks.append(*(scalar_types * 2))
    with ir.InsertionPoint(block):
        n = len(operands)
        outs = body(list(block.arguments[:n]), list(block.arguments[n:]))
        hlo.return_(list(outs))
    return list(op.results)


def _identity_reduce_lowering(combine, identity):
    def rule(ctx, x, *, axes):
        aval = ctx.avals_in[0]
        init = mlir.ir_constant(np.array(identity(aval.dtype), aval.dtype))
        return _lower_reduce(ctx, [x], [init], axes,
                             lambda acc, xs: [combine(acc[0], xs[0])])[0]
    return rule


# ---- reduce_sum ----

def reduce_sum(operand, axes):
    """Sum over ``axes``."""
    aval = get_aval(operand)
    axes = _canonical_axes(axes, aval.ndim, "reduce_sum") if aval.ndim else ()
    if not axes:
        return operand
    return reduce_sum_p.bind(operand, axes=axes)


def _reduce_sum_transpose(ct, x, *, axes):
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [shapes.broadcast_in_dim(ct, shape, kept)]


reduce_sum_p = standard_primitive("reduce_sum", _reduce_abstract_eval("reduce_sum"))
ad.deflinear(reduce_sum_p, _reduce_sum_transpose)
batching.primitive_batchers[reduce_sum_p] = _reduce_batch(reduce_sum_p)
mlir.register_lowering(reduce_sum_p, _identity_reduce_lowering(
    hlo.add, lambda dt: False if dt == np.bool_ else 0))


# ---- reduce_max / reduce_min ----

def _lowest(dt):
    return -np.inf if dtypes.is_inexact(dt) else (
        False if dt == np.bool_ else np.iinfo(dt).min)


def _highest(dt):
    return np.inf if dtypes.is_inexact(dt) else (
        True if dt == np.bool_ else np.iinfo(dt).max)


def _reduce_chooser_jvp(prim):
    # The tangent is the mean of the tangents at the positions that attain the extremum.
    def jvp(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axes=axes)
        shape = get_aval(x).shape
        kept = tuple(i for i in range(len(shape)) if i not in axes)
        location = eq(x, shapes.broadcast_in_dim(ans, shape, kept))
        location = convert_element_type(location, get_aval(x).dtype)
        counts = reduce_sum(location, axes)
        return ans, div(reduce_sum(mul(t, location), axes), counts)
    return jvp


def _chooser(name, combine, identity):
    """A reduction picking one element (max/min): its JVP averages tied positions."""
    prim = standard_primitive(name, _reduce_abstract_eval(name))
    ad.primitive_jvps[prim] = _reduce_chooser_jvp(prim)
    batching.primitive_batchers[prim] = _reduce_batch(prim)
    mlir.register_lowering(prim, _identity_reduce_lowering(combine, identity))

    def reduce(operand, axes):
        aval = get_aval(operand)
        axes = _canonical_axes(axes, aval.ndim, name) if aval.ndim else ()
        return prim.bind(operand, axes=axes) if axes else operand
    reduce.__name__ = name
    return prim, reduce


reduce_max_p, reduce_max = _chooser("reduce_max", hlo.maximum, _lowest)
reduce_max.__doc__ = "Maximum over ``axes``."
reduce_min_p, reduce_min = _chooser("reduce_min", hlo.minimum, _highest)
reduce_min.__doc__ = "Minimum over ``axes``."


# ---- argmax ----

def argmax(operand, axis, index_dtype):
    """Index of the maximum along ``axis`` (first occurrence; NaN counts as maximal)."""
    aval = get_aval(operand)
    (axis,) = _canonical_axes((axis,), aval.ndim, "argmax")
    return argmax_p.bind(operand, axes=(axis,),
                         index_dtype=dtypes.canonicalize_dtype(index_dtype))


def _argmax_abstract_eval(x, *, axes, index_dtype):
    check_dtype("argmax", x.dtype, numeric)
    (axis,) = axes
    if x.shape[axis] == 0:
        raise ValueError("argmax of an empty axis is undefined")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i != axis), index_dtype)


def _argmax_batch(vals, dims, *, axes, index_dtype):
    (x,), (d,) = vals, dims
    (axis,) = axes
    new_axis = axis if axis < d else axis + 1
    return argmax_p.bind(x, axes=(new_axis,), index_dtype=index_dtype), (
        d if new_axis > d else d - 1)


def _argmax_lowering(ctx, x, *, axes, index_dtype):
    x_aval = ctx.avals_in[0]
    idx_aval = ShapedArray(x_aval.shape, index_dtype)
    idx = hlo.iota(mlir.aval_to_ir_type(idx_aval), axes[0])
    inexact = dtypes.is_inexact(x_aval.dtype)
    kind = "FLOAT" if inexact else ("UNSIGNED" if dtypes.is_unsigned(x_aval.dtype) or
                                    x_aval.dtype == np.bool_ else "SIGNED")

    def cmp(a, b, direction, k=kind):
        return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(direction),
                           compare_type=hlo.ComparisonTypeAttr.get(k))

    def body(acc, xs):
        (a_val, a_idx), (b_val, b_idx) = acc, xs
        better = cmp(b_val, a_val, "GT")
        same = cmp(b_val, a_val, "EQ")
        if inexact:
            b_nan, a_nan = cmp(b_val, b_val, "NE"), cmp(a_val, a_val, "NE")
            better = hlo.or_(better, hlo.and_(b_nan, hlo.not_(a_nan)))
            same = hlo.or_(same, hlo.and_(b_nan, a_nan))
        earlier = cmp(b_idx, a_idx, "LT", "SIGNED" if not dtypes.is_unsigned(index_dtype)
                      else "UNSIGNED")
        pick_b = hlo.or_(better, hlo.and_(same, earlier))
        return [hlo.select(pick_b, b_val, a_val), hlo.select(pick_b, b_idx, a_idx)]

    init_val = mlir.ir_constant(np.array(_lowest(x_aval.dtype), x_aval.dtype))
    init_idx = mlir.ir_constant(np.array(0, index_dtype))
    ctx2 = mlir.LoweringRuleContext(ctx.module_ctx, ctx.primitive, [x_aval, idx_aval],
                                    [ctx.avals_out[0].update(dtype=x_aval.dtype),
                                     ctx.avals_out[0]])
    return _lower_reduce(ctx2, [x, idx], [init_val, init_idx], axes, body)[1]


argmax_p = standard_primitive("argmax", _argmax_abstract_eval)
ad.defnondiff(argmax_p)
batching.primitive_batchers[argmax_p] = _argmax_batch
mlir.register_lowering(argmax_p, _argmax_lowering)
