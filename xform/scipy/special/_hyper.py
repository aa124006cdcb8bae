"""The hypergeometric functions of ``scipy.special``, after arXiv:1407.7786 as JAX:
``hyp1f1`` by its power series for ``|x| < 100``, else its asymptotic series; ``hyp2f1``
by its series, terminating sums, or the digamma transformation near ``x = 1``, with
Cephes' special cases. Series are capped at 250 terms; derivatives in the parameters
are the series differentiated term by term (custom JVPs).

NB: as in JAX, every branch is evaluated (``select_n`` inside ``vectorize``).
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.scipy.special._basic import _inexact, digamma
from xform.scipy.special._gamma import gamma
from xform.transforms.custom_derivatives import custom_jvp


def _series_loop(step, init, eps):
    def cond(state):
        total, k, term = state
        return (k < 250) & (lax.abs(term) / lax.abs(total) > eps)

    def body(state):
        total, k, term = state
        total, term = step(total, k, term)
        return total, k + 1, term
    return lax.while_loop(cond, body, init)[0]


def _hyp1f1_series(a, b, x):
    eps = dtypes.finfo(x.dtype).eps
    return _series_loop(lambda s, k, t: (s + t, t * (a + k) / (b + k) * x / (k + 1)),
                        (jnp.ones_like(x), jnp.ones_like(x), a / b * x), eps)


def _hyp1f1_asymptotic(a, b, x):
    eps = dtypes.finfo(x.dtype).eps
    total = _series_loop(
        lambda s, k, t: (s + t, t * (b - a + k) * (1 - a + k) / (k + 1) / x),
        (jnp.ones_like(x), jnp.ones_like(x), (b - a) * (1 - a) / x), eps)
    return gamma(b) / gamma(a) * lax.exp(x) * x ** (a - b) * total


def _hyp1f1_scalar(a, b, x):
    out = lax.cond(lax.abs(x) < 100, _hyp1f1_series, _hyp1f1_asymptotic, a, b, x)
    index = (a == 0) * 1 + ((a == b) & (a != 0)) * 2 + ((b == 0) & (a != 0)) * 3
    return lax.select_n(index, out, jnp.ones_like(x), jnp.exp(x), jnp.full_like(x, np.inf))


@composite
def hyp1f1(a, b, x):
    """The confluent hypergeometric function ``1F1(a; b; x)`` (real arguments).

    >>> import xform.scipy.special as sp
    >>> round(float(sp.hyp1f1(1.0, 2.0, 1.0)), 5)   # (e - 1) / 1
    1.71828
    """
    a, b, x = _inexact("hyp1f1", a, b, x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise ValueError("hyp1f1 does not support complex-valued inputs.")
    return _hyp1f1(a, b, x)


@custom_jvp
def _hyp1f1(a, b, x):
    return jnp.vectorize(_hyp1f1_scalar)(a, b, x)


def _derivative_series(weight):
    """d 1F1 / d a or b: the power series with each term weighted (a digamma difference)."""
    def scalar(a, b, x):
        eps = dtypes.finfo(x.dtype).eps
        return _series_loop(lambda s, k, t: (s + t * weight(a, b, k),
                                             t * (a + k) / (b + k) * x / (k + 1)),
                            (jnp.zeros_like(x), jnp.ones_like(x), a / b * x), eps)
    return jnp.vectorize(scalar)


_d_a = _derivative_series(lambda a, b, k: digamma(a + k) - digamma(a))
_d_b = _derivative_series(lambda a, b, k: digamma(b) - digamma(b + k))
_hyp1f1.defjvps(lambda t, ans, a, b, x: _d_a(a, b, x) * t,
                lambda t, ans, a, b, x: _d_b(a, b, x) * t,
                lambda t, ans, a, b, x: a / b * _hyp1f1(a + 1, b + 1, x) * t)


# ---- hyp2f1 ----

# Every branch runs (select_n): a branch not chosen loops zero times, and a chosen one
# at most _MAX_LOOP times, where JAX's loops to |a| or c - a - b (a = inf or 1e30 hang).
_MAX_LOOP = 2 ** 20


def _hyp2f1_terminal(a, b, c, x, chosen):
    # the polynomial when a or b is a non-positive integer: loop to the one of larger
    # magnitude that is still below |c| when c is a non-positive integer
    eps = dtypes.finfo(x.dtype).eps * 50
    swap = (b < a) & (jnp.abs(b - jnp.round(b)) < eps) & ~((c % 1 == 0) & (c <= 0) & (c > b))
    a, b = jnp.where(swap, b, a), jnp.where(swap, a, b)
    n = jnp.where(chosen, jnp.minimum(-a, _MAX_LOOP), 0)
    a = jnp.abs(a)

    def body(state):
        i, total, term = state
        term = term * -(a - i + 1) / (c + i - 1) * (b + i - 1) / i * x
        return i + 1, total + term, term
    one = jnp.ones_like(x)
    return lax.while_loop(lambda st: st[0] < n + 1, body, (one, one, one))[1]


def _hyp2f1_series(a, b, c, x):
    eps = dtypes.finfo(x.dtype).eps

    def cond(state):
        total, k, term = state
        return (k < 250) & (lax.abs(term) > eps * lax.abs(total))

    def body(state):
        total, k, term = state
        return total + term, k + 1, term * (a + k - 1) * (b + k - 1) / (c + k - 1) / k * x
    return lax.while_loop(cond, body, (jnp.zeros_like(x), jnp.ones_like(x),
                                       jnp.ones_like(x)))[0]


def _hyp2f1_terminal_or_series(a, b, c, x):
    eps = dtypes.finfo(x.dtype).eps * 50
    d = c - a - b
    neg_int = ((a <= 0) & (jnp.abs(a - jnp.round(a)) < eps)) | (
        (b <= 0) & (jnp.abs(b - jnp.round(b)) < eps))
    index = jnp.where((x > 0.9) & ~neg_int, jnp.where(jnp.abs(d - jnp.round(d)) >= eps, 0, 1),
                      jnp.where(neg_int, 2, 0))
    return lax.select_n(index, _hyp2f1_series(a, b, c, x),
                        _hyp2f1_digamma_transform(a, b, c, x, index == 1),
                        _hyp2f1_terminal(a, b, c, x, index == 2))


def _hyp2f1_digamma_transform(a, b, c, x, chosen):
    # near x = 1 with c - a - b an integer: the logarithmic case (Abramowitz & Stegun 15.3.10-12)
    eps = dtypes.finfo(x.dtype).eps
    d = c - a - b
    s = 1 - x
    rd = jnp.round(d)
    up = rd >= 0
    e = jnp.where(up, d, -d)
    d1 = jnp.where(up, d, jnp.zeros_like(d))
    d2 = jnp.where(up, jnp.zeros_like(d), d)
    ard = jnp.where(chosen, jnp.minimum(jnp.abs(rd), _MAX_LOOP), 0).astype(np.int32)
    ax = jnp.log(s)
    y = (digamma(1.0) + digamma(1.0 + e) - digamma(a + d1) - digamma(b + d1) - ax) / gamma(
        e + 1.0)
    p = (a + d1) * (b + d1) * s / gamma(e + 2.0)

    def cond(state):
        p, q, t, y = state
        return (t < 250) & (jnp.abs(q) >= eps * jnp.abs(y))

    def body(state):
        p, q, t, y = state
        r = (digamma(1.0 + t) + digamma(1.0 + t + e) - digamma(a + t + d1)
             - digamma(b + t + d1) - ax)
        q = p * r
        y = y + q
        p = p * s * (a + t + d1) / (t + 1.0)
        p = p * (b + t + d1) / (t + 1.0 + e)
        return p, q, t + 1.0, y
    _, _, _, y = lax.while_loop(cond, body, (p, y, jnp.ones_like(x), y))

    def finite_sum():
        def step(state):
            i, p, t, y1 = state
            p = p * s * (a + t + d2) * (b + t + d2) / (1.0 - e + t)
            t = t + 1.0
            p = p / t
            return i + 1, p, t, y1 + p
        one = jnp.ones_like(x)
        y1 = lax.while_loop(lambda st: st[0] < ard, step,
                            (np.int32(1), one, jnp.zeros_like(x), one))[3]
        gc = gamma(c)
        y1 = y1 * gamma(e) * gc / (gamma(a + d1) * gamma(b + d1))
        yy = y * gc / (gamma(a + d2) * gamma(b + d2))
        yy = jnp.where((ard & 1) != 0, -yy, yy)
        q = s ** rd
        return jnp.where(rd > 0, yy * q + y1, yy + y1 * q)
    return jnp.where(rd == 0, y * gamma(c) / (gamma(a) * gamma(b)), finite_sum())


def _hyp2f1_scalar(a, b, c, x):
    eps = dtypes.finfo(x.dtype).eps * 50
    d, s, ca, cb = c - a - b, 1 - x, c - a, c - b
    index = jnp.select(
        [(x == 0) | (((a == 0) | (b == 0)) & (c != 0)),
         (c == 0) | ((c < 0) & (c % 1 == 0)),
         (d <= -1) & ~((jnp.abs(d - jnp.round(d)) >= eps) & (s < 0)),
         (d <= 0) & (x == 1),
         (x < 1) & (b == c),
         (x < 1) & (a == c),
         x > 1,
         x == 1],
        [0, 1, 2, 1, 3, 4, 1, 5], 6)
    return lax.select_n(index, jnp.ones_like(x), jnp.full_like(x, np.inf),
                        s ** d * _hyp2f1_terminal_or_series(ca, cb, c, x),
                        s ** (-a), s ** (-b), gamma(c) * gamma(d) / (gamma(ca) * gamma(cb)),
                        _hyp2f1_terminal_or_series(a, b, c, x))


@composite
def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function ``2F1(a, b; c; x)`` (real arguments; ``inf``
    beyond ``x = 1``, as JAX).

    >>> import xform.scipy.special as sp
    >>> round(float(sp.hyp2f1(1.0, 1.0, 2.0, 0.5)), 5)   # -log(1 - x) / x
    1.38629
    """
    a, b, c, x = _inexact("hyp2f1", a, b, c, x)
    return _hyp2f1(a, b, c, x)


@custom_jvp
def _hyp2f1(a, b, c, x):
    return jnp.vectorize(_hyp2f1_scalar)(a, b, c, x)


def _hyp2f1_param_derivative(weight):
    def scalar(a, b, c, x):
        eps = dtypes.finfo(x.dtype).eps
        return _series_loop(lambda s, k, t: (s + t * weight(a, b, c, k),
                                             t * (a + k) * (b + k) / (c + k) / (k + 1) * x),
                            (jnp.zeros_like(x), jnp.ones_like(x), a * b / c * x), eps)
    return jnp.vectorize(scalar)


_d2_a = _hyp2f1_param_derivative(lambda a, b, c, k: digamma(a + k) - digamma(a))
_d2_b = _hyp2f1_param_derivative(lambda a, b, c, k: digamma(b + k) - digamma(b))
_d2_c = _hyp2f1_param_derivative(lambda a, b, c, k: digamma(c) - digamma(c + k))
_hyp2f1.defjvps(lambda t, ans, a, b, c, x: _d2_a(a, b, c, x) * t,
                lambda t, ans, a, b, c, x: _d2_b(a, b, c, x) * t,
                lambda t, ans, a, b, c, x: _d2_c(a, b, c, x) * t,
                lambda t, ans, a, b, c, x: a * b / c * _hyp2f1(a + 1, b + 1, c + 1, x) * t)
