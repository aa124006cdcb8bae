"""Rounding, remainder, clamping and floating-point classification: floor, ceil,
round (with ``RoundingMethod``), is_finite, nextafter, rem and clamp.
"""
import enum

import numpy as np

from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax import shapes as _shapes
from xform.lax._prim import (any_dtype, check_dtype, check_same_dtypes, float_dtypes,
                             integer, naryop, standard_primitive, unop)
from xform.lax.bitwise import bitwise_and
from xform.lax.elementwise import (_bcast, _const, _out_shape,
                                   abs, div, gt, lt, mul, neg, select, sign)

hlo = mlir.hlo


# ---- rounding ----

def floor(x):
    r"""Elementwise floor: the largest integer :math:`\le x` (zero derivative).

    >>> import xform.lax as lax
    >>> print(lax.floor(-1.5))
    -2.0
    """
    return floor_p.bind(x)


floor_p = unop("floor", float_dtypes)
ad.defnondiff(floor_p)
mlir.register_lowering(floor_p, mlir.elementwise(hlo.floor))


def ceil(x):
    r"""Elementwise ceiling: the smallest integer :math:`\ge x` (zero derivative).

    >>> import xform.lax as lax
    >>> print(lax.ceil(-1.5))
    -1.0
    """
    return ceil_p.bind(x)


ceil_p = unop("ceil", float_dtypes)
ad.defnondiff(ceil_p)
mlir.register_lowering(ceil_p, mlir.elementwise(hlo.ceil))


class RoundingMethod(enum.IntEnum):
    """How :func:`round` breaks ties (values exactly halfway between integers)."""
    AWAY_FROM_ZERO = 0    # 0.5 -> 1, -0.5 -> -1
    TO_NEAREST_EVEN = 1   # 0.5 -> 0, 1.5 -> 2 ("banker's rounding")


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Elementwise round to the nearest integer (zero derivative).

    Args:
      x: a floating array.
      rounding_method: a :class:`RoundingMethod` (or its int value) for ties.

    Returns:
      The rounded values, with ``x``'s shape and dtype.

    Raises:
      ValueError: for an unknown ``rounding_method``.

    >>> import xform.lax as lax
    >>> print(lax.round(2.5), lax.round(2.5, lax.RoundingMethod.TO_NEAREST_EVEN))
    3.0 2.0
    """
    try:
        rounding_method = RoundingMethod(rounding_method)
    except ValueError:
        raise ValueError(f"round: rounding_method must be a lax.RoundingMethod "
                         f"(AWAY_FROM_ZERO=0 or TO_NEAREST_EVEN=1), got "
                         f"{rounding_method!r}") from None
    return round_p.bind(x, rounding_method=rounding_method)


def _round_abstract_eval(x, *, rounding_method):
    check_dtype("round", x.dtype, float_dtypes)
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _round_lowering(ctx, x, *, rounding_method):
    if rounding_method == RoundingMethod.AWAY_FROM_ZERO:
        return hlo.round_nearest_afz(x)
    return hlo.round_nearest_even(x)


round_p = standard_primitive("round", _round_abstract_eval)
ad.defnondiff(round_p)
batching.defvectorized(round_p)
mlir.register_lowering(round_p, _round_lowering)


# ---- floating-point classification ----

def is_finite(x):
    """Elementwise test for finiteness: False for +-inf and NaN.

    >>> import xform.lax as lax
    >>> print(lax.is_finite(1.0), lax.is_finite(float("inf")))
    True False
    """
    return is_finite_p.bind(x)


is_finite_p = unop("is_finite", float_dtypes, result_dtype=lambda _: np.dtype(np.bool_))
ad.defnondiff(is_finite_p)
mlir.register_lowering(is_finite_p, mlir.elementwise(hlo.is_finite))


def nextafter(x1, x2):
    """Elementwise next representable value after ``x1`` in the direction of ``x2``.

    Args:
      x1, x2: floating arrays of the same dtype (a rank-0 operand broadcasts).

    >>> import numpy as np, xform.lax as lax
    >>> bool(lax.nextafter(np.float32(1), np.float32(2)) == 1 + np.finfo(np.float32).eps)
    True
    """
    return nextafter_p.bind(x1, x2)


def _nextafter_jvp(primals, tangents):
    # JAX has no rule: differentiating nextafter (or jnp.spacing) is its NotImplementedError.
    raise NotImplementedError("Differentiation rule for 'nextafter' not implemented")


nextafter_p = naryop("nextafter", float_dtypes)
ad.primitive_jvps[nextafter_p] = _nextafter_jvp
mlir.register_lowering(nextafter_p, mlir.elementwise(mlir.chlo.next_after))


# ---- remainder and clamp ----

def rem(x, y):
    r"""Elementwise remainder of ``x / y`` truncated toward zero, with ``x``'s sign
    (C's ``fmod``; not Python's ``%``).

    Args:
      x, y: integer or floating arrays of the same dtype (a rank-0 operand broadcasts).

    >>> import xform.lax as lax
    >>> print(lax.rem(-7, 3), lax.rem(7.5, 2.0))
    -1 1.5
    """
    return rem_p.bind(x, y)


def _rem_jvp_rhs(t, x, y):
    # rem(x, y) = x - y trunc(x / y), so d/dy = -trunc(x / y) = -sign(x/y) floor(|x/y|).
    q = div(x, y)
    return mul(neg(t), mul(sign(q), floor(abs(q))))


rem_p = naryop("rem", integer | float_dtypes)
ad.defjvp(rem_p, lambda t, x, y: _bcast(t, _out_shape(x, y)), _rem_jvp_rhs)
mlir.register_lowering(rem_p, mlir.elementwise(hlo.remainder))


def clamp(min, x, max):
    r"""Elementwise :math:`\min(\max(x, \mathrm{min}), \mathrm{max})`.

    Args:
      min: lower bound, rank 0 or of ``x``'s shape.
      x: the array to clamp.
      max: upper bound, rank 0 or of ``x``'s shape.

    Returns:
      The clamped array, with ``x``'s shape and dtype.

    Raises:
      TypeError: if the dtypes differ or a bound's shape is neither () nor ``x``'s.

    >>> import xform.lax as lax
    >>> print(lax.clamp(0.0, 1.5, 1.0))
    1.0
    """
    return clamp_p.bind(min, x, max)


def _clamp_abstract_eval(min, x, max):
    for a in (min, x, max):
        check_dtype("clamp", a.dtype, any_dtype)
    check_same_dtypes("clamp", min, x, max)
    for name, bound in (("min", min), ("max", max)):
        if bound.shape and bound.shape != x.shape:
            raise TypeError(f"clamp requires {name}.shape == operand.shape or {name}.shape "
                            f"== (), got {name}.shape={bound.shape}, "
                            f"operand.shape={x.shape}.")
    return ShapedArray(x.shape, x.dtype, min.weak_type and x.weak_type and max.weak_type)


def _clamp_where(t, pred, x):
    """The tangent ``t`` where ``pred`` holds, else 0 (``t`` broadcast to ``x``'s shape)."""
    t = _bcast(t, get_aval(x).shape)
    return select(pred, t, _shapes.full_like(t, _const(t, 0)))


def _clamp_batch(vals, dims):
    size = batching.axis_size_of(vals, dims)
    x_aval = get_aval(vals[1])
    x_shape = x_aval.shape if dims[1] is None else tuple(
        s for i, s in enumerate(x_aval.shape) if i != dims[1])
    out_shape = (size,) + x_shape
    args = []
    for i, (v, d) in enumerate(zip(vals, dims)):
        ndim = get_aval(v).ndim - (d is not None)
        if d is None and ndim == 0 and i != 1:
            args.append(v)                            # an unbatched scalar bound
        elif d is None:
            args.append(_shapes.broadcast_in_dim(v, out_shape, range(1, ndim + 1)))
        elif ndim < len(x_shape):                     # a batched per-example scalar bound
            args.append(_shapes.broadcast_in_dim(v, out_shape, (0,)))
        else:
            args.append(batching.moveaxis(v, d, 0))
    return clamp_p.bind(*args), 0


clamp_p = standard_primitive("clamp", _clamp_abstract_eval)
ad.defjvp(clamp_p,   # the tangent of whichever operand the output equals
          lambda t, lo, x, hi: _clamp_where(t, bitwise_and(gt(lo, x), lt(lo, hi)), x),
          lambda t, lo, x, hi: _clamp_where(t, bitwise_and(gt(x, lo), lt(x, hi)), x),
          lambda t, lo, x, hi: _clamp_where(t, lt(hi, x), x))
batching.primitive_batchers[clamp_p] = _clamp_batch
mlir.register_lowering(clamp_p, lambda ctx, lo, x, hi: hlo.clamp(lo, x, hi))
