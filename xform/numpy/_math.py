"""More elementwise math composed from the basic ufuncs: logaddexp, hypot, angle
conversions, fmax/fmin, heaviside, copysign, sinc, isclose/allclose, array_equal,
nan_to_num, real/imag/conj and dtype predicates."""
import numpy as np

from xform import lax
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._reductions import all as _all
from xform.numpy._util import asarray
from xform.transforms.custom_derivatives import custom_jvp


def _inexact(name, *args):
    return _util.promote_args(name, *args, to="inexact")


def _inexact1(name, x):
    x, = _util.promote_dtypes(name, x, to="inexact")
    return x


def _like(x, value):
    """A weak constant (a Python scalar in JAX's formula); ``_util.lax_const`` where
    JAX's has a ``_lax_const`` (strong unless ``x`` is a weak scalar)."""
    return _util.scalar_array(value, x.aval.dtype, True)


@composite
def logaddexp(x1, x2, /):
    """Like numpy.logaddexp: ``log(exp(x1) + exp(x2))`` without overflow.

    Its derivative is a custom JVP (as in JAX): ``t1 e^(x1 - out) + t2 e^(x2 - out)``,
    smooth at ``x1 == x2`` where the formula's ``|x1 - x2|`` has a kink.

    >>> jnp.logaddexp(0.0, 0.0)
    Array(0.6931472, dtype=float32, weak_type=True)
    """
    return _logaddexp(*_inexact("logaddexp", x1, x2))


@composite
def logaddexp2(x1, x2, /):
    """Like numpy.logaddexp2: ``log2(2**x1 + 2**x2)`` without overflow (JAX's formula,
    in base 2 throughout; a custom JVP as :func:`logaddexp`'s)."""
    return _logaddexp2(*_inexact("logaddexp2", x1, x2))


def _logaddexp_base(x1, x2, exp, scale, period):
    """JAX's logaddexp formulas: ``max + scale * log1p(exp(-|x1 - x2|))`` for reals
    (NaN where ``x1 - x2`` is: the sum then); complex inputs take ``exp`` of
    ``x1 + x2 - 2 max`` and wrap the imaginary part into ``[-period, period]``. The
    constants are JAX's ``lax._const`` (strong unless weak scalars: the weak type)."""
    amax = lax.max(x1, x2)

    def soft(d):
        out = lax.log1p(exp(d))
        return out if scale is None else lax.mul(_util.lax_const(out, scale), out)
    if not dtypes.is_complex(x1.aval.dtype):
        delta = lax.sub(x1, x2)
        return uf.where(uf.isnan(delta), lax.add(x1, x2),
                        lax.add(amax, soft(lax.neg(lax.abs(delta)))))
    two = _util.lax_const(amax, 2)
    out = lax.add(amax, soft(lax.sub(lax.add(x1, x2), lax.mul(amax, two))))
    im = lax.imag(out)
    a, two_a = _util.lax_const(im, period), _util.lax_const(im, 2 * period)
    rem = lax.rem(lax.add(im, a), two_a)
    rem = uf.where(lax.lt(rem, _like(rem, 0)), lax.add(rem, two_a), rem)
    return lax.complex(lax.real(out), lax.sub(rem, a))


@custom_jvp
def _logaddexp(x1, x2):
    return _logaddexp_base(x1, x2, lax.exp, None, np.pi)


@custom_jvp
def _logaddexp2(x1, x2):
    return _logaddexp_base(x1, x2, lax.exp2, 1 / np.log(2), np.pi / np.log(2))


def _logaddexp_jvp_rule(fn, exp):
    def jvp(primals, tangents):
        x1, x2 = primals
        t1, t2 = tangents
        out = fn(x1, x2)
        base = _no_posinf(out)   # inf - inf would give NaN weights at x = +inf
        w1 = exp(lax.sub(_no_posinf(x1), base))
        w2 = exp(lax.sub(_no_posinf(x2), base))
        return out, lax.add(lax.mul(t1, w1), lax.mul(t2, w2))
    return jvp


def _no_posinf(x):
    re = lax.real(x) if dtypes.is_complex(x.aval.dtype) else x
    return uf.where(lax.eq(re, _util.scalar_array(np.inf, re.aval.dtype, False)),
                    _like(x, 0), x)


_logaddexp.defjvp(_logaddexp_jvp_rule(_logaddexp, lax.exp))
_logaddexp2.defjvp(_logaddexp_jvp_rule(_logaddexp2, lax.exp2))


@composite
def hypot(x1, x2, /):
    """Like numpy.hypot: ``sqrt(x1**2 + x2**2)``, scaled to avoid overflow.

    >>> jnp.hypot(3.0, 4.0)
    Array(5., dtype=float32, weak_type=True)
    """
    x1, x2 = _inexact("hypot", x1, x2)
    if dtypes.is_complex(x1.aval.dtype):
        raise ValueError("jnp.hypot is not well defined for complex-valued inputs. "
                         "Please convert to real values first, such as by using abs(x)")
    x1, x2 = _util.broadcast_arrays("hypot", lax.abs(x1), lax.abs(x2), scalars_ok=False)
    big, small = lax.max(x1, x2), lax.min(x1, x2)
    zero = lax.eq(big, _like(big, 0))
    ratio = lax.div(small, uf.where(zero, _like(big, 1), big))
    out = uf.where(zero, big, lax.mul(big, lax.sqrt(lax.add(_like(big, 1),
                                                             lax.integer_pow(ratio, 2)))))
    inf = _util.lax_const(big, np.inf)   # (strong unless a weak scalar, as JAX's)
    return uf.where(uf.logical_or(uf.isinf(x1), uf.isinf(x2)), inf, out)


@composite
def deg2rad(x, /):
    """Like numpy.deg2rad."""
    x = _inexact1("deg2rad", x)
    return lax.mul(x, _util.lax_const(x, np.pi / 180))


@composite
def rad2deg(x, /):
    """Like numpy.rad2deg."""
    x = _inexact1("rad2deg", x)
    return lax.mul(x, _util.lax_const(x, 180 / np.pi))


radians, degrees = deg2rad, rad2deg


@composite
def fabs(x, /):
    """Like numpy.fabs (integers are promoted to float)."""
    x = _inexact1("fabs", x)
    if dtypes.is_complex(x.aval.dtype):
        raise TypeError("ufunc 'fabs' does not support complex dtypes")
    return lax.abs(x)


@composite
def fmax(x1, x2):
    """Like numpy.fmax: the maximum, ignoring a NaN operand."""
    return uf.where(uf.logical_or(uf.greater(x1, x2), uf.isnan(x2)), x1, x2)


@composite
def fmin(x1, x2):
    """Like numpy.fmin: the minimum, ignoring a NaN operand."""
    return uf.where(uf.logical_or(uf.less(x1, x2), uf.isnan(x2)), x1, x2)


@composite
def heaviside(x1, x2, /):
    """Like numpy.heaviside: 0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where
    ``x1 == 0`` (NaN stays NaN)."""
    x1, x2 = _inexact("heaviside", x1, x2)
    zero, one = _util.lax_const(x1, 0), _util.lax_const(x1, 1)  # (JAX's: strong unless
    at_zero = uf.where(lax.eq(x1, zero), x2, x1)                 # x1 is a weak scalar)
    return uf.where(lax.lt(x1, zero), zero, uf.where(lax.gt(x1, zero), one, at_zero))


@composite
def signbit(x, /):
    """Like numpy.signbit: the sign bit, read through a bitcast (so -0.0 and a negative
    NaN read True, as in JAX)."""
    x = asarray(x, "signbit")
    dt = x.aval.dtype
    if dt == dtypes.bool_ or dtypes.is_unsigned(dt):
        return lax.full(x.aval.shape, False)
    if dtypes.is_integer(dt):
        return lax.lt(x, _util.scalar_array(0, dt, False))
    if not dtypes.is_floating(dt):
        raise ValueError(f"jax.numpy.signbit is not well defined for {np.dtype(dt).name}")
    bits = lax.bitcast_convert_type(x, np.dtype(f"int{dtypes.finfo(dt).bits}"))
    return lax.lt(bits, _util.scalar_array(0, bits.aval.dtype, False))


@composite
def copysign(x1, x2, /):
    """Like numpy.copysign (see :func:`signbit` for NaN signs)."""
    x1, x2 = _inexact("copysign", x1, x2)
    if x1.aval.weak_type and not x2.aval.weak_type:  # (weak only if both are, as JAX's)
        x1 = lax.convert_element_type(x1, x1.aval.dtype, False)
    mag = lax.abs(x1)
    return uf.where(signbit(x2), lax.neg(mag), mag)


@composite
def sinc(x, /):
    """Like numpy.sinc: ``sin(pi x) / (pi x)``, 1 at 0.

    At 0 the value comes from a function whose custom JVP gives the Maclaurin
    coefficients of ``sin(x)/x`` (as JAX does), so derivatives of every order are
    right there too.
    """
    x = _inexact1("sinc", x)
    is_zero = lax.eq(x, _like(x, 0))
    pi_x = lax.mul(_util.lax_const(x, np.pi), x)
    safe = uf.where(is_zero, _util.lax_const(x, 1), pi_x)
    return uf.where(is_zero, _sinc_maclaurin(0, pi_x), lax.div(lax.sin(safe), safe))


def _sinc_maclaurin_impl(k, x):
    # The k-th derivative of sin(x)/x at 0: 0 for odd k, (-1)^(k/2) / (k + 1) for even.
    zero = lax.mul(x, _like(x, 0))
    if k % 2:
        return zero
    return lax.add(zero, _util.lax_const(x, (-1) ** (k // 2) / (k + 1)))


_sinc_maclaurin = custom_jvp(_sinc_maclaurin_impl, nondiff_argnums=(0,))


@_sinc_maclaurin.defjvp
def _sinc_maclaurin_jvp(k, primals, tangents):
    (x,), (t,) = primals, tangents
    return _sinc_maclaurin(k, x), lax.mul(_sinc_maclaurin(k + 1, x), t)


@composite
def float_power(x1, x2, /):
    """Like numpy.float_power: :func:`power` after promotion to an inexact dtype."""
    return uf.power(*_inexact("float_power", x1, x2))


@composite
def cbrt(x, /):
    """Like numpy.cbrt: the real cube root."""
    return lax.cbrt(_inexact1("cbrt", x))


def _no_complex_inf(x):
    if dtypes.is_complex(x.aval.dtype):
        raise ValueError("isposinf/isneginf are not well defined for complex types")
    return x


def isposinf(x, /):
    """Like numpy.isposinf."""
    x = _no_complex_inf(asarray(x, "isposinf"))
    if not dtypes.is_floating(x.aval.dtype):
        return lax.full(x.aval.shape, False)
    return lax.eq(x, _util.scalar_array(np.inf, x.aval.dtype, False))


def isneginf(x, /):
    """Like numpy.isneginf."""
    x = _no_complex_inf(asarray(x, "isneginf"))
    if not dtypes.is_floating(x.aval.dtype):
        return lax.full(x.aval.shape, False)
    return lax.eq(x, _util.scalar_array(-np.inf, x.aval.dtype, False))


def iscomplexobj(x):
    """Like numpy.iscomplexobj: whether ``x``'s dtype is complex (a Python bool)."""
    return x is not None and dtypes.is_complex(dtypes.dtype(x))


def isrealobj(x):
    """Like numpy.isrealobj."""
    return not iscomplexobj(x)


@composite
def real(val, /):
    """Like numpy.real (complex inputs need xform.lax complex support)."""
    val = asarray(val, "real")
    if dtypes.is_complex(val.aval.dtype):
        return lax.real(val)
    return val


@composite
def imag(val, /):
    """Like numpy.imag (zeros for real inputs)."""
    val = asarray(val, "imag")
    if dtypes.is_complex(val.aval.dtype):
        return lax.imag(val)
    return lax.full_like(val, 0)


@composite
def conjugate(x, /):
    """Like numpy.conjugate (real inputs are returned unchanged)."""
    x = asarray(x, "conjugate")
    return lax.conj(x) if dtypes.is_complex(x.aval.dtype) else x


conj = conjugate


@composite
def isreal(x, /):
    """Like numpy.isreal: the imaginary part is zero."""
    x = asarray(x, "isreal")
    if not dtypes.is_complex(x.aval.dtype):
        return _const_bool(x, True)
    i = imag(x)
    return lax.eq(i, _util.lax_const(i, 0))  # (JAX's: strong unless a weak scalar)


@composite
def iscomplex(x, /):
    """Like numpy.iscomplex: the imaginary part is non-zero."""
    x = asarray(x, "iscomplex")
    if not dtypes.is_complex(x.aval.dtype):
        return _const_bool(x, False)
    i = imag(x)
    return lax.ne(i, _util.lax_const(i, 0))


def _const_bool(x, value):
    """JAX's ``imag(x) == 0`` for a real ``x``: weak only for a weak scalar."""
    out = lax.full(x.aval.shape, value)
    return lax.convert_element_type(out, dtypes.bool_, x.aval.weak_type and not x.aval.shape)


@composite(static=("equal_nan",))
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Like numpy.isclose, by JAX's formula: ``a == b``, or ``b`` finite and
    ``|a - b| <= atol + rtol * |b|``; NaNs close only if ``equal_nan``. Integers are
    compared in floating point with the tolerances, as JAX.

    >>> jnp.isclose(jnp.array([1.0, 1.1]), 1.0)
    Array([ True, False], dtype=bool)
    """
    a, b = _util.promote_args("isclose", a, b)
    if dtypes.is_extended(a.aval.dtype):
        return lax.eq(a, b)
    a, b = _util.promote_args("isclose", a, b, to="inexact")
    a, b = _util.broadcast_arrays("isclose", a, b, scalars_ok=False)
    real_dt = np.dtype(dtypes.finfo(a.aval.dtype).dtype)
    rtol = lax.convert_element_type(rtol, real_dt)
    atol = lax.convert_element_type(atol, real_dt)
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    out = uf.logical_or(lax.eq(a, b), uf.logical_and(uf.isfinite(b), in_range))
    if equal_nan:
        out = uf.logical_or(out, uf.logical_and(uf.isnan(a), uf.isnan(b)))
    return out


@composite(static=("equal_nan",))
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Like numpy.allclose: ``all(isclose(...))``."""
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """Like numpy.array_equal: same shape and equal elements (a bool Array)."""
    _util.check_arraylike("array_equal", a1, a2)
    a1, a2 = asarray(a1, "array_equal"), asarray(a2, "array_equal", 1)
    if a1.aval.shape != a2.aval.shape:
        return _util.scalar_array(False, dtypes.bool_, False)
    eq = uf.equal(a1, a2)
    if equal_nan:
        eq = uf.logical_or(eq, uf.logical_and(uf.isnan(a1), uf.isnan(a2)))
    return _all(eq)


def array_equiv(a1, a2):
    """Like numpy.array_equiv: broadcastable and equal elements."""
    _util.check_arraylike("array_equiv", a1, a2)
    a1, a2 = asarray(a1, "array_equiv"), asarray(a2, "array_equiv", 1)
    try:
        _util.broadcast_shapes(a1.aval.shape, a2.aval.shape)
    except ValueError:
        return _util.scalar_array(False, dtypes.bool_, False)
    return _all(uf.equal(a1, a2))


@composite
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Like numpy.nan_to_num: NaN to ``nan``, infinities to the largest finite values
    (or ``posinf``/``neginf``).

    >>> jnp.nan_to_num(jnp.array([jnp.nan, jnp.inf, 1.0]))
    Array([0.0000000e+00, 3.4028235e+38, 1.0000000e+00], dtype=float32)
    """
    del copy
    x = asarray(x, "nan_to_num")
    dt = x.aval.dtype
    if not dtypes.is_inexact(dt):
        return x
    if dtypes.is_complex(dt):
        return lax.complex(nan_to_num(real(x), nan=nan, posinf=posinf, neginf=neginf),
                           nan_to_num(imag(x), nan=nan, posinf=posinf, neginf=neginf))
    info = dtypes.finfo(dt)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = uf.where(uf.isnan(x), _util.convert(nan, dt), x)
    out = uf.where(isposinf(out), _util.convert(posinf, dt), out)
    return uf.where(isneginf(out), _util.convert(neginf, dt), out)


@composite
def divmod(x1, x2, /):
    """Like numpy.divmod: ``(floor_divide(x1, x2), remainder(x1, x2))``."""
    a, b = _util.promote_args("divmod", x1, x2, to="numeric")
    if dtypes.is_inexact(a.aval.dtype):
        return uf._float_floor_mod(*_util.broadcast_arrays("divmod", a, b, scalars_ok=False))
    return uf.floor_divide(a, b), uf.remainder(a, b)


bitwise_invert = uf.invert
