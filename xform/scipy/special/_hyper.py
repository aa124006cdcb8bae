"""The confluent hypergeometric function ``hyp1f1`` of ``scipy.special``: its power
series for ``|x| < 100``, else its asymptotic series (both capped at 250 terms), with
JAX's term-by-term derivatives as a custom JVP (arXiv:1407.7786, as JAX).
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
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
