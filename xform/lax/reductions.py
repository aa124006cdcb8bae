"""Reductions over static axes: sum, prod, max, min, and/or/xor, argmax/argmin; and
reduce_precision."""
import operator

import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import check_dtype, numeric, standard_primitive
from xform.lax import shapes
from xform.lax.elementwise import _const, add, convert_element_type, div, eq, max_hlo, min_hlo, mul

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


def _reduce_abstract_eval(name, allowed=numeric, strip_weak=False):
    def rule(x, *, axes):
        if allowed is _logical:
            if x.dtype != np.bool_ and not dtypes.is_integer(x.dtype):
                raise TypeError(f"{name} requires a bool or integer operand, got "
                                f"{x.dtype.name}")
        else:
            check_dtype(name, x.dtype, allowed)
        if any(not 0 <= a < x.ndim for a in axes):
            raise ValueError(f"{name}: axes {axes} out of bounds for shape {x.shape}")
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in axes),
                           x.dtype, x.weak_type and not strip_weak)
    return rule


_logical = object()   # marker: bool or integer operands (reduce_and/or/xor)


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


def _monoid_reducer(name, combine, identity, allowed=numeric, strip_weak=False):
    """Declare a reduction by a monoid (``combine``, ``identity(dtype)``): abstract
    eval, batching and lowering; returns (primitive, public wrapper)."""
    prim = standard_primitive(name, _reduce_abstract_eval(name, allowed, strip_weak))
    batching.primitive_batchers[prim] = _reduce_batch(prim)
    mlir.register_lowering(prim, _identity_reduce_lowering(combine, identity))

    def reduce(operand, axes):
        aval = get_aval(operand)
        axes = _canonical_axes(axes, aval.ndim, name) if aval.ndim else ()
        return prim.bind(operand, axes=axes)   # as JAX's, also for axes=(): an Array out
    reduce.__name__ = reduce.__qualname__ = name
    return prim, reduce


def _kept(shape, axes):
    return tuple(i for i in range(len(shape)) if i not in axes)


# ---- reduce_sum ----

def _reduce_sum_transpose(ct, x, *, axes):
    shape = x.aval.shape
    return [shapes.broadcast_in_dim(ct, shape, _kept(shape, axes))]


reduce_sum_p, reduce_sum = _monoid_reducer(
    "reduce_sum", hlo.add, lambda dt: False if dt == np.bool_ else 0)
reduce_sum.__doc__ = """Sum over ``axes`` (negative axes count from the end).

    >>> reduce_sum(jnp.ones((2, 3)), (1,))
    Array([3., 3.], dtype=float32)
    """
ad.deflinear(reduce_sum_p, _reduce_sum_transpose)


# ---- reduce_prod ----

def _reduce_prod_jvp(primals, tangents, *, axes):
    # Product rule on a balanced tree: rows are multiplied pairwise, so a zero factor
    # needs no division (JAX's approach).
    (x,), (t,) = primals, tangents
    ans = reduce_prod_p.bind(x, axes=axes)
    shape = get_aval(x).shape
    kept = _kept(shape, axes)
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    if n == 0:
        return ans, shapes.full_like(ans, 0)
    rows = (n,) + tuple(shape[i] for i in kept)
    x = shapes.reshape(x, rows, tuple(axes) + kept)
    t = shapes.reshape(ad.instantiate_zeros(t), rows, tuple(axes) + kept)
    while n > 1:
        h = (n + 1) // 2
        halves = [(_rows(v, 0, h), _rows(v, h, n)) for v in (x, t)]
        (x1, x2), (t1, t2) = halves
        if n % 2:   # odd: the second half gets a neutral row (x = 1, t = 0)
            cfg = [(0, 1, 0)] + [(0, 0, 0)] * len(kept)
            x2, t2 = shapes.pad(x2, _const(x2, 1), cfg), shapes.pad(t2, _const(t2, 0), cfg)
        x, t, n = mul(x1, x2), add(mul(t1, x2), mul(x1, t2)), h
    return ans, shapes.reshape(t, get_aval(ans).shape)


def _rows(x, lo, hi):
    shape = get_aval(x).shape
    return shapes.slice(x, (lo,) + (0,) * (len(shape) - 1), (hi,) + shape[1:])


reduce_prod_p, reduce_prod = _monoid_reducer("reduce_prod", hlo.multiply, lambda dt: 1)
reduce_prod.__doc__ = """Product over ``axes`` (the product of an empty axis is 1).

    >>> reduce_prod(jnp.array([[1., 2.], [3., 4.]]), (0,))
    Array([3., 8.], dtype=float32)
    """
ad.primitive_jvps[reduce_prod_p] = _reduce_prod_jvp


# ---- reduce_max / reduce_min ----

def _lowest(dt):
    if dtypes.is_inexact(dt):  # (float8_e4m3fn etc. have no inf: their finite min)
        return -np.inf if dtypes.supports_inf(dt) else dtypes.finfo(dt).min
    return False if dt == np.bool_ else dtypes.iinfo(dt).min


def _highest(dt):
    if dtypes.is_inexact(dt):
        return np.inf if dtypes.supports_inf(dt) else dtypes.finfo(dt).max
    return True if dt == np.bool_ else dtypes.iinfo(dt).max


def _reduce_chooser_jvp(prim):
    # The tangent is the mean of the tangents at the positions that attain the extremum.
    def jvp(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axes=axes)
        shape = get_aval(x).shape
        location = eq(x, shapes.broadcast_in_dim(ans, shape, _kept(shape, axes)))
        location = convert_element_type(location, get_aval(x).dtype)
        counts = reduce_sum(location, axes)
        return ans, div(reduce_sum(mul(t, location), axes), counts)
    return jvp


reduce_max_p, reduce_max = _monoid_reducer("reduce_max", max_hlo, _lowest,
                                          dtypes.all_dtypes)   # bool too, as JAX
reduce_max.__doc__ = """Maximum over ``axes`` (``-inf`` or the dtype's minimum if empty).

    >>> reduce_max(jnp.array([[1., 5.], [3., 4.]]), (1,))
    Array([5., 4.], dtype=float32)
    """
ad.primitive_jvps[reduce_max_p] = _reduce_chooser_jvp(reduce_max_p)
reduce_min_p, reduce_min = _monoid_reducer("reduce_min", min_hlo, _highest,
                                          dtypes.all_dtypes)
reduce_min.__doc__ = """Minimum over ``axes`` (``inf`` or the dtype's maximum if empty).

    >>> reduce_min(jnp.array([[1., 5.], [3., 4.]]), (1,))
    Array([1., 3.], dtype=float32)
    """
ad.primitive_jvps[reduce_min_p] = _reduce_chooser_jvp(reduce_min_p)


# ---- reduce_and / reduce_or / reduce_xor (bitwise on integers, logical on bool) ----

def _all_ones(dt):
    return True if dt == np.bool_ else np.array(-1).astype(dt)


reduce_and_p, reduce_and = _monoid_reducer("reduce_and", hlo.and_, _all_ones, _logical, True)
reduce_and.__doc__ = """Bitwise (logical for bool) AND over ``axes``; not differentiable.

    >>> reduce_and(jnp.array([[True, False], [True, True]]), (1,))
    Array([False,  True], dtype=bool)
    """
reduce_or_p, reduce_or = _monoid_reducer("reduce_or", hlo.or_, lambda dt: 0, _logical, True)
reduce_or.__doc__ = """Bitwise (logical for bool) OR over ``axes``; not differentiable.

    >>> reduce_or(jnp.array([[True, False], [False, False]]), (1,))
    Array([ True, False], dtype=bool)
    """
reduce_xor_p, reduce_xor = _monoid_reducer("reduce_xor", hlo.xor, lambda dt: 0, _logical,
                                           True)
reduce_xor.__doc__ = """Bitwise (logical for bool) XOR over ``axes``; not differentiable.

    >>> reduce_xor(jnp.array([[True, True], [True, False]]), (1,))
    Array([False,  True], dtype=bool)
    """
for _p in (reduce_and_p, reduce_or_p, reduce_xor_p):
    ad.defnondiff(_p)


# ---- reduce_precision ----

def reduce_precision(operand, exponent_bits, mantissa_bits):
    """Round ``operand`` to a float format with the given exponent and mantissa bits.

    >>> reduce_precision(jnp.array([1.0009765625]), exponent_bits=5, mantissa_bits=10)
    Array([1.0009766], dtype=float32)
    """
    return reduce_precision_p.bind(operand, exponent_bits=operator.index(exponent_bits),
                                   mantissa_bits=operator.index(mantissa_bits))


def _reduce_precision_abstract_eval(x, *, exponent_bits, mantissa_bits):
    check_dtype("reduce_precision", x.dtype, dtypes.float_dtypes)
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got "
                         f"{exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; got "
                         f"{mantissa_bits}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


reduce_precision_p = standard_primitive("reduce_precision", _reduce_precision_abstract_eval)
# Linear as in JAX: rounding is treated as the identity on tangents' direction.
ad.deflinear(reduce_precision_p, lambda ct, x, **p: [reduce_precision_p.bind(ct, **p)])
batching.defvectorized(reduce_precision_p)
mlir.register_lowering(reduce_precision_p, lambda ctx, x, *, exponent_bits, mantissa_bits:
                       hlo.reduce_precision(x, exponent_bits, mantissa_bits))


# ---- argmax / argmin ----

def argmax(operand, axis, index_dtype):
    """Index of the maximum along ``axis`` (first occurrence; NaN counts as maximal).

    >>> argmax(jnp.array([[1., 3., 3.], [2., 0., 1.]]), 1, jnp.int32)
    Array([1, 0], dtype=int32)
    """
    return _arg_bind(argmax_p, operand, axis, index_dtype)


def argmin(operand, axis, index_dtype):
    """Index of the minimum along ``axis`` (first occurrence; NaN counts as minimal).

    >>> argmin(jnp.array([[1., 0., 0.], [2., 3., 1.]]), 1, jnp.int32)
    Array([1, 2], dtype=int32)
    """
    return _arg_bind(argmin_p, operand, axis, index_dtype)


def _arg_bind(prim, operand, axis, index_dtype):
    aval = get_aval(operand)
    (axis,) = _canonical_axes((axis,), aval.ndim, prim.name)
    index_dtype = dtypes.canonicalize_dtype(index_dtype)
    if not dtypes.is_integer(index_dtype):
        raise TypeError(f"{prim.name} index_dtype must be an integer type, got "
                        f"{np.dtype(index_dtype).name}")
    return prim.bind(operand, axes=(axis,), index_dtype=index_dtype)


def _arg_abstract_eval(name):
    def rule(x, *, axes, index_dtype):
        check_dtype(name, x.dtype, (numeric - dtypes.complex_dtypes) | {np.dtype(np.bool_)})
        (axis,) = axes
        if x.shape[axis] == 0:
            raise ValueError(f"{name} of an empty axis (axis {axis} of shape {x.shape}) "
                             "is undefined")
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i != axis),
                           index_dtype)
    return rule


def _arg_batch(prim):
    def rule(vals, dims, *, axes, index_dtype):
        (x,), (d,) = vals, dims
        (axis,) = axes
        new_axis = axis if axis < d else axis + 1
        return prim.bind(x, axes=(new_axis,), index_dtype=index_dtype), (
            d if new_axis > d else d - 1)
    return rule


def _arg_lowering(direction, init):
    """Variadic reduce over (value, index) with JAX's comparator (so the same program,
    hence the same index, as JAX's): the left operand wins when it compares better or
    is NaN; its index also wins on equal values with a lower index."""
    def rule(ctx, x, *, axes, index_dtype):
        x_aval = ctx.avals_in[0]
        idx_aval = ShapedArray(x_aval.shape, index_dtype)
        idx = mlir.iota(idx_aval, axes[0])
        inexact = dtypes.is_inexact(x_aval.dtype)
        kind = "FLOAT" if inexact else ("UNSIGNED" if dtypes.is_unsigned(x_aval.dtype) or
                                        x_aval.dtype == np.bool_ else "SIGNED")

        def cmp(a, b, how, k=kind):
            return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(how),
                               compare_type=hlo.ComparisonTypeAttr.get(k))

        def body(op, acc):
            (op_val, op_idx), (acc_val, acc_idx) = op, acc
            pick_val = cmp(op_val, acc_val, direction)
            if inexact:
                pick_val = hlo.or_(pick_val, cmp(op_val, op_val, "NE"))
            earlier = cmp(op_idx, acc_idx, "LT", "UNSIGNED" if dtypes.is_unsigned(
                index_dtype) else "SIGNED")
            pick_idx = hlo.or_(pick_val, hlo.and_(cmp(op_val, acc_val, "EQ"), earlier))
            return [hlo.select(pick_val, op_val, acc_val),
                    hlo.select(pick_idx, op_idx, acc_idx)]

        init_val = mlir.ir_constant(np.array(init(x_aval.dtype), x_aval.dtype))
        init_idx = mlir.ir_constant(np.array(0, index_dtype))
        ctx2 = mlir.LoweringRuleContext(ctx.module_ctx, ctx.primitive, [x_aval, idx_aval],
                                        [ctx.avals_out[0].update(dtype=x_aval.dtype),
                                         ctx.avals_out[0]])
        return _lower_reduce(ctx2, [x, idx], [init_val, init_idx], axes, body)[1]
    return rule


argmax_p = standard_primitive("argmax", _arg_abstract_eval("argmax"))
ad.defnondiff(argmax_p)
batching.primitive_batchers[argmax_p] = _arg_batch(argmax_p)
mlir.register_lowering(argmax_p, _arg_lowering("GT", _lowest))

argmin_p = standard_primitive("argmin", _arg_abstract_eval("argmin"))
ad.defnondiff(argmin_p)
batching.primitive_batchers[argmin_p] = _arg_batch(argmin_p)
mlir.register_lowering(argmin_p, _arg_lowering("LT", _highest))
