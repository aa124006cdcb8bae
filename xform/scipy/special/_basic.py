"""``xform.scipy.special``: the special functions of ``jax.scipy.special`` that compose
from xform.lax (erf, gammaln, digamma, expit/logit, xlogy/xlog1py, entr) plus the
softmax family shared with ``xform.nn``.

``logit``, ``xlogy``, ``xlog1py`` and ``entr``'s ``x log x`` have custom JVPs, as in JAX:
they keep derivatives finite and exact where the plain composition would give NaN
(``xlogy(0, 0)``) or lose precision.
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.nn import _functions as _nn
from xform.nn._functions import logsumexp
from xform.numpy import _util
from xform.transforms.custom_derivatives import custom_jvp

__all__ = ["betainc", "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit", "gammainc", "gammaincc",
           "gammaln", "log_ndtr",
           "log_softmax", "logit", "logsumexp", "ndtr", "ndtri", "softmax", "xlog1py", "xlogy"]


def _inexact(name, *args):
    return _util.promote_args(name, *args, to="inexact")


def _one(x):
    return lax.convert_element_type(1, x.aval.dtype, x.aval.weak_type)


def erf(x):
    """The error function :math:`\\frac{2}{\\sqrt\\pi}\\int_0^x e^{-t^2} dt`.

    >>> import xform, xform.scipy.special as sp
    >>> sp.erf(xform.numpy.array([0., 1.]))
    Array([0.        , 0.84270084], dtype=float32)
    """
    x, = _inexact("erf", x)
    return lax.erf(x)


def erfc(x):
    """The complementary error function ``1 - erf(x)``, accurate for large ``x``.

    >>> import xform, xform.scipy.special as sp
    >>> sp.erfc(xform.numpy.array([0., 5.]))
    Array([1.0000000e+00, 1.5374597e-12], dtype=float32)
    """
    x, = _inexact("erfc", x)
    return lax.erfc(x)


def erfinv(x):
    """The inverse of ``erf`` on (-1, 1) (``+-inf`` at ``+-1``, NaN outside).

    >>> import xform.scipy.special as sp
    >>> sp.erfinv(0.5)
    Array(0.47693628, dtype=float32, weak_type=True)
    """
    x, = _inexact("erfinv", x)
    return lax.erf_inv(x)


def gammaln(x):
    """The log of the absolute value of the gamma function.

    >>> import xform, xform.scipy.special as sp
    >>> sp.gammaln(xform.numpy.array([0.5, 5.]))
    Array([0.5723648, 3.1780548], dtype=float32)
    """
    x, = _inexact("gammaln", x)
    return lax.lgamma(x)


def digamma(x):
    """The digamma function: the derivative of ``gammaln``.

    >>> import xform, xform.scipy.special as sp
    >>> sp.digamma(xform.numpy.array([1.]))
    Array([-0.5772154], dtype=float32)
    """
    x, = _inexact("digamma", x)
    return lax.digamma(x)


def expit(x):
    """The logistic sigmoid :math:`1 / (1 + e^{-x})`.

    >>> import xform, xform.scipy.special as sp
    >>> sp.expit(xform.numpy.array([0.]))
    Array([0.5], dtype=float32)
    """
    x, = _inexact("expit", x)
    return lax.logistic(x)


def logit(x):
    """The logit :math:`\\log(p / (1 - p))`, the inverse of ``expit``; its derivative is
    :math:`1 / (p (1 - p))` (a custom JVP, as in JAX).

    >>> import xform, xform.scipy.special as sp
    >>> sp.logit(xform.numpy.array([0.5, 0.75]))
    Array([0.       , 1.0986123], dtype=float32)
    """
    x, = _inexact("logit", x)
    return _logit(x)


@custom_jvp
def _logit(x):
    return lax.log(lax.div(x, lax.sub(_one(x), x)))


_logit.defjvps(lambda t, ans, x: lax.div(t, lax.mul(x, lax.sub(_one(x), x))))


def xlogy(x, y):
    """:math:`x \\log y`, defined as 0 where ``x == 0`` (unless ``y`` is NaN), with a
    derivative that is finite there.

    >>> import xform, xform.scipy.special as sp
    >>> sp.xlogy(xform.numpy.array([0., 2.]), xform.numpy.array([0., 3.]))
    Array([0.       , 2.1972246], dtype=float32)
    """
    x, y = _inexact("xlogy", x, y)
    return _xlogy(x, y)


@custom_jvp
def _xlogy(x, y):
    return jnp.where((x != 0) | jnp.isnan(y), x * lax.log(y), jnp.zeros_like(x))


@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    # d(x log y) = log(y) dx + (x / y) dy
    (x, y), (tx, ty) = primals, tangents
    return _xlogy(x, y), tx * lax.log(y) + ty * x / y


def xlog1py(x, y):
    """:math:`x \\log(1 + y)`, defined as 0 where ``x == 0`` (unless ``y`` is NaN), with
    a derivative that is finite there.

    >>> import xform, xform.scipy.special as sp
    >>> sp.xlog1py(xform.numpy.array([0., 2.]), xform.numpy.array([-1., 1e-8]))
    Array([0.e+00, 2.e-08], dtype=float32)
    """
    x, y = _inexact("xlog1py", x, y)
    return _xlog1py(x, y)


@custom_jvp
def _xlog1py(x, y):
    return jnp.where((x != 0) | jnp.isnan(y), x * lax.log1p(y), jnp.zeros_like(x))


@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    # d(x log(1 + y)) = log1p(y) dx + x / (1 + y) dy
    (x, y), (tx, ty) = primals, tangents
    return _xlog1py(x, y), tx * lax.log1p(y) + ty * x / (1 + y)


def entr(x):
    """The entropy function: :math:`-x \\log x` for x > 0, 0 at 0, ``-inf`` for x < 0.

    Raises:
      ValueError: for complex inputs.

    >>> import xform, xform.scipy.special as sp
    >>> sp.entr(xform.numpy.array([0., 0.5, -1.]))
    Array([-0.       ,  0.3465736,       -inf], dtype=float32)
    """
    x, = _inexact("entr", x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise ValueError("entr does not support complex-valued inputs.")
    return jnp.where(x < 0, jnp.full_like(x, -np.inf), -_xlogx(x))


@custom_jvp
def _xlogx(x):
    return _xlogy(x, x)


_xlogx.defjvps(lambda t, ans, x: t * (lax.log(x) + 1))


def betaln(a, b):
    """The log of the beta function, ``gammaln(a) + gammaln(b) - gammaln(a + b)``.

    >>> import xform.scipy.special as sp
    >>> sp.betaln(2., 3.)
    Array(-2.4849074, dtype=float32, weak_type=True)
    """
    a, b = _inexact("betaln", a, b)
    a, b = jnp.minimum(a, b), jnp.maximum(a, b)
    # lgamma(b) - lgamma(a + b) cancels catastrophically for large b (all digits lost
    # at b ~ 1e7 in float32); from b >= 8 on, JAX and scipy's cdflib use algdiv.
    small_b = lax.lgamma(a) + (lax.lgamma(b) - lax.lgamma(a + b))
    return jnp.where(b < 8, small_b, lax.lgamma(a) + _algdiv(a, b))


def _algdiv(a, b):
    """``lgamma(b) - lgamma(a + b)`` for ``b >= 8``, ``a <= b`` (cdflib's algdiv):
    Stirling's series, whose leading terms cancel analytically, plus the difference
    of the remainders ``del(b) - del(a + b)`` as a short series in ``1 / b**2``."""
    c = [0.833333333333333e-01, -0.277777777760991e-02, 0.793650666825390e-03,
         -0.595202931351870e-03, 0.837308034031215e-03, -0.165322962780713e-02]
    h = a / b
    x = h / (1 + h)
    x2 = x * x
    s = [1.0]                       # s[k] = (1 - x**(2k+1)) / (1 - x), k = 1..5
    for _ in range(5):
        s.append(1.0 + (x + x2 * s[-1]))
    t = (1.0 / b) ** 2
    w = c[5] * s[5]
    for k in (4, 3, 2, 1):
        w = w * t + c[k] * s[k]
    w = (w * t + c[0]) * (x / b)
    u = (b + (a - 0.5)) * lax.log1p(a / b)
    v = a * (lax.log(b) - 1.0)
    return jnp.where(u <= v, (w - v) - u, (w - u) - v)


def softmax(x, /, *, axis=None):
    """``scipy.special.softmax``: ``xform.nn.softmax`` over all axes by default."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    """``scipy.special.log_softmax``: ``xform.nn.log_softmax`` over all axes by default."""
    return _nn.log_softmax(x, axis=axis)


def _f32_or_f64(x, extra=", see docstring for supported types"):
    # (JAX's ndtr family refuses float16/bfloat16: their series cut-offs are per dtype)
    if x.aval.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.aval.dtype.name} is not supported{extra}.")
    return x


def ndtr(x):
    """The standard normal CDF, ``erfc(-x / sqrt(2)) / 2`` (accurate in both tails);
    float32 or float64 only, as JAX's.

    >>> import xform.scipy.special as sp
    >>> sp.ndtr(0.)
    Array(0.5, dtype=float32)
    """
    x = _f32_or_f64(jnp.asarray(x))
    half = lax.convert_element_type(0.5, x.aval.dtype, x.aval.weak_type)
    return lax.mul(half, lax.erfc(lax.mul(x, -np.sqrt(0.5).astype(x.aval.dtype))))


def ndtri(p):
    """The inverse of ``ndtr``, accurate far into both tails (``ndtri(1e-30)`` is
    -11.46): Abramowitz & Stegun 26.2.23's estimate refined by two Newton steps on
    ``log_ndtr(x) = log(p)``; its derivative is ``1 / pdf(x)`` (a custom JVP).

    >>> import xform.scipy.special as sp
    >>> sp.ndtri(0.5)
    Array(0., dtype=float32)
    """
    return _ndtri(_f32_or_f64(jnp.asarray(p)))


# a Python float, so weak: np.log's float64 scalar is strong, and under x64 would
# promote float32 results to float64
_HALF_LOG_2PI = float(0.5 * np.log(2 * np.pi))


def _ndtri_lower(q):
    """The magnitude of the ``q``-quantile, for ``0 < q <= 0.5``."""
    log_q = jnp.log(q)
    t = jnp.sqrt(-2 * log_q)
    x = -(t - (2.515517 + t * (0.802853 + t * 0.010328))
          / (1 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
    for _ in range(2):  # Newton on log ndtr(x) = log q; its slope is pdf(x) / ndtr(x)
        log_cdf = log_ndtr(x)
        x = x - (log_cdf - log_q) * jnp.exp(log_cdf + 0.5 * x * x + _HALF_LOG_2PI)
    return -x


@custom_jvp
def _ndtri(p):
    lower = p < 0.5
    q = jnp.where(lower, p, 1 - p)
    mag = _ndtri_lower(jnp.clip(q, np.finfo(p.dtype).tiny, 0.5))
    x = jnp.where(lower, -mag, mag)
    x = jnp.where(q == 0, jnp.where(lower, -np.inf, np.inf), x)
    return jnp.where((p < 0) | (p > 1) | jnp.isnan(p), jnp.full_like(p, np.nan), x)


_ndtri.defjvps(lambda t, x, p: t * jnp.exp(0.5 * x * x + _HALF_LOG_2PI))


def log_ndtr(x, series_order=3):
    """``log(ndtr(x))``, accurate far into both tails (below -10 (float32) / -20
    (float64) the asymptotic series to ``series_order`` terms, ``log1p(-ndtr(-x))`` above
    5 / 8).

    >>> import xform.scipy.special as sp
    >>> sp.log_ndtr(-30.)
    Array(-454.32123, dtype=float32)
    """
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if not 0 <= series_order <= 30:
        raise ValueError(f"series_order must be in [0, 30], got {series_order}.")
    x = _f32_or_f64(jnp.asarray(x), extra="")
    lower, upper = (-10.0, 5.0) if x.aval.dtype.itemsize <= 4 else (-20.0, 8.0)
    lo = jnp.minimum(x, lower)
    mid = jnp.clip(x, lower, upper)
    hi = jnp.maximum(x, upper)
    # log ndtr(x) ~ -x^2/2 - log(-x) - log(2 pi)/2 + log(sum_n (-1)^n (2n-1)!! / x^(2n))
    inv = 1 / (lo * lo)
    series = jnp.ones_like(lo)
    for n in range(series_order, 0, -1):   # Horner, innermost term first
        series = 1 + series * inv * -(2 * n - 1)
    tail = -0.5 * lo * lo - jnp.log(-lo) - _HALF_LOG_2PI + jnp.log(series)
    return jnp.where(x <= lower, tail,
                     jnp.where(x >= upper, jnp.log1p(-ndtr(-hi)), jnp.log(ndtr(mid))))


def gammainc(a, x):
    """The regularized lower incomplete gamma function :math:`P(a, x)` (``lax.igamma``).

    >>> import xform.scipy.special as sp
    >>> sp.gammainc(2., 1.)
    Array(0.26424113, dtype=float32, weak_type=True)
    """
    a, x = _inexact("gammainc", a, x)
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function :math:`Q(a, x) = 1 - P(a, x)`.

    >>> import xform.scipy.special as sp
    >>> sp.gammaincc(2., 1.)
    Array(0.7357589, dtype=float32, weak_type=True)
    """
    a, x = _inexact("gammaincc", a, x)
    return lax.igammac(a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function :math:`I_x(a, b)` (``lax.betainc``:
    differentiable in ``x`` only, as in JAX).

    >>> import xform.scipy.special as sp
    >>> sp.betainc(2., 3., 0.5)
    Array(0.6874998, dtype=float32, weak_type=True)
    """
    a, b, x = _inexact("betainc", a, b, x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise ValueError("betainc does not support complex-valued inputs.")
    return lax.betainc(a, b, x)
