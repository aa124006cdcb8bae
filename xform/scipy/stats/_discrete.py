"""Discrete distributions of ``jax.scipy.stats`` (``logpmf``/``pmf``, and ``cdf`` where
it is closed-form): bernoulli, binom, geom, nbinom, poisson."""
import numpy as np

from xform import numpy as jnp
from xform.numpy import _util
from xform.scipy import special
from xform.scipy.stats._common import distribution, nan, neg_inf, promote


def _bernoulli_logpmf(k, p, loc=0):
    k, p, loc = promote("bernoulli.logpmf", k, p, loc)
    x = k - loc
    out = special.xlogy(x, p) + special.xlog1py(1 - x, -p)
    return jnp.where((x < 0) | (x > 1), neg_inf(out), out)


def _bad_p(*args):
    """nan inputs or p outside [0, 1] (the last argument): nan, as JAX."""
    p = args[-1]
    bad = (p < 0) | (p > 1)
    for a in args:
        bad = bad | jnp.isnan(a)
    return bad


def _bernoulli_cdf(k, p):
    k, p = promote("bernoulli.cdf", k, p)
    out = jnp.where(k < 0, jnp.zeros_like(k), jnp.where(k < 1, 1 - p, jnp.ones_like(k)))
    return jnp.where(_bad_p(k, p), nan(out), out)


def _bernoulli_ppf(q, p):
    q, p = promote("bernoulli.ppf", q, p)
    out = jnp.where(q <= 1 - p, jnp.zeros_like(q), jnp.ones_like(q))
    return jnp.where((q < 0) | (q > 1) | _bad_p(q, p), nan(out), out)


bernoulli = distribution(
    "bernoulli", "The Bernoulli distribution with success probability ``p``.",
    logpmf=_bernoulli_logpmf,
    pmf=lambda k, p, loc=0: jnp.exp(_bernoulli_logpmf(k, p, loc)),
    cdf=_bernoulli_cdf, ppf=_bernoulli_ppf)


def _binom_logpmf(k, n, p, loc=0):
    # JAX's: 0 where y = n = 0 or the linear term is 0; -inf outside loc <= k < loc + n + 1
    k, n, p, loc = promote("binom.logpmf", k, n, p, loc)
    y = k - loc
    comb = special.gammaln(n + 1) - (special.gammaln(y + 1) + special.gammaln(n - y + 1))
    linear = special.xlogy(y, p) + special.xlog1py(n - y, -p)
    out = jnp.where(((y == 0) & (n == 0)) | (linear == 0), 0.0, comb + linear)
    return jnp.where((k >= loc) & (k < loc + n + 1), out, -jnp.inf)


binom = distribution(
    "binom", "The binomial distribution: successes in ``n`` trials of probability ``p``.",
    logpmf=_binom_logpmf, pmf=lambda k, n, p, loc=0: jnp.exp(_binom_logpmf(k, n, p, loc)))


def _geom_logpmf(k, p, loc=0):
    k, p, loc = promote("geom.logpmf", k, p, loc)
    x = k - loc
    out = special.xlog1py(x - 1, -p) + jnp.log(p)
    return jnp.where(x <= 0, neg_inf(out), out)


geom = distribution(
    "geom", "The geometric distribution: trials until the first success.",
    logpmf=_geom_logpmf, pmf=lambda k, p, loc=0: jnp.exp(_geom_logpmf(k, p, loc)))


def _nbinom_logpmf(k, n, p, loc=0):
    k, n, p, loc = promote("nbinom.logpmf", k, n, p, loc)
    x = k - loc
    comb = special.gammaln(x + n) - special.gammaln(n) - special.gammaln(x + 1)
    out = comb + (special.xlogy(n, p) + special.xlogy(x, 1 - p))
    return jnp.where(k < loc, neg_inf(out), out)


nbinom = distribution(
    "nbinom", "The negative binomial distribution: failures before ``n`` successes.",
    logpmf=_nbinom_logpmf, pmf=lambda k, n, p, loc=0: jnp.exp(_nbinom_logpmf(k, n, p, loc)))


def _poisson_logpmf(k, mu, loc=0):
    k, mu, loc = promote("poisson.logpmf", k, mu, loc)
    x = k - loc
    out = special.xlogy(x, mu) - special.gammaln(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(k) != k), neg_inf(out), out)


def _poisson_cdf(k, mu, loc=0):
    k, mu, loc = promote("poisson.cdf", k, mu, loc)
    x = k - loc
    return jnp.where(x < 0, jnp.zeros_like(x), special.gammaincc(jnp.floor(1 + x), mu))


def _poisson_entropy(mu, loc=0):
    """JAX's: 0 at mu = 0, a sum of ``entr(pmf)`` over k < 35 (mu < 10) or k < 250
    (mu < 100) cut at mu + 20 or mu + 10 sqrt(mu) + 20, else the asymptotic series."""
    mu, loc = _util.promote_dtypes("poisson.entropy", mu, loc, to="inexact")
    shape = jnp.broadcast_shapes(mu.shape, loc.shape)
    flat = jnp.ravel(mu)

    def summed(max_k, upper):
        k = jnp.arange(max_k, dtype=flat.dtype)[:, None]
        probs = jnp.where(k < jnp.ceil(upper).astype(k.dtype)[None, :],
                          jnp.exp(_poisson_logpmf(k, flat, 0)), 0.0)
        return jnp.sum(special.entr(probs), axis=0)
    large = 0.5 * jnp.log(2 * np.pi * np.e * flat) - 1.0 / (12 * flat)
    out = jnp.where(flat == 0, jnp.zeros_like(flat), jnp.where(
        flat < 10, summed(35, flat + 20),
        jnp.where(flat < 100, summed(250, flat + 10 * jnp.sqrt(flat) + 20), large)))
    return jnp.broadcast_to(jnp.reshape(out, mu.shape), shape)


poisson = distribution(
    "poisson", """The Poisson distribution with mean ``mu``.

    >>> from xform.scipy.stats import poisson
    >>> poisson.pmf(0, 2.)
    Array(0.13533522, dtype=float32, weak_type=True)
    """,
    logpmf=_poisson_logpmf, pmf=lambda k, mu, loc=0: jnp.exp(_poisson_logpmf(k, mu, loc)),
    cdf=_poisson_cdf, entropy=_poisson_entropy)
