"""Elementwise functions: arithmetic, transcendental, comparisons, logical ops, where,
clip. Each promotes like JAX and broadcasts like NumPy, then applies one lax primitive.

Binary functions start with a fast path (``_fast_pair``) for the two common eager
cases, which skips ``result_type`` and broadcasting: two arrays of one dtype and
shape, and an array with a Python scalar that takes the array's dtype (weakly).

Comparisons of two weakly typed operands give weakly typed bools, as in JAX (lax's
comparison primitives follow the all-weak rule themselves).
"""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.core.array import Array
from xform.core.trace import Tracer
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy._util import asarray, promote_args

# Python scalar type -> array dtypes it joins without changing them (weakly).
_WEAK_OK = {
    int: frozenset(dtypes.numeric_dtypes),
    float: frozenset(dtypes.inexact_dtypes),
}
_INT_BOUNDS = {d: (int(dtypes.iinfo(d).min), int(dtypes.iinfo(d).max)) for d in dtypes.int_dtypes}


def _fast_pair(x, y, allowed=None):
    """Operands ready for a lax binary op without promotion, or None (slow path).

    ``allowed`` restricts the dtypes the fast path may produce (e.g. inexact for
    true_divide).
    """
    tx, ty = type(x), type(y)
    if ty is float or ty is int:
        if tx is Array or isinstance(x, Tracer):
            dt = x.aval.dtype
            if dt in _WEAK_OK[ty] and (allowed is None or dt in allowed):
                if dt in _INT_BOUNDS and not _INT_BOUNDS[dt][0] <= y <= _INT_BOUNDS[dt][1]:
                    return None
                return x, _util.scalar_array(y, dt, True)
        return None
    if tx is float or tx is int:
        if ty is Array or isinstance(y, Tracer):
            dt = y.aval.dtype
            if dt in _WEAK_OK[tx] and (allowed is None or dt in allowed):
                if dt in _INT_BOUNDS and not _INT_BOUNDS[dt][0] <= x <= _INT_BOUNDS[dt][1]:
                    return None
                return _util.scalar_array(x, dt, True), y
        return None
    if (tx is Array or isinstance(x, Tracer)) and (ty is Array or isinstance(y, Tracer)):
        ax, ay = x.aval, y.aval
        if ax.dtype == ay.dtype and ax.shape == ay.shape and (
                allowed is None or ax.dtype in allowed) and (
                ax.weak_type == ay.weak_type or tx is ty is Array):
            return x, y   # (a weak tracer meeting a strong one takes convert's cast)
    return None


def _binary(name, prim, doc, to=None, allowed=None, bool_fn=None, extended_fn=None,
            complex_fn=None):
    """A NumPy binary function over ``prim``; ``bool_fn(a, b)`` handles bool operands
    (lax arithmetic takes no bools: JAX's add is "or" on them, multiply "and"),
    ``complex_fn(a, b)`` complex ones, and ``extended_fn(a, b)`` operands of an extended
    dtype (typed keys)."""
    bind = prim.bind
    if bool_fn is not None:
        allowed = dtypes.numeric_dtypes
    elif complex_fn is not None:
        allowed = [d for d in dtypes.all_dtypes if not dtypes.is_complex(d)]
    elif extended_fn is not None:   # (extended dtypes miss the fast path)
        allowed = dtypes.all_dtypes

    weak = {}  # (scalar type, value, array dtype) -> _fast_pair's weak rank-0 operand

    def fn(x1, x2, /):
        # Traced and lazy ``x + 0.5`` (eager calls hit the composite's cache first): the
        # operand _fast_pair made before, in one lookup (~0.2 us less per recorded op).
        # Not for 0 (-0.0 == 0.0 would share an entry) nor nan (never equal to itself).
        t1, t2 = type(x1), type(x2)
        if t2 is float or t2 is int:
            if t1 is Array:
                c = weak.get((t2, x2, x1.aval.dtype))
                if c is not None:
                    return bind(x1, c)
            ops = _fast_pair(x1, x2, allowed)
            if ops is not None and x2 and x2 == x2 and len(weak) < 1024:
                weak[(t2, x2, ops[0].aval.dtype)] = ops[1]
        elif t1 is float or t1 is int:
            if t2 is Array:
                c = weak.get((t1, x1, x2.aval.dtype))
                if c is not None:
                    return bind(c, x2)
            ops = _fast_pair(x1, x2, allowed)
            if ops is not None and x1 and x1 == x1 and len(weak) < 1024:
                weak[(t1, x1, ops[1].aval.dtype)] = ops[0]
        else:
            ops = _fast_pair(x1, x2, allowed)
        if ops is None:
            if extended_fn is not None and (_is_extended(x1) or _is_extended(x2)):
                return extended_fn(x1, x2)
            ops = promote_args(name, x1, x2, to=to)
            if bool_fn is not None and ops[0].aval.dtype == dtypes.bool_:
                return bool_fn(*ops)
            if complex_fn is not None and dtypes.is_complex(ops[0].aval.dtype):
                return complex_fn(prim, *ops)
        return bind(*ops)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return composite(fn)


def _bool_or(a, b):
    return logical_or(a, b)


def _bool_and(a, b):
    return logical_and(a, b)


add = _binary("add", lax.add_p, "Like numpy.add (logical or on bools).", bool_fn=_bool_or)
subtract = _binary("subtract", lax.sub_p, "Like numpy.subtract.")
multiply = _binary("multiply", lax.mul_p, "Like numpy.multiply (logical and on bools).",
                   bool_fn=_bool_and)
maximum = _binary("maximum", lax.max_p, "Like numpy.maximum (NaN-propagating).",
                  bool_fn=_bool_or)
minimum = _binary("minimum", lax.min_p, "Like numpy.minimum (NaN-propagating).",
                  bool_fn=_bool_and)
true_divide = _binary("true_divide", lax.div_p, """Like numpy.true_divide.

    Integer and bool operands are promoted to the default float dtype first.

    >>> jnp.true_divide(jnp.arange(3), 2)
    Array([0. , 0.5, 1. ], dtype=float32)
    """, to="inexact", allowed=dtypes.inexact_dtypes)
divide = true_divide
def _is_extended(x):
    dt = getattr(x, "dtype", None)
    return dt is not None and not isinstance(dt, np.dtype) and dtypes.is_extended(dt)


def _keys_equal(x1, x2):
    # Typed keys compare through their dtype's rule: all physical words equal.
    dt = x1.dtype if _is_extended(x1) else x2.dtype
    return dt._rules.equal(x1, x2)


equal = _binary("equal", lax.eq_p, "Like numpy.equal.", extended_fn=_keys_equal)
not_equal = _binary("not_equal", lax.ne_p, "Like numpy.not_equal.",
                    extended_fn=lambda a, b: logical_not(_keys_equal(a, b)))
def _complex_order(prim, a, b):
    """Complex operands compare lexicographically, (real, imag), as in JAX."""
    ra, rb = lax.real(a), lax.real(b)
    return lax.select(lax.eq(ra, rb), prim.bind(lax.imag(a), lax.imag(b)), prim.bind(ra, rb))


less = _binary("less", lax.lt_p, "Like numpy.less.", complex_fn=_complex_order)
less_equal = _binary("less_equal", lax.le_p, "Like numpy.less_equal.",
                     complex_fn=_complex_order)
greater = _binary("greater", lax.gt_p, "Like numpy.greater.", complex_fn=_complex_order)
greater_equal = _binary("greater_equal", lax.ge_p, "Like numpy.greater_equal.",
                        complex_fn=_complex_order)


def _compare(fn, a, b):
    return fn(a, b)   # weakly typed exactly when both operands are (lax's rule, as JAX)


_INEXACT = dtypes.inexact_dtypes


def _unary_inexact(name, lax_fn):
    def fn(x, /):
        aval = getattr(x, "aval", None)
        if aval is not None and aval.dtype in _INEXACT:  # fast path: nothing to promote
            return lax_fn(x)
        x, = _util.promote_dtypes(name, x, to="inexact")
        return lax_fn(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Like numpy.{name} (integer and bool inputs are promoted to float)."
    return composite(fn)


# (``lax.sin(x)`` is ``sin_p.bind(x)``: binding directly is one frame less per traced
# or recorded call)
exp = _unary_inexact("exp", lax.exp_p.bind)
log = _unary_inexact("log", lax.log_p.bind)
sin = _unary_inexact("sin", lax.sin_p.bind)
cos = _unary_inexact("cos", lax.cos_p.bind)
tanh = _unary_inexact("tanh", lax.tanh_p.bind)
sqrt = _unary_inexact("sqrt", lax.sqrt_p.bind)


def _const(x, value):
    return _util.scalar_array(value, x.aval.dtype, True)


def _full_like(x, value, weak=None):
    """``value`` broadcast to ``x``'s shape and dtype (and weak type, by default)."""
    fill = _util.scalar_array(value, x.aval.dtype, x.aval.weak_type if weak is None else weak)
    return lax.broadcast_in_dim(fill, x.aval.shape, ())


@composite
def exp2(x, /):
    """Like numpy.exp2: computed as ``exp(ln(2) * x)``, as JAX's lowering does."""
    x, = _util.promote_dtypes("exp2", x, to="inexact")
    return lax.exp(lax.mul(x, _const(x, np.log(2.0))))


@composite
def log2(x, /):
    """Like numpy.log2: computed as ``log(x) / log(2)``, as JAX does (complex: both
    parts divided by the real ``log(2)``; the result is never weak)."""
    x, = _util.promote_dtypes("log2", x, to="inexact")
    r = lax.log(x)
    if dtypes.is_complex(x.aval.dtype):
        re, im = lax.real(r), lax.imag(r)
        ln2 = lax.log(_util.scalar_array(2, re.aval.dtype, False))
        return lax.complex(lax.div(re, ln2), lax.div(im, ln2))
    return lax.div(r, lax.log(_util.scalar_array(2, x.aval.dtype, False)))


@composite
def log10(x, /):
    """Like numpy.log10: computed as ``log(x) * (1 / log(10))`` in ``x``'s dtype, as JAX
    does (complex: both parts times the real constant; the result is never weak)."""
    x, = _util.promote_dtypes("log10", x, to="inexact")
    r = lax.log(x)
    if dtypes.is_complex(x.aval.dtype):
        re, im = lax.real(r), lax.imag(r)
        c = _util.scalar_array(0.4342944819032518, re.aval.dtype, False)
        return lax.complex(lax.mul(re, c), lax.mul(im, c))
    return lax.mul(r, _util.scalar_array(0.4342944819032518, x.aval.dtype, False))


@composite
def negative(x, /):
    """Like numpy.negative (unsigned integers wrap around)."""
    return lax.neg(asarray(x, "negative"))


@composite
def positive(x, /):
    """Like numpy.positive."""
    return asarray(x, "positive")


@composite
def absolute(x, /):
    """Like numpy.absolute; bool and unsigned inputs are returned unchanged."""
    x = asarray(x, "absolute")
    dt = x.aval.dtype
    return x if dt == dtypes.bool_ or dtypes.is_unsigned(dt) else lax.abs(x)


abs = absolute


@composite
def sign(x, /):
    """Like numpy.sign."""
    x = asarray(x, "sign")
    if dtypes.is_unsigned(x.aval.dtype):  # stablehlo.sign takes no unsigned types
        return lax.convert_element_type(lax.ne(x, _const(x, 0)), x.aval.dtype,
                                        x.aval.weak_type)
    return lax.sign(x)


@composite
def square(x, /):
    """Like numpy.square (``lax.square``: complex squares' real part is
    ``(re + im) * (re - im)``, as JAX's; bool is promoted to int)."""
    x, = _util.promote_dtypes("square", x, to="numeric")
    return lax.square(x)


@composite
def reciprocal(x, /):
    """Like numpy.reciprocal, but integer inputs are promoted to float (as in JAX).

    >>> jnp.reciprocal(jnp.array([1, 2, 4]))
    Array([1.  , 0.5 , 0.25], dtype=float32)
    """
    x, = _util.promote_dtypes("reciprocal", x, to="inexact")
    return lax.integer_pow(x, -1)


# ---- power ----

def _concrete_int(x):
    """``x`` as a Python int if it is a concrete integer scalar, else None."""
    if type(x) is int or type(x) is bool:
        return int(x)
    if isinstance(x, Tracer):
        x = x.to_concrete_value()
        if x is None:
            return None
    if isinstance(x, (Array, np.ndarray, np.generic)):
        if x.shape or not dtypes.is_integer(x.dtype):
            return None
    elif not isinstance(x, int):
        return None
    return operator.index(x)


def _pow_int_int(x1, x2):
    # Binary exponentiation over the exponent's low 6 bits (more would overflow for
    # |x1| > 1), matching JAX; the bits are read with div/sub as lax has no bitwise ops.
    zero = _const(x1, 0)
    acc = lax.select(logical_and(lax.eq(x1, zero), lax.ne(x2, _const(x2, 0))),
                     _full_like(x1, 0, weak=False), _full_like(x1, 1, weak=False))
    r = lax.sub(x2, lax.mul(lax.div(x2, _const(x2, 64)), _const(x2, 64)))
    bits = lax.select(lax.lt(r, _const(r, 0)), lax.add(r, _const(r, 64)), r)  # x2 mod 64
    for _ in range(6):
        half = lax.div(bits, _const(bits, 2))
        odd = lax.ne(lax.sub(bits, lax.mul(half, _const(bits, 2))), _const(bits, 0))
        acc = lax.select(odd, lax.mul(acc, x1), acc)
        x1, bits = lax.mul(x1, x1), half
    return acc


def power(x1, x2, /):
    """Like numpy.power, with JAX's rules.

    A concrete integer exponent uses exact repeated multiplication
    (``lax.integer_pow``); integer bases with integer array exponents use binary
    exponentiation (negative exponents give implementation-defined values instead of
    NumPy's error).

    >>> jnp.power(jnp.arange(4), 2)
    Array([0, 1, 4, 9], dtype=int32)
    """
    if type(x2) is int and (type(x1) is Array or isinstance(x1, Tracer)) \
            and x1.aval.dtype in dtypes.numeric_dtypes:
        return lax.integer_pow(x1, x2)  # fast path for x ** 2
    _util.check_arraylike("power", x1, x2)
    n = _concrete_int(x2)
    if n is not None:
        x1, = _util.promote_dtypes("power", x1, to="numeric")
        return lax.integer_pow(x1, n)
    a1, a2 = asarray(x1, "power"), asarray(x2, "power", 1)
    a1, a2 = _util.broadcast_arrays("power", a1, a2)
    d1, d2 = a1.aval.dtype, a2.aval.dtype
    if dtypes.is_inexact(d1) and dtypes.is_integer(d2):
        # Neither is promoted: lax.pow's JVP at x1 = 0 is then 0 where x2 == 0 (a
        # float exponent gives 0 * 0**-1 = nan), as JAX's.
        return lax.pow(a1, a2)
    p1, p2 = _util.promote_dtypes("power", x1, x2, to="numeric")
    p1, p2 = _util.broadcast_arrays("power", p1, p2, scalars_ok=False)
    if dtypes.is_integer(p1.aval.dtype):
        return _pow_int_int(p1, p2)
    return lax.pow(p1, p2)


pow = power


# ---- integer division ----

def _float_floor_mod(x1, x2):
    """(floor(x1 / x2), x1 mod x2) for floats, as JAX: from the truncated remainder,
    corrected where its sign differs from ``x2``'s."""
    mod = lax.rem(x1, x2)
    zero = _const(mod, 0)
    div = lax.div(lax.select(lax.eq(x2, zero), x1, lax.sub(x1, mod)), x2)
    fix = logical_and(lax.ne(mod, zero), lax.ne(lax.sign(x2), lax.sign(mod)))
    mod = lax.select(fix, lax.add(mod, x2), mod)
    div = lax.select(fix, lax.sub(div, _const(div, 1)), div)
    return lax.round(div), mod


@composite
def floor_divide(x1, x2, /):
    """Like numpy.floor_divide.

    >>> jnp.floor_divide(jnp.array([-3, 3]), 2)
    Array([-2,  1], dtype=int32)
    """
    x1, x2 = promote_args("floor_divide", x1, x2, to="numeric")
    dt = x1.aval.dtype
    if dtypes.is_complex(dt):
        raise TypeError("floor_divide does not support complex-valued inputs")
    if dtypes.is_inexact(dt):
        x1, x2 = _util.broadcast_arrays("floor_divide", x1, x2, scalars_ok=False)
        return _float_floor_mod(x1, x2)[0]
    if dtypes.is_unsigned(dt):
        return lax.div(x1, x2)
    x1, x2 = _util.broadcast_arrays("floor_divide", x1, x2, scalars_ok=False)
    quotient = lax.div(x1, x2)
    fix = logical_and(lax.ne(lax.sign(x1), lax.sign(x2)),
                      lax.ne(lax.rem(x1, x2), _const(x1, 0)))
    return lax.select(fix, lax.sub(quotient, _const(quotient, 1)), quotient)


@composite
def remainder(x1, x2, /):
    """Like numpy.remainder: the result has the sign of ``x2``; integer ``x % 0`` is 0
    as in JAX.

    >>> jnp.remainder(jnp.array([-3, 3]), 2)
    Array([1, 1], dtype=int32)
    """
    x1, x2 = promote_args("remainder", x1, x2, to="numeric")
    if dtypes.is_complex(x1.aval.dtype):
        raise TypeError("remainder does not support complex-valued inputs")
    x1, x2 = _util.broadcast_arrays("remainder", x1, x2, scalars_ok=False)
    zero = _const(x1, 0)
    if not dtypes.is_inexact(x1.aval.dtype):
        x2 = lax.select(lax.eq(x2, zero), _full_like(x2, 1), x2)
    trunc = lax.rem(x1, x2)
    plus = logical_and(lax.ne(lax.lt(trunc, zero), lax.lt(x2, zero)), lax.ne(trunc, zero))
    return lax.select(plus, lax.add(trunc, x2), trunc)


mod = remainder


# ---- logical and bitwise ----

def _false():
    return _util.scalar_array(False, dtypes.bool_, False)


def _to_bool(x):
    return x if x.aval.dtype == dtypes.bool_ else _compare(lax.ne, x, _const(x, 0))


def _not(b):
    return lax.eq(b, _util.scalar_array(False, dtypes.bool_, b.aval.weak_type))


def _logical(out, *operands):
    # JAX's logical_* results are weak only for rank-0 all-weak operands (arrays give
    # strong bools even from weak inputs); match that.
    weak = not out.aval.shape and all(x.aval.weak_type for x in operands)
    return lax.convert_element_type(out, dtypes.bool_, weak)


@composite
def logical_not(x, /):
    """Like numpy.logical_not."""
    b = _to_bool(asarray(x, "logical_not"))
    return _logical(lax.eq(b, _false()), b)


def _bools(name, x1, x2):
    x1, x2 = promote_args(name, x1, x2)
    return _util.broadcast_arrays(name, _to_bool(x1), _to_bool(x2), scalars_ok=False)


@composite
def logical_and(x1, x2, /):
    """Like numpy.logical_and."""
    a, b = _bools("logical_and", x1, x2)
    return _logical(lax.bitwise_and(a, b), a, b)


@composite
def logical_or(x1, x2, /):
    """Like numpy.logical_or."""
    a, b = _bools("logical_or", x1, x2)
    return _logical(lax.bitwise_or(a, b), a, b)


@composite
def logical_xor(x1, x2, /):
    """Like numpy.logical_xor."""
    a, b = _bools("logical_xor", x1, x2)
    return _logical(lax.ne(a, b), a, b)


def _bitwise(name, bool_fn, int_fn):
    def op(x1, x2, /):
        x1, x2 = promote_args(name, x1, x2)
        dt = x1.aval.dtype
        if dt == dtypes.bool_:
            return bool_fn(x1, x2)
        if not dtypes.is_integer(dt):
            raise TypeError(f"jnp.{name} requires integer or bool arguments, got "
                            f"{dt.name}.")
        return int_fn(*_util.broadcast_arrays(name, x1, x2, scalars_ok=False))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Like numpy.{name}, for integer and bool operands."
    return op


bitwise_and = _bitwise("bitwise_and", logical_and, lax.bitwise_and)
bitwise_or = _bitwise("bitwise_or", logical_or, lax.bitwise_or)
bitwise_xor = _bitwise("bitwise_xor", logical_xor, lax.bitwise_xor)


@composite
def invert(x, /):
    """Like numpy.invert (``~x``) for bool and integer arrays.

    Computed as ``-x - 1`` (signed) or ``max - x`` (unsigned): exact in two's complement.
    """
    x = asarray(x, "invert")
    dt = x.aval.dtype
    if dt == dtypes.bool_:
        return _not(x)
    if dtypes.is_unsigned(dt):
        return lax.sub(_const(x, dtypes.iinfo(dt).max), x)
    if dtypes.is_integer(dt):
        return lax.sub(lax.neg(x), _const(x, 1))
    raise TypeError(f"invert requires a bool or integer array, got {dt.name}.")


bitwise_not = invert


@composite
def isnan(x, /):
    """Like numpy.isnan."""
    x = asarray(x, "isnan")
    if not dtypes.is_inexact(x.aval.dtype):   # (weak if x is: JAX's ne(x, x))
        return lax.convert_element_type(lax.full(x.aval.shape, False), dtypes.bool_,
                                        x.aval.weak_type)
    return _compare(lax.ne, x, x)


@composite
def isfinite(x, /):
    """Like numpy.isfinite (one ``is_finite`` per real part, as JAX's)."""
    x = asarray(x, "isfinite")
    if not dtypes.is_inexact(x.aval.dtype):
        return lax.full(x.aval.shape, True)
    if dtypes.is_complex(x.aval.dtype):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x)


@composite
def isinf(x, /):
    """Like numpy.isinf (a complex number is infinite if either part is)."""
    x = asarray(x, "isinf")
    if not dtypes.is_inexact(x.aval.dtype):
        return lax.full(x.aval.shape, False)
    if dtypes.is_complex(x.aval.dtype):
        return lax.bitwise_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    return lax.eq(lax.abs(x), _util.scalar_array(np.inf, x.aval.dtype, False))


# ---- selection ----

@composite(static=())
def where(condition, x, y, /):
    """numpy.where's three-argument form: ``x`` where ``condition`` holds, else ``y``
    (broadcast, promoted). ``jnp.where`` (_sorting.py, beside :func:`nonzero`) adds the
    one-argument form; the rest of numpy selects with this one."""
    _util.check_arraylike("where", condition, x, y)
    x, y = _util.promote_dtypes("where", x, y)
    cond = _to_bool(asarray(condition, "where"))
    out_shape = _util.broadcast_shapes(cond.aval.shape, x.aval.shape, y.aval.shape)
    if cond.aval.shape != out_shape and cond.aval.shape:
        cond = _util.broadcast_to(cond, out_shape)
    return lax.select_n(cond, _util.broadcast_to(y, out_shape),
                        _util.broadcast_to(x, out_shape))


@composite(static=())
def clip(arr=None, /, min=None, max=None):
    """Like numpy.clip: ``minimum(max, maximum(min, arr))``; either bound may be None.

    >>> jnp.clip(jnp.arange(5), 1, 3)
    Array([1, 1, 2, 3, 3], dtype=int32)
    """
    if arr is None:
        raise ValueError("No input was provided to the clip function.")
    _util.check_arraylike("clip", arr)
    if any(b is not None and dtypes.is_complex(dtypes.dtype(b)) for b in (arr, min, max)):
        raise ValueError(
            "Clip received a complex value either through the input or the min/max "
            "keywords. Complex values have no ordering and cannot be clipped. Please convert "
            "to a real value or array by taking the real or imaginary components via "
            "jax.numpy.real/imag respectively.")
    if min is not None:
        arr = maximum(min, arr)
    if max is not None:
        arr = minimum(max, arr)
    return asarray(arr, "clip")


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "operator", "np", "lax", "dtypes", "Array", "Tracer", "asarray", "convert",
    "promote_args")]
