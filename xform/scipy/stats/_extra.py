"""The rest of ``jax.scipy.stats``' distributions: vonmises, wrapcauchy, truncnorm,
betabinom and multinomial, each JAX's formula term for term (nan for an invalid parameter,
``-inf`` off the support)."""
import numpy as np

from xform import numpy as jnp
from xform.numpy import _util
from xform.scipy import special
from xform.scipy.stats._common import distribution, promote
from xform.scipy.stats._common import exp_of as _exp
from xform.scipy.stats._continuous import norm


def _vonmises_logpdf(x, kappa):
    x, kappa = promote("vonmises.logpdf", x, kappa)
    out = kappa * (jnp.cos(x) - 1) - jnp.log(2 * np.pi * special.i0e(kappa))
    return jnp.where(kappa > 0, out, np.nan)


vonmises = distribution(
    "vonmises", "The von Mises distribution on the circle with concentration ``kappa``.",
    logpdf=_vonmises_logpdf, pdf=_exp(_vonmises_logpdf))


def _wrapcauchy_logpdf(x, c):
    x, c = promote("wrapcauchy.logpdf", x, c)
    out = (jnp.log(1 - c * c) - float(np.log(2 * np.pi))
           - jnp.log(1 + c * c - 2 * c * jnp.cos(x)))
    out = jnp.where((x >= 0) & (x <= 2 * np.pi), out, -np.inf)
    return jnp.where((c > 0) & (c < 1), out, np.nan)


wrapcauchy = distribution(
    "wrapcauchy", "The wrapped Cauchy distribution on ``[0, 2 pi]`` with shape ``c``.",
    logpdf=_wrapcauchy_logpdf, pdf=_exp(_wrapcauchy_logpdf))


def _betabinom_logpmf(k, n, a, b, loc=0):
    k, n, a, b, loc = promote("betabinom.logpmf", k, n, a, b, loc)
    y = jnp.floor(k) - loc
    combiln = -(jnp.log1p(n) + special.betaln(n - y + 1, y + 1))
    out = combiln + (special.betaln(y + a, n - y + b) - special.betaln(a, b))
    out = jnp.where((y == 0) & (n == 0), 0.0, out)
    out = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, out)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, out)


betabinom = distribution(
    "betabinom", "The beta-binomial distribution: ``n`` trials of a beta(a, b) probability.",
    logpmf=_betabinom_logpmf, pmf=_exp(_betabinom_logpmf))


def _multinomial_logpmf(x, n, p):
    p, = _util.promote_args("multinomial.logpmf", p, to="inexact")
    x, n = _util.promote_args("multinomial.logpmf", x, n, to="numeric")
    if not jnp.issubdtype(x.dtype, np.integer):
        raise ValueError("x and n must be of integer type; "
                         f"got x.dtype={x.dtype}, n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    out = special.gammaln(n + 1) + jnp.sum(special.xlogy(x, p) - special.gammaln(x + 1), -1)
    return jnp.where(jnp.sum(x) == n, out, -np.inf)


multinomial = distribution(
    "multinomial", "The multinomial distribution: counts ``x`` of ``n`` draws from ``p``.",
    logpmf=_multinomial_logpmf, pmf=_exp(_multinomial_logpmf))


def _log_diff(x, y):
    return special.logsumexp(jnp.array([x, y]), axis=0,
                             b=jnp.array([jnp.ones_like(x), -jnp.ones_like(y)]))


def _log_gauss_mass(a, b):
    """log of the standard normal's mass on [a, b], from the nearer tail."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    left, right = b <= 0, a > 0
    tail = _log_diff(special.log_ndtr(jnp.where(right, -a, b)),
                     special.log_ndtr(jnp.where(right, -b, a)))
    central = jnp.log1p(-special.ndtr(a) - special.ndtr(-b))
    return jnp.where(~(left | right), central, tail)


def _truncnorm_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("truncnorm.logpdf", x, a, b, loc, scale)
    out = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    out = jnp.where((z < a) | (z > b), -np.inf, out)
    return jnp.where(a >= b, np.nan, out)


def _truncnorm_logcdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("truncnorm.logcdf", x, a, b, loc, scale)
    x = (x - loc) / scale
    mass = _log_gauss_mass(a, b)
    logcdf = _log_gauss_mass(a, x) - mass
    logsf = _log_gauss_mass(x, b) - mass
    out = jnp.select([x >= b, x <= a, logcdf > -0.1, x > a],
                     [0, -np.inf, jnp.log1p(-jnp.exp(logsf)), logcdf])
    return jnp.where(a >= b, np.nan, out)


def _truncnorm_logsf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("truncnorm.logsf", x, a, b, loc, scale)
    return _truncnorm_logcdf(-x, -b, -a, -loc, scale)


truncnorm = distribution(
    "truncnorm", "The normal distribution truncated to ``[a, b]`` (in standard units).",
    logpdf=_truncnorm_logpdf, pdf=_exp(_truncnorm_logpdf), logcdf=_truncnorm_logcdf,
    cdf=_exp(_truncnorm_logcdf), logsf=_truncnorm_logsf, sf=_exp(_truncnorm_logsf))
