"""Transcendental and special functions: tan, inverse trigonometric and hyperbolic
functions, exp2/expm1/log1p, cbrt, square, reciprocal, and the error and gamma
families.

Several lower to CHLO ops (``chlo.asin``, ``chlo.erf``, ``chlo.lgamma``, ...), which
XLA legalizes to StableHLO polynomial/rational approximations during compilation,
exactly as JAX lowers them, so values match JAX bit for bit on CPU.
"""
import numpy as np

from xform.core import dtypes
from xform.interpreters import ad, mlir
from xform.lax import accuracy as _accuracy
from xform.lax._prim import float_dtypes, inexact, naryop, numeric, unop
from xform.lax.elementwise import (_bcast, _const, _out_shape,
                                   add, div, exp, integer_pow, mul, neg, rsqrt, sub)

hlo, chlo = mlir.hlo, mlir.chlo


def _one_minus_square(x):
    return sub(_const(x, 1), square(x))


# ---- trigonometric ----

def tan(x, *, accuracy=None):
    r"""Elementwise tangent.

    Args:
      x: a floating or complex array.

    Returns:
      :math:`\tan(x)`, with ``x``'s shape and dtype.

    >>> import xform.lax as lax
    >>> print(lax.tan(0.0))
    0.0
    """
    return _accuracy.bind(tan_p, x, accuracy)


tan_p = unop("tan", inexact)
ad.defjvp2(tan_p, lambda t, ans, x, accuracy=None: mul(t, add(_const(x, 1), square(ans))))
mlir.register_lowering(tan_p, _accuracy.lowering(hlo.tan))


def asin(x):
    r"""Elementwise arc sine, :math:`\sin^{-1}(x)` (NaN outside [-1, 1] for reals).

    >>> import xform.lax as lax
    >>> print(lax.asin(0.0))
    0.0
    """
    return asin_p.bind(x)


asin_p = unop("asin", inexact)
ad.defjvp(asin_p, lambda t, x: mul(t, rsqrt(_one_minus_square(x))))  # 1/sqrt(1-x^2)
mlir.register_lowering(asin_p, mlir.elementwise(chlo.asin))


def acos(x):
    r"""Elementwise arc cosine, :math:`\cos^{-1}(x)` (NaN outside [-1, 1] for reals).

    >>> import xform.lax as lax
    >>> print(lax.acos(1.0))
    0.0
    """
    return acos_p.bind(x)


acos_p = unop("acos", inexact)
ad.defjvp(acos_p, lambda t, x: mul(t, neg(rsqrt(_one_minus_square(x)))))
mlir.register_lowering(acos_p, mlir.elementwise(chlo.acos))


def atan(x):
    r"""Elementwise arc tangent, :math:`\tan^{-1}(x)`.

    >>> import xform.lax as lax
    >>> print(lax.atan(0.0))
    0.0
    """
    return atan_p.bind(x)


atan_p = unop("atan", inexact)
ad.defjvp(atan_p, lambda t, x: div(t, add(_const(x, 1), square(x))))
mlir.register_lowering(atan_p, mlir.elementwise(chlo.atan))


def atan2(x, y):
    r"""Elementwise two-argument arc tangent :math:`\mathrm{atan}(x / y)`, using the
    signs of both to pick the quadrant (``x`` is the ordinate, as in ``np.arctan2``).

    Args:
      x, y: floating arrays of the same dtype (a rank-0 operand broadcasts).

    Returns:
      The angle in :math:`[-\pi, \pi]`.

    >>> import xform.lax as lax
    >>> print(lax.atan2(0.0, -1.0))
    3.1415927
    """
    return atan2_p.bind(x, y)


def _atan2_denominator(x, y):
    return add(square(x), square(y))


atan2_p = naryop("atan2", inexact)
ad.defjvp(atan2_p,   # d atan2(x, y) = (y dx - x dy) / (x^2 + y^2)
          lambda t, x, y: mul(t, div(y, _atan2_denominator(x, y))),
          lambda t, x, y: mul(t, div(neg(x), _atan2_denominator(x, y))))
mlir.register_lowering(atan2_p, mlir.elementwise(hlo.atan2))


# ---- hyperbolic ----

def sinh(x):
    r"""Elementwise hyperbolic sine.

    >>> import xform.lax as lax
    >>> print(lax.sinh(0.0))
    0.0
    """
    return sinh_p.bind(x)


sinh_p = unop("sinh", inexact)
ad.defjvp(sinh_p, lambda t, x: mul(t, cosh(x)))
mlir.register_lowering(sinh_p, mlir.elementwise(chlo.sinh))


def cosh(x):
    r"""Elementwise hyperbolic cosine.

    >>> import xform.lax as lax
    >>> print(lax.cosh(0.0))
    1.0
    """
    return cosh_p.bind(x)


cosh_p = unop("cosh", inexact)
ad.defjvp(cosh_p, lambda t, x: mul(t, sinh(x)))
mlir.register_lowering(cosh_p, mlir.elementwise(chlo.cosh))


def asinh(x):
    r"""Elementwise inverse hyperbolic sine.

    >>> import xform.lax as lax
    >>> print(lax.asinh(0.0))
    0.0
    """
    return asinh_p.bind(x)


asinh_p = unop("asinh", inexact)
ad.defjvp(asinh_p, lambda t, x: mul(t, rsqrt(add(square(x), _const(x, 1)))))
mlir.register_lowering(asinh_p, mlir.elementwise(chlo.asinh))


def acosh(x):
    r"""Elementwise inverse hyperbolic cosine (NaN below 1 for reals).

    >>> import xform.lax as lax
    >>> print(lax.acosh(1.0))
    0.0
    """
    return acosh_p.bind(x)


acosh_p = unop("acosh", inexact)
ad.defjvp(acosh_p, lambda t, x: mul(t, rsqrt(sub(square(x), _const(x, 1)))))
mlir.register_lowering(acosh_p, mlir.elementwise(chlo.acosh))


def atanh(x):
    r"""Elementwise inverse hyperbolic tangent (NaN outside [-1, 1] for reals).

    >>> import xform.lax as lax
    >>> print(lax.atanh(0.0))
    0.0
    """
    return atanh_p.bind(x)


atanh_p = unop("atanh", inexact)
ad.defjvp(atanh_p,   # 1 / ((1 + x)(1 - x)): more accurate than 1 / (1 - x^2) near +-1
          lambda t, x: div(div(t, add(_const(x, 1), x)), sub(_const(x, 1), x)))
mlir.register_lowering(atanh_p, mlir.elementwise(chlo.atanh))


# ---- exponentials and roots ----

def exp2(x, *, accuracy=None):
    r"""Elementwise base-2 exponential :math:`2^x`.

    >>> import xform.lax as lax
    >>> print(lax.exp2(3.0))
    8.0
    """
    return _accuracy.bind(exp2_p, x, accuracy)


def _exp2_lowering(ctx, x, accuracy=None):
    # 2^x = e^(x log 2), the lowering JAX uses (StableHLO has no exp2 op).
    log2 = mlir.full_like_aval(np.log(2), ctx.avals_in[0])
    return _accuracy.lowering(hlo.exponential)(ctx, hlo.multiply(log2, x), accuracy)


exp2_p = unop("exp2", inexact)
ad.defjvp2(exp2_p, lambda t, ans, x, accuracy=None: mul(_const(x, np.log(2)), mul(t, ans)))
mlir.register_lowering(exp2_p, _exp2_lowering)


def expm1(x, *, accuracy=None):
    r"""Elementwise :math:`e^x - 1`, accurate for small ``x``.

    >>> import xform.lax as lax
    >>> print(lax.expm1(0.0))
    0.0
    """
    return _accuracy.bind(expm1_p, x, accuracy)


expm1_p = unop("expm1", inexact)
ad.defjvp2(expm1_p, lambda t, ans, x, accuracy=None: mul(t, (
    exp(x, accuracy=accuracy) if accuracy is _accuracy.AccuracyMode.HIGHEST
    else add(ans, _const(ans, 1)))))
mlir.register_lowering(expm1_p, _accuracy.lowering(hlo.exponential_minus_one))


def log1p(x, *, accuracy=None):
    r"""Elementwise :math:`\log(1 + x)`, accurate for small ``x``.

    >>> import xform.lax as lax
    >>> print(lax.log1p(0.0))
    0.0
    """
    return _accuracy.bind(log1p_p, x, accuracy)


log1p_p = unop("log1p", inexact)
ad.defjvp(log1p_p, lambda t, x, accuracy=None: div(t, add(x, _const(x, 1))))
mlir.register_lowering(log1p_p, _accuracy.lowering(hlo.log_plus_one))


def cbrt(x, *, accuracy=None):
    r"""Elementwise real cube root (negative for negative ``x``).

    >>> import xform.lax as lax
    >>> print(lax.cbrt(-8.0))
    -2.0
    """
    return _accuracy.bind(cbrt_p, x, accuracy)


cbrt_p = unop("cbrt", float_dtypes)
ad.defjvp2(cbrt_p, lambda t, ans, x, accuracy=None: mul(t, mul(_const(x, 1 / 3),
                                                               integer_pow(ans, -2))))
mlir.register_lowering(cbrt_p, _accuracy.lowering(hlo.cbrt))


def square(x):
    r"""Elementwise square :math:`x^2`.

    >>> import xform.lax as lax
    >>> print(lax.square(3))
    9
    """
    return square_p.bind(x)


def _square_lowering(ctx, x):
    if dtypes.is_integer(ctx.avals_in[0].dtype):
        return hlo.multiply(x, x)
    return chlo.square(x)   # as JAX: exact for complex where |x|^2 would overflow


square_p = unop("square", numeric)
ad.defjvp(square_p, lambda t, x: mul(t, mul(_const(x, 2), x)))
mlir.register_lowering(square_p, _square_lowering)


def reciprocal(x):
    r"""Elementwise reciprocal :math:`1 / x` (``integer_pow(x, -1)``, as in JAX).

    >>> import xform.lax as lax
    >>> print(lax.reciprocal(4.0))
    0.25
    """
    return integer_pow(x, -1)


# ---- error function family ----

def erf(x):
    r"""Elementwise error function :math:`\frac{2}{\sqrt\pi}\int_0^x e^{-t^2} dt`.

    >>> import xform.lax as lax
    >>> print(lax.erf(0.0))
    0.0
    """
    return erf_p.bind(x)


def _erf_derivative(x):
    return mul(_const(x, 2 / np.sqrt(np.pi)), exp(neg(square(x))))


erf_p = unop("erf", float_dtypes)
ad.defjvp(erf_p, lambda t, x: mul(t, _erf_derivative(x)))
mlir.register_lowering(erf_p, mlir.elementwise(chlo.erf))


def erfc(x):
    r"""Elementwise complementary error function :math:`1 - \mathrm{erf}(x)`.

    >>> import xform.lax as lax
    >>> print(lax.erfc(0.0))
    1.0
    """
    return erfc_p.bind(x)


erfc_p = unop("erfc", float_dtypes)
ad.defjvp(erfc_p, lambda t, x: mul(t, neg(_erf_derivative(x))))
mlir.register_lowering(erfc_p, mlir.elementwise(chlo.erfc))


def erf_inv(x):
    r"""Elementwise inverse error function (on (-1, 1); +-inf at +-1).

    >>> import xform.lax as lax
    >>> print(lax.erf_inv(0.0))
    0.0
    """
    return erf_inv_p.bind(x)


erf_inv_p = unop("erf_inv", float_dtypes)
ad.defjvp2(erf_inv_p,   # 1 / erf'(ans) = sqrt(pi)/2 exp(ans^2)
           lambda t, ans, x: mul(t, mul(_const(x, np.sqrt(np.pi) / 2), exp(square(ans)))))
mlir.register_lowering(erf_inv_p, mlir.elementwise(chlo.erf_inv))


# ---- gamma function family ----

def lgamma(x):
    r"""Elementwise log of the absolute value of the gamma function.

    >>> import xform.lax as lax
    >>> print(round(float(lax.lgamma(4.0)), 4))   # log(3!)
    1.7918
    """
    return lgamma_p.bind(x)


lgamma_p = unop("lgamma", float_dtypes)
ad.defjvp(lgamma_p, lambda t, x: mul(t, digamma(x)))
mlir.register_lowering(lgamma_p, mlir.elementwise(chlo.lgamma))


def digamma(x):
    r"""Elementwise digamma function :math:`\psi(x) = \Gamma'(x) / \Gamma(x)`.

    >>> import xform.lax as lax
    >>> print(round(float(lax.digamma(1.0)), 4))   # minus the Euler-Mascheroni constant
    -0.5772
    """
    return digamma_p.bind(x)


digamma_p = unop("digamma", float_dtypes)
ad.defjvp(digamma_p, lambda t, x: mul(t, polygamma(_const(x, 1), x)))
mlir.register_lowering(digamma_p, mlir.elementwise(chlo.digamma))


def polygamma(m, x):
    r"""Elementwise polygamma function :math:`\psi^{(m)}(x)`, the m-th derivative of
    digamma.

    Args:
      m: the (integer-valued, non-negative) order, a floating array like ``x``.
      x: a floating array.

    Returns:
      :math:`\psi^{(m)}(x)`; NaN where ``m`` is not a non-negative integer.

    >>> import xform.lax as lax
    >>> print(round(float(lax.polygamma(1.0, 1.0)), 4))   # pi^2 / 6
    1.6449
    """
    return polygamma_p.bind(m, x)


def _polygamma_jvp_m(t, m, x):
    raise ValueError("polygamma is not differentiable with respect to its order m "
                     "(it is only defined at integers); close over m instead.")


def _polygamma_jvp_x(t, m, x):
    return mul(_bcast(t, _out_shape(m, x)), polygamma(add(m, _const(m, 1)), x))


polygamma_p = naryop("polygamma", float_dtypes)
ad.defjvp(polygamma_p, _polygamma_jvp_m, _polygamma_jvp_x)
mlir.register_lowering(polygamma_p, mlir.elementwise(chlo.polygamma))

