"""Univariate continuous distributions of ``jax.scipy.stats``, composed from
``xform.numpy`` and ``xform.scipy.special``: each function promotes its arguments to one
inexact dtype and broadcasts them, as JAX does; ``pdf`` is ``exp(logpdf)``.

Each formula is JAX's own, term for term, so values agree off the support too: out-of-range
quantiles, non-positive shapes or scales, ``nan`` and ``inf`` give what JAX gives (a ``nan``
where JAX checks a parameter, the formula's value where it does not).

The CDFs of gamma and chi2 use ``scipy.special.gammainc``/``gammaincc``, beta's
``betainc`` (series and continued fractions in fixed-length loops).
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.scipy import special
from xform.scipy.stats._common import distribution, promote
from xform.scipy.stats._common import exp_of as _exp, log_of as _log

_LOG_2PI = float(np.log(2 * np.pi))
_inf, _nan = np.inf, np.nan


def _z(name, x, loc, scale):
    x, loc, scale = promote(name, x, loc, scale)
    return (x - loc) / scale, x, loc, scale


def _clamp(lo, y, hi):
    """``lax.clamp`` between constants of ``y``'s dtype, as JAX's CDFs: its gradient is a
    select, so a ``log`` of the clamped CDF has a zero (not ``0 * inf = nan``) gradient off
    the support. Its constants are weak only for a weak scalar (JAX's ``_const``), so a
    CDF of Python scalars is weak and one of an integer array is not."""
    if getattr(y, "weak_type", False) and np.ndim(y) == 0:
        return lax.clamp(float(lo), y, float(hi))
    return lax.clamp(np.array(lo, y.dtype), y, np.array(hi, y.dtype))


def _log1mexp(x):
    """``log(1 - exp(-x))`` as ``jax.nn.log1mexp`` computes it (xform.nn is a layer up)."""
    return jnp.where(x < float(np.log(2.0)), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


def _bad_q(q):
    return jnp.isnan(q) | (q < 0) | (q > 1)


# ---- norm ----

def _norm_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("norm.logpdf", x, loc, scale)
    scale_sq = scale * scale
    return (jnp.log(2 * np.pi * scale_sq) + (x - loc) * (x - loc) / scale_sq) / -2


def _norm_cdf(x, loc=0, scale=1):
    return special.ndtr(_z("norm.cdf", x, loc, scale)[0])


def _norm_logcdf(x, loc=0, scale=1):
    return special.log_ndtr(_z("norm.logcdf", x, loc, scale)[0])


def _norm_ppf(q, loc=0, scale=1):
    # JAX: asarray(..., float), the default float dtype whatever q's is
    return jnp.asarray(special.ndtri(q) * scale + loc, float)


def _norm_flip(fn, name):
    def flipped(x, loc=0, scale=1):
        x, loc, scale = promote(name, x, loc, scale)
        return fn(-x, -loc, scale)
    return flipped


norm = distribution(
    "norm", """The normal distribution ``N(loc, scale**2)``.

    >>> from xform.scipy.stats import norm
    >>> norm.logpdf(0.)
    Array(-0.9189385, dtype=float32, weak_type=True)
    """,
    logpdf=_norm_logpdf, pdf=_exp(_norm_logpdf), cdf=_norm_cdf, logcdf=_norm_logcdf,
    sf=_norm_flip(_norm_cdf, "norm.sf"), logsf=_norm_flip(_norm_logcdf, "norm.logsf"),
    ppf=_norm_ppf, isf=lambda q, loc=0, scale=1: _norm_ppf(1 - _as(q), loc, scale))


def _as(x):
    return x if hasattr(x, "shape") else jnp.asarray(x)


# ---- uniform ----

def _uniform_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("uniform.logpdf", x, loc, scale)
    return jnp.where((x > loc + scale) | (x < loc), -_inf, -jnp.log(scale))


def _uniform_cdf(x, loc=0, scale=1):
    x, loc, scale = promote("uniform.cdf", x, loc, scale)
    inside = (x >= loc) & (x <= loc + scale)
    zero, one = jnp.array(0, x.dtype), jnp.array(1, x.dtype)   # not weak, as JAX's
    return jnp.select([x < loc, x > loc + scale, inside], [zero, one, (x - loc) / scale])


def _uniform_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("uniform.ppf", q, loc, scale)
    return jnp.where(_bad_q(q), _nan, loc + scale * q)


uniform = distribution(
    "uniform", "The uniform distribution on ``[loc, loc + scale]``.",
    logpdf=_uniform_logpdf, pdf=_exp(_uniform_logpdf), cdf=_uniform_cdf, ppf=_uniform_ppf)


# ---- expon ----

def _expon_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("expon.logpdf", x, loc, scale)
    return jnp.where(x < loc, -_inf, -((x - loc) / scale + jnp.log(scale)))


def _expon_cdf(x, loc=0, scale=1):
    x, loc, scale = promote("expon.cdf", x, loc, scale)
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), -jnp.expm1(neg_z))


def _expon_logsf(x, loc=0, scale=1):
    x, loc, scale = promote("expon.sf", x, loc, scale)
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), neg_z)


def _expon_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("expon.ppf", q, loc, scale)
    return jnp.where(_bad_q(q), _nan, loc - scale * jnp.log1p(-q))


expon = distribution(
    "expon", "The exponential distribution with rate ``1 / scale``, shifted by ``loc``.",
    logpdf=_expon_logpdf, pdf=_exp(_expon_logpdf), cdf=_expon_cdf,
    logcdf=lambda x, loc=0, scale=1: jnp.log1p(-jnp.exp(_expon_logsf(x, loc, scale))),
    sf=_exp(_expon_logsf), logsf=_expon_logsf, ppf=_expon_ppf)


# ---- gamma, chi2, beta, t ----

def _gamma_logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote("gamma.logpdf", x, a, loc, scale)
    ok = x >= loc
    y = jnp.where(ok, (x - loc) / scale, 1)
    out = special.xlogy(a - 1, y) - y - (special.gammaln(a) + jnp.log(scale))
    return jnp.where(ok, out, -_inf)


def _gamma_cdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote("gamma.cdf", x, a, loc, scale)
    return special.gammainc(a, _clamp(0, (x - loc) / scale, _inf))


def _gamma_sf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < 0, 1, special.gammaincc(a, y))


gamma = distribution(
    "gamma", "The gamma distribution with shape ``a``.", logpdf=_gamma_logpdf,
    pdf=_exp(_gamma_logpdf), cdf=_gamma_cdf, logcdf=_log(_gamma_cdf), sf=_gamma_sf,
    logsf=_log(_gamma_sf))


def _chi2_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half = df / 2
    kernel = (half - 1) * jnp.log(y) - y / 2
    const = -(special.gammaln(half) + float(np.log(2.0)) * df / 2)
    return jnp.where(x < loc, -_inf, const - jnp.log(scale) + kernel)


def _chi2_tail(name, inc):
    def tail(x, df, loc=0, scale=1):
        x, df, loc, scale = promote(name, x, df, loc, scale)
        return inc(df / 2, _clamp(0, (x - loc) / (scale * 2), _inf))
    return tail


_chi2_cdf = _chi2_tail("chi2.cdf", special.gammainc)
_chi2_sf = _chi2_tail("chi2.sf", special.gammaincc)
chi2 = distribution(
    "chi2", "The chi-squared distribution with ``df`` degrees of freedom.",
    logpdf=_chi2_logpdf, pdf=_exp(_chi2_logpdf), cdf=_chi2_cdf, logcdf=_log(_chi2_cdf),
    sf=_chi2_sf, logsf=_log(_chi2_sf))


def _beta_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("beta.logpdf", x, a, b, loc, scale)
    y = (x - loc) / scale
    linear = special.xlogy(a - 1, y) + special.xlog1py(b - 1, -y)
    out = -special.betaln(a, b) + linear - jnp.log(scale)
    out = jnp.where((x > loc + scale) | (x < loc), -_inf, out)
    return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), _nan, out)


def _beta_cdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("beta.cdf", x, a, b, loc, scale)
    return special.betainc(a, b, _clamp(0, (x - loc) / scale, 1))


def _beta_sf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("beta.sf", x, a, b, loc, scale)
    return special.betainc(b, a, 1 - _clamp(0, (x - loc) / scale, 1))


beta = distribution(
    "beta", "The beta distribution with shapes ``a``, ``b`` on ``[loc, loc + scale]``.",
    logpdf=_beta_logpdf, pdf=_exp(_beta_logpdf), cdf=_beta_cdf, logcdf=_log(_beta_cdf),
    sf=_beta_sf, logsf=_log(_beta_sf))


def _t_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote("t.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half_df = df / 2
    half_df1 = half_df + 0.5
    norm_term = (special.gammaln(half_df) + jnp.log(scale * scale * np.pi * df) / 2
                 - special.gammaln(half_df1))
    return -(norm_term + half_df1 * jnp.log1p(y * y / df))


t = distribution(
    "t", "Student's t distribution with ``df`` degrees of freedom.", logpdf=_t_logpdf,
    pdf=_exp(_t_logpdf))


# ---- cauchy, laplace, logistic ----

def _cauchy_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _z("cauchy.logpdf", x, loc, scale)
    return -(jnp.log(np.pi * scale) + jnp.log1p(z * z))


def _cauchy_cdf(x, loc=0, scale=1):
    z, *_ = _z("cauchy.cdf", x, loc, scale)
    return 0.5 + (1 / np.pi) * jnp.arctan(z)


def _cauchy_q(name, sign):
    # JAX's tan(pi q - pi/2) (ppf) / tan(pi/2 - pi q) (isf), unchecked outside [0, 1]
    def quantile(q, loc=0, scale=1):
        q, loc, scale = promote(name, q, loc, scale)
        return jnp.tan(sign * (np.pi * q - np.pi / 2)) * scale + loc
    return quantile


def _cauchy_flip(fn, name):
    def flipped(x, loc=0, scale=1):
        x, loc, scale = promote(name, x, loc, scale)
        return fn(-x, -loc, scale)
    return flipped


cauchy = distribution(
    "cauchy", "The Cauchy distribution.", logpdf=_cauchy_logpdf, pdf=_exp(_cauchy_logpdf),
    cdf=_cauchy_cdf, logcdf=_log(_cauchy_cdf), sf=_cauchy_flip(_cauchy_cdf, "cauchy.sf"),
    logsf=_cauchy_flip(_log(_cauchy_cdf), "cauchy.logsf"),
    ppf=_cauchy_q("cauchy.ppf", 1), isf=_cauchy_q("cauchy.isf", -1))


def _laplace_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("laplace.logpdf", x, loc, scale)
    return -(jnp.abs(x - loc) / scale + jnp.log(2 * scale))


def _laplace_cdf(x, loc=0, scale=1):
    z, *_ = _z("laplace.cdf", x, loc, scale)
    return jnp.where(z <= 0, 0.5 * jnp.exp(z), 1 - 0.5 * jnp.exp(-z))


laplace = distribution(
    "laplace", "The Laplace (double exponential) distribution.", logpdf=_laplace_logpdf,
    pdf=_exp(_laplace_logpdf), cdf=_laplace_cdf)


def _logistic_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _z("logistic.logpdf", x, loc, scale)
    return -2 * jnp.logaddexp(z / 2, -z / 2) - jnp.log(scale)


def _logistic_q(name, sign):
    def quantile(x, loc=0, scale=1):   # unchecked outside [0, 1]; JAX names it x
        x, loc, scale = promote(name, x, loc, scale)
        return sign * special.logit(x) * scale + loc
    return quantile


logistic = distribution(
    "logistic", "The logistic distribution.", logpdf=_logistic_logpdf,
    pdf=_exp(_logistic_logpdf),
    cdf=lambda x, loc=0, scale=1: special.expit(_z("logistic.cdf", x, loc, scale)[0]),
    sf=lambda x, loc=0, scale=1: special.expit(-_z("logistic.sf", x, loc, scale)[0]),
    ppf=_logistic_q("logistic.ppf", 1), isf=_logistic_q("logistic.isf", -1))


# ---- gumbel_r, gumbel_l: nan where scale <= 0 ----

def _gumbel(name, body):
    def fn(x, loc=0, scale=1):
        z, x, loc, scale = _z(name, x, loc, scale)
        return jnp.where(scale > 0, body(z, scale), _nan)
    return fn


def _gumbel_ppf(name, right):
    def ppf(p, loc=0, scale=1):
        p, loc, scale = promote(name, p, loc, scale)
        t = scale * jnp.log(special.xlogy(-1, p) if right else special.xlog1py(-1, -p))
        return jnp.where((p > 0) & (p < 1), loc - t if right else loc + t, _nan)
    return ppf


_gumbel_r_logpdf = _gumbel("gumbel_r.logpdf",
                           lambda z, s: special.xlogy(-1, s) - (z + jnp.exp(-z)))
_gumbel_r_logcdf = _gumbel("gumbel_r.logcdf", lambda z, s: -jnp.exp(-z))
gumbel_r = distribution(
    "gumbel_r", "The right-skewed Gumbel distribution.", logpdf=_gumbel_r_logpdf,
    pdf=_exp(_gumbel_r_logpdf), cdf=_exp(_gumbel_r_logcdf), logcdf=_gumbel_r_logcdf,
    sf=_gumbel("gumbel_r.sf", lambda z, s: 1 - jnp.exp(-jnp.exp(-z))),
    logsf=_gumbel("gumbel_r.logsf", lambda z, s: _log1mexp(jnp.exp(-z))),
    ppf=_gumbel_ppf("gumbel_r.ppf", True))
_gumbel_l_logpdf = _gumbel("gumbel_l.logpdf",
                           lambda z, s: special.xlogy(-1, s) + (z - jnp.exp(z)))
_gumbel_l_logsf = _gumbel("gumbel_l.logsf", lambda z, s: -jnp.exp(z))
_gumbel_l_logcdf = _gumbel("gumbel_l.logcdf", lambda z, s: jnp.log(-jnp.expm1(-jnp.exp(z))))
gumbel_l = distribution(
    "gumbel_l", "The left-skewed Gumbel distribution.", logpdf=_gumbel_l_logpdf,
    pdf=_exp(_gumbel_l_logpdf), cdf=_exp(_gumbel_l_logcdf), logcdf=_gumbel_l_logcdf,
    sf=_exp(_gumbel_l_logsf), logsf=_gumbel_l_logsf, ppf=_gumbel_ppf("gumbel_l.ppf", False))


# ---- pareto, gennorm ----

def _pareto_logpdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote("pareto.logpdf", x, b, loc, scale)
    out = -(jnp.log(scale / b) + (b + 1) * jnp.log((x - loc) / scale))
    return jnp.where(x < loc + scale, -_inf, out)


def _pareto(name, body, below):
    def fn(x, b, loc=0, scale=1):
        x, b, loc, scale = promote(name, x, b, loc, scale)
        return jnp.where(x < loc + scale, below, body((x - loc) / scale, b))
    return fn


def _pareto_ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = promote("pareto.ppf", q, b, loc, scale)
    return jnp.where(_bad_q(q), _nan, loc + scale * (1 - q) ** -(1 / b))


_pareto_logsf = _pareto("pareto.logsf", lambda y, b: -(b * jnp.log(y)), 0)
pareto = distribution(
    "pareto", "The Pareto distribution with shape ``b``.", logpdf=_pareto_logpdf,
    pdf=_exp(_pareto_logpdf), cdf=_pareto("pareto.cdf", lambda y, b: 1 - y ** -b, 0),
    logcdf=_pareto("pareto.logcdf", lambda y, b: jnp.log1p(-(y ** -b)), -_inf),
    sf=_exp(_pareto_logsf), logsf=_pareto_logsf, ppf=_pareto_ppf)


def _gennorm_logpdf(x, beta):
    x, beta = promote("gennorm.logpdf", x, beta)
    return jnp.log(0.5 * beta) - special.gammaln(1 / beta) - jnp.abs(x) ** beta


def _gennorm_cdf(x, beta):
    x, beta = promote("gennorm.cdf", x, beta)
    return 0.5 * (1 + jnp.sign(x) * special.gammainc(1 / beta, jnp.abs(x) ** beta))


gennorm = distribution(
    "gennorm", "The generalized normal distribution with shape ``beta`` (no loc/scale, as "
    "in JAX).", logpdf=_gennorm_logpdf, pdf=_exp(_gennorm_logpdf), cdf=_gennorm_cdf)
