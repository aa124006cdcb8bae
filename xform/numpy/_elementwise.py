"""Elementwise functions over the special, rounding and bitwise lax primitives:
trigonometric/hyperbolic and their inverses, expm1/log1p, rounding (floor, ceil, trunc,
rint, round, modf), fmod, gcd/lcm, shifts, bit counts, nextafter/spacing, angle."""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.lax.prng import bitcast_convert_type
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._util import asarray
from xform.numpy._math import copysign, imag, real
from xform.numpy._reductions import any as _any
from xform.transforms.custom_derivatives import custom_jvp

_INEXACT = dtypes.inexact_dtypes


def _unary(name, lax_fn, doc):
    def fn(x, /):
        aval = getattr(x, "aval", None)
        if aval is None or aval.dtype not in _INEXACT:
            x, = _util.promote_dtypes(name, x, to="inexact")
        return lax_fn(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Like numpy.{name}{doc} (integer and bool inputs are promoted to float)."
    return composite(fn)


tan = _unary("tan", lax.tan, "")
arcsin = _unary("arcsin", lax.asin, ": the inverse sine")
arccos = _unary("arccos", lax.acos, ": the inverse cosine")
arctan = _unary("arctan", lax.atan, ": the inverse tangent")
sinh = _unary("sinh", lax.sinh, ": the hyperbolic sine")
cosh = _unary("cosh", lax.cosh, ": the hyperbolic cosine")
arcsinh = _unary("arcsinh", lax.asinh, ": the inverse hyperbolic sine")
arccosh = _unary("arccosh", lax.acosh, ": the inverse hyperbolic cosine")
arctanh = _unary("arctanh", lax.atanh, ": the inverse hyperbolic tangent")
expm1 = _unary("expm1", lax.expm1, ": ``exp(x) - 1``, accurate near 0")
log1p = _unary("log1p", lax.log1p, ": ``log(1 + x)``, accurate near 0")
asin, acos, atan = arcsin, arccos, arctan
asinh, acosh, atanh = arcsinh, arccosh, arctanh


@composite
def arctan2(x1, x2, /):
    """Like numpy.arctan2: the angle of the point ``(x2, x1)``.

    >>> jnp.arctan2(1.0, -1.0)
    Array(2.3561945, dtype=float32, weak_type=True)
    """
    return lax.atan2(*_util.promote_args("arctan2", x1, x2, to="inexact"))


atan2 = arctan2


# ---- rounding ----

def _exact_or(name, x, fn):
    """``fn(x)`` for floats; integer and bool inputs are returned unchanged (as JAX)."""
    x = asarray(x, name)
    if not dtypes.is_inexact(x.aval.dtype):
        return x
    if dtypes.is_complex(x.aval.dtype):
        raise TypeError(f"jnp.{name} does not support complex-valued inputs.")
    return fn(x)


@composite
def floor(x, /):
    """Like numpy.floor (integers are returned unchanged)."""
    return _exact_or("floor", x, lax.floor)


@composite
def ceil(x, /):
    """Like numpy.ceil (integers are returned unchanged)."""
    return _exact_or("ceil", x, lax.ceil)


@composite
def trunc(x, /):
    """Like numpy.trunc: round toward zero."""
    return _exact_or("trunc", x, lambda v: uf.where(
        lax.lt(v, _util.scalar_array(0, v.aval.dtype, False)), lax.ceil(v), lax.floor(v)))



@composite
def rint(x, /):
    """Like numpy.rint: round to the nearest integer, ties to even (ints become float)."""
    x = asarray(x, "rint")
    if not dtypes.is_inexact(x.aval.dtype):   # (JAX's: a strong default float, unrounded)
        return lax.convert_element_type(x, dtypes.default_float_dtype(), False)
    if dtypes.is_complex(x.aval.dtype):
        return lax.complex(rint(real(x)), rint(imag(x)))
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


@composite(static=("decimals",))
def round(a, decimals=0, out=None):
    """Like numpy.round: ties to even, at ``decimals`` decimal places (scaled by
    ``10**decimals``, so results can be off by one ulp, as in JAX).

    >>> jnp.round(jnp.array([0.5, 1.5, 2.25]), 1)
    Array([0.5, 1.5, 2.2], dtype=float32)
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.round is not supported.")
    a = asarray(a, "round")
    dt = a.aval.dtype
    decimals = operator.index(decimals)
    if dt == dtypes.bool_:  # (JAX's finfo(bool) error)
        raise ValueError(f"data type {np.dtype(dt).type} not inexact")
    if not dtypes.is_inexact(dt):
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return a
    if decimals > np.log10(dtypes.finfo(dt).max):
        return a  # beyond the dtype's precision: a no-op (10**decimals would overflow)
    if dtypes.is_complex(dt):
        return lax.complex(round(real(a), decimals), round(imag(a), decimals))
    even = lax.RoundingMethod.TO_NEAREST_EVEN
    if decimals == 0:
        return lax.round(a, even)
    x = lax.convert_element_type(a, dtypes.float32) if dt == dtypes.float16 else a
    factor = _util.lax_const(x, 10.0 ** decimals)   # (JAX's: strong unless a weak scalar)
    out = lax.div(lax.round(lax.mul(x, factor), even), factor)
    return lax.convert_element_type(out, dt, False) if dt == dtypes.float16 else out


around = round


@composite
def modf(x, /, out=None):
    """Like numpy.modf: ``(fractional part, integral part)``, both with ``x``'s sign."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
    x, = _util.promote_dtypes("modf", x, to="inexact")
    whole = trunc(x)
    return lax.sub(x, whole), whole


@composite
def fmod(x1, x2, /):
    """Like numpy.fmod: the remainder of truncated division (sign of ``x1``)."""
    was_bool = _util.promote_args("fmod", x1, x2)[0].aval.dtype == dtypes.bool_
    x1, x2 = _util.promote_args("fmod", x1, x2, to="numeric")
    if dtypes.is_integer(x1.aval.dtype) and not was_bool:  # (JAX: bools divide by 0)
        x1, x2 = _util.broadcast_arrays("fmod", x1, x2, scalars_ok=False)
        x2 = uf.where(lax.eq(x2, _util.scalar_array(0, x2.aval.dtype, False)),
                      _util.filled_like(x2, 1), x2)
    return lax.rem(x1, x2)


# ---- integer functions ----

def _ints(name, x1, x2):
    x1, x2 = _util.promote_args(name, x1, x2, to="numeric")
    if not dtypes.is_integer(x1.aval.dtype):
        raise ValueError(f"Arguments to jax.numpy.{name} must be integers.")
    return _util.broadcast_arrays(name, x1, x2, scalars_ok=False)


@composite
def gcd(x1, x2, /):
    """Like numpy.gcd: Euclid's algorithm in a ``while_loop`` (until every lane is done).

    >>> jnp.gcd(12, jnp.array([8, 9, 0]))
    Array([ 4,  3, 12], dtype=int32)
    """
    x1, x2 = _ints("gcd", x1, x2)
    x1, x2 = uf.absolute(x1), uf.absolute(x2)
    zero = _util.scalar_array(0, x1.aval.dtype, False)

    def body(carry):
        a, b = carry
        nz = lax.ne(b, zero)
        return uf.where(nz, b, a), uf.where(nz, lax.rem(a, uf.where(nz, b, a)), zero)

    def cond(carry):
        return _any(lax.ne(carry[1], zero))

    return lax.while_loop(cond, body, (x1, x2))[0]


@composite
def lcm(x1, x2, /):
    """Like numpy.lcm: ``|x1 * (x2 // gcd)|``, 0 if both are 0."""
    x1, x2 = _ints("lcm", x1, x2)
    d = gcd(x1, x2)
    zero = _util.lax_const(d, 0)   # (JAX's: weak for weak scalars)
    safe = uf.where(lax.eq(d, zero), _util.filled_like(d, 1), d)
    return uf.where(lax.eq(d, zero), zero, uf.absolute(lax.mul(x1, lax.div(x2, safe))))


@composite
def left_shift(x1, x2, /):
    """Like numpy.left_shift."""
    x1, x2 = _util.promote_args("left_shift", x1, x2, to="numeric")
    return lax.shift_left(*_util.broadcast_arrays("left_shift", x1, x2, scalars_ok=False))


@composite
def right_shift(x1, x2, /):
    """Like numpy.right_shift (arithmetic for signed, logical for unsigned integers)."""
    x1, x2 = _util.promote_args("right_shift", x1, x2, to="numeric")
    x1, x2 = _util.broadcast_arrays("right_shift", x1, x2, scalars_ok=False)
    if dtypes.is_unsigned(x1.aval.dtype):
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


@composite
def bitwise_count(x, /):
    """Like numpy.bitwise_count: the number of 1 bits in ``|x|`` (as uint8)."""
    x, = _util.promote_dtypes("bitwise_count", x, to="numeric")  # bool -> int
    if not dtypes.is_integer(x.aval.dtype):
        raise TypeError(f"bitwise_count requires an integer array, got "
                        f"{x.aval.dtype.name}")
    return lax.convert_element_type(lax.population_count(uf.absolute(x)), dtypes.uint8)


# ---- exponents ----

def _exp2_int(x, n):
    """``x * 2**n`` for an int32 array ``n``, exactly: one multiplication by an exact
    power of two per set bit of ``|n|`` (split into factors that stay finite)."""
    dt = x.aval.dtype
    info = dtypes.finfo(dt)
    cap = min(64, int(info.maxexp) - 1)
    limit = 2 * (int(info.maxexp) - int(info.minexp) + int(info.nmant) + 2)
    n = uf.clip(n, -limit, limit)
    mag = lax.abs(n)
    neg = lax.lt(n, _util.scalar_array(0, n.aval.dtype, False))
    one = _util.scalar_array(1, dt, False)
    for b in range(limit.bit_length()):
        bit = lax.ne(lax.bitwise_and(mag, _util.scalar_array(1 << b, n.aval.dtype, False)),
                     _util.scalar_array(0, n.aval.dtype, False))
        left = 1 << b
        while left:
            step = min(left, cap)
            up = _util.scalar_array(2.0 ** step, dt, False)
            down = _util.scalar_array(2.0 ** -step, dt, False)
            factor = lax.select(bit, lax.select(neg, lax.full_like(x, down), lax.full_like(
                x, up)), lax.full_like(x, one))
            x = lax.mul(x, factor)
            left -= step
    return x


@composite
def ldexp(x1, x2, /):
    """Like numpy.ldexp: ``x1 * 2**x2`` for an integer ``x2``.

    NB: computed by multiplications with exact powers of two (xform.lax has no
    bitcast), so results that end up subnormal may be rounded twice.

    >>> jnp.ldexp(jnp.array([1.0, -3.0]), jnp.array([3, -2]))
    Array([ 8.  , -0.75], dtype=float32)
    """
    x1, x2 = asarray(x1, "ldexp"), asarray(x2, "ldexp", 1)
    if dtypes.is_complex(x1.aval.dtype) or dtypes.is_inexact(x2.aval.dtype):
        raise ValueError(f"ldexp not supported for input types "
                         f"{(x1.aval.dtype, x2.aval.dtype)}")
    x1, = _util.promote_dtypes("ldexp", x1, to="inexact")
    x1, x2 = _util.broadcast_arrays("ldexp", x1, x2, scalars_ok=False)
    dt2 = x2.aval.dtype
    if dt2 != dtypes.bool_ and np.iinfo(dt2).max > np.iinfo(np.int32).max:
        x2 = uf.clip(x2, max(np.iinfo(dt2).min, -2**31), 2**31 - 1)  # saturate, not wrap
    out = _exp2_int(x1, lax.convert_element_type(x2, dtypes.int32))
    return lax.convert_element_type(out, out.aval.dtype)   # never weak, as JAX's


@composite
def frexp(x, /):
    """Like numpy.frexp: ``(mantissa, exponent)`` with ``x = m * 2**e``, ``0.5 <= |m| < 1``
    (``(x, 0)`` for 0, inf and NaN).

    Computed on the bits as JAX's (subnormals are first scaled by ``2**nmant``), so
    results agree with JAX's wherever the backend flushes subnormals too.
    """
    x, = _util.promote_dtypes("frexp", x, to="inexact")
    if dtypes.is_complex(x.aval.dtype):
        raise TypeError("frexp does not support complex-valued inputs")
    return _frexp(x)


@custom_jvp
def _frexp(x):
    dt = x.aval.dtype
    info = dtypes.finfo(dt)
    it = np.dtype(f"int{info.bits}")
    mask, bias, nmant = (1 << info.nexp) - 1, 1 - int(info.minexp), int(info.nmant)

    def c(v, d=it):
        return _util.scalar_array(v, d, False)
    tiny = lax.lt(lax.abs(x), c(info.tiny, dt))
    x1 = uf.where(tiny, lax.mul(x, c(float(1 << nmant), dt)), x)
    e = uf.where(tiny, c(-nmant), c(0))
    bits = bitcast_convert_type(x1, it)
    field = lax.bitwise_and(lax.shift_right_arithmetic(bits, c(nmant)), c(mask))
    e = lax.add(e, lax.add(field, c(1 - bias)))
    bits = lax.bitwise_or(lax.bitwise_and(bits, c(~(mask << nmant))), c((bias - 1) << nmant))
    special = uf.logical_or(uf.logical_not(uf.isfinite(x)), lax.eq(x, c(0, dt)))
    m = uf.where(special, x, bitcast_convert_type(bits, dt))
    return m, lax.convert_element_type(uf.where(special, c(0), e), dtypes.int32)


@_frexp.defjvp
def _frexp_jvp(primals, tangents):
    # The bit manipulation has no derivative; d m = dx * 2**-e (e piecewise constant), as JAX's.
    (x,), (t,) = primals, tangents
    m, e = _frexp(x)
    dm = lax.mul(t, lax.exp2(lax.neg(lax.convert_element_type(e, t.aval.dtype))))
    return (m, e), (dm, np.zeros(e.aval.shape, dtypes.float0))


# ---- floating-point neighbours ----

@composite
def nextafter(x1, x2, /):
    """Like numpy.nextafter: the next representable value after ``x1`` toward ``x2``."""
    return lax.nextafter(*_util.promote_args("nextafter", x1, x2, to="inexact"))


@composite
def spacing(x, /):
    """Like numpy.spacing: the distance to the next representable value away from 0."""
    x, = _util.promote_dtypes("spacing", x, to="inexact")
    if dtypes.is_complex(x.aval.dtype):
        raise ValueError("jnp.spacing is not defined for complex inputs.")
    inf = lax.convert_element_type(_util.filled_like(x, np.inf), x.aval.dtype,
                                   x.aval.weak_type)
    if x.aval.dtype == dtypes.float16:  # NB: NumPy's (and JAX's) float16 rule: toward +inf
        return lax.sub(lax.nextafter(x, inf), x)
    out = lax.sub(lax.nextafter(x, copysign(inf, x)), x)
    tiny = _util.scalar_array(dtypes.finfo(x.aval.dtype).smallest_subnormal, x.aval.dtype,
                              False)
    return uf.where(lax.eq(out, lax.full_like(out, 0)), copysign(tiny, x), out)


@composite(static=("deg",))
def angle(z, deg=False):
    """Like numpy.angle: ``arctan2(imag(z), real(z))`` (in degrees if ``deg``)."""
    z = asarray(z, "angle")
    re, im = real(z), imag(z)
    if not dtypes.is_inexact(re.aval.dtype) or (dtypes.is_floating(z.aval.dtype)
                                                and z.aval.ndim == 0):
        # (as JAX: a real scalar's result is a strong float, of the default float dtype
        # as an integer array's: float32 for a float16 scalar, float64 under x64)
        dt = dtypes.default_float_dtype()
        re, im = lax.convert_element_type(re, dt), lax.convert_element_type(im, dt)
    out = lax.atan2(im, re)
    if deg:
        out = lax.mul(out, _util.lax_const(out, 180 / np.pi))  # (JAX's degrees)
    return out
