"""Univariate continuous distributions of ``jax.scipy.stats``, composed from
``xform.numpy`` and ``xform.scipy.special``: each function promotes its arguments to one
inexact dtype and broadcasts them, as JAX does; ``pdf`` is ``exp(logpdf)``.

The CDFs of gamma and chi2 use ``scipy.special.gammainc``/``gammaincc``, beta's
``betainc`` (series and continued fractions in fixed-length loops).
"""
import numpy as np

from xform import numpy as jnp
from xform.scipy import special
from xform.scipy.stats._common import distribution, nan, neg_inf, promote

_LOG_2PI = float(np.log(2 * np.pi))


def _z(name, x, loc, scale):
    x, loc, scale = promote(name, x, loc, scale)
    return (x - loc) / scale, x, loc, scale


def _ppf_domain(q, value):
    return jnp.where((q < 0) | (q > 1), nan(value), value)


# ---- norm ----

def _norm_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _z("norm.logpdf", x, loc, scale)
    return -0.5 * (z * z) - jnp.log(scale) - 0.5 * _LOG_2PI


def _norm_cdf(x, loc=0, scale=1):
    return special.ndtr(_z("norm.cdf", x, loc, scale)[0])


def _norm_logcdf(x, loc=0, scale=1):
    return special.log_ndtr(_z("norm.logcdf", x, loc, scale)[0])


def _norm_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("norm.ppf", q, loc, scale)
    return special.ndtri(q) * scale + loc


norm = distribution(
    "norm", """The normal distribution ``N(loc, scale**2)``.

    >>> from xform.scipy.stats import norm
    >>> norm.logpdf(0.)
    Array(-0.9189385, dtype=float32, weak_type=True)
    """,
    logpdf=_norm_logpdf, pdf=lambda x, loc=0, scale=1: jnp.exp(_norm_logpdf(x, loc, scale)),
    cdf=_norm_cdf, logcdf=_norm_logcdf,
    sf=lambda x, loc=0, scale=1: _norm_cdf(-_as(x), -_as(loc), scale),
    logsf=lambda x, loc=0, scale=1: _norm_logcdf(-_as(x), -_as(loc), scale),
    ppf=_norm_ppf, isf=lambda q, loc=0, scale=1: _norm_ppf(1 - _as(q), loc, scale))


def _as(x):
    return x if hasattr(x, "shape") else jnp.asarray(x)


# ---- uniform ----

def _uniform_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("uniform.logpdf", x, loc, scale)
    inside = (x >= loc) & (x <= loc + scale)
    return jnp.where(inside, -jnp.log(scale) + 0 * x, neg_inf(x))


def _uniform_cdf(x, loc=0, scale=1):
    z, *_ = _z("uniform.cdf", x, loc, scale)
    return jnp.clip(z, 0, 1)


def _uniform_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("uniform.ppf", q, loc, scale)
    return _ppf_domain(q, q * scale + loc)


uniform = distribution(
    "uniform", "The uniform distribution on ``[loc, loc + scale]``.",
    logpdf=_uniform_logpdf,
    pdf=lambda x, loc=0, scale=1: jnp.exp(_uniform_logpdf(x, loc, scale)),
    cdf=_uniform_cdf, ppf=_uniform_ppf)


# ---- expon ----

def _expon_logpdf(x, loc=0, scale=1):
    z, x, _, scale = _z("expon.logpdf", x, loc, scale)
    return jnp.where(z < 0, neg_inf(z), -z - jnp.log(scale))


def _expon_cdf(x, loc=0, scale=1):
    z, *_ = _z("expon.cdf", x, loc, scale)
    return jnp.where(z < 0, jnp.zeros_like(z), -jnp.expm1(-jnp.maximum(z, 0)))


def _expon_logsf(x, loc=0, scale=1):
    z, *_ = _z("expon.logsf", x, loc, scale)
    return jnp.where(z < 0, jnp.zeros_like(z), -z)


def _expon_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("expon.ppf", q, loc, scale)
    return _ppf_domain(q, -jnp.log1p(-q) * scale + loc)


expon = distribution(
    "expon", "The exponential distribution with rate ``1 / scale``, shifted by ``loc``.",
    logpdf=_expon_logpdf,
    pdf=lambda x, loc=0, scale=1: jnp.exp(_expon_logpdf(x, loc, scale)),
    cdf=_expon_cdf, logcdf=lambda x, loc=0, scale=1: jnp.log(_expon_cdf(x, loc, scale)),
    sf=lambda x, loc=0, scale=1: jnp.exp(_expon_logsf(x, loc, scale)),
    logsf=_expon_logsf, ppf=_expon_ppf)


# ---- gamma, chi2, beta, t (densities only) ----

def _gamma_logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote("gamma.logpdf", x, a, loc, scale)
    y = (x - loc) / scale
    out = special.xlogy(a - 1, y) - y - special.gammaln(a) - jnp.log(scale)
    return jnp.where(x < loc, neg_inf(out), out)


def _gamma_tails(name, x, a, loc, scale):
    """(cdf, sf) of the gamma distribution; 0 and 1 below ``loc``."""
    x, a, loc, scale = promote(name, x, a, loc, scale)
    y = jnp.maximum((x - loc) / scale, 0)
    return special.gammainc(a, y), special.gammaincc(a, y)


gamma = distribution(
    "gamma", "The gamma distribution with shape ``a``.", logpdf=_gamma_logpdf,
    pdf=lambda x, a, loc=0, scale=1: jnp.exp(_gamma_logpdf(x, a, loc, scale)),
    cdf=lambda x, a, loc=0, scale=1: _gamma_tails("gamma.cdf", x, a, loc, scale)[0],
    logcdf=lambda x, a, loc=0, scale=1: jnp.log(
        _gamma_tails("gamma.logcdf", x, a, loc, scale)[0]),
    sf=lambda x, a, loc=0, scale=1: _gamma_tails("gamma.sf", x, a, loc, scale)[1],
    logsf=lambda x, a, loc=0, scale=1: jnp.log(
        _gamma_tails("gamma.logsf", x, a, loc, scale)[1]))


def _chi2_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half = df / 2
    out = (special.xlogy(half - 1, y) - y / 2 - special.gammaln(half) - half * np.log(2.0)
           - jnp.log(scale))
    return jnp.where(x < loc, neg_inf(out), out)


def _chi2_tails(name, x, df, loc, scale):
    x, df, loc, scale = promote(name, x, df, loc, scale)
    y = jnp.maximum((x - loc) / scale, 0)
    return special.gammainc(df / 2, y / 2), special.gammaincc(df / 2, y / 2)


chi2 = distribution(
    "chi2", "The chi-squared distribution with ``df`` degrees of freedom.",
    logpdf=_chi2_logpdf,
    pdf=lambda x, df, loc=0, scale=1: jnp.exp(_chi2_logpdf(x, df, loc, scale)),
    cdf=lambda x, df, loc=0, scale=1: _chi2_tails("chi2.cdf", x, df, loc, scale)[0],
    logcdf=lambda x, df, loc=0, scale=1: jnp.log(
        _chi2_tails("chi2.logcdf", x, df, loc, scale)[0]),
    sf=lambda x, df, loc=0, scale=1: _chi2_tails("chi2.sf", x, df, loc, scale)[1],
    logsf=lambda x, df, loc=0, scale=1: jnp.log(
        _chi2_tails("chi2.logsf", x, df, loc, scale)[1]))


def _beta_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("beta.logpdf", x, a, b, loc, scale)
    y = (x - loc) / scale
    out = (special.xlogy(a - 1, y) + special.xlog1py(b - 1, -y) - special.betaln(a, b)
           - jnp.log(scale))
    return jnp.where((x < loc) | (x > loc + scale), neg_inf(out), out)


def _beta_tails(name, x, a, b, loc, scale):
    x, a, b, loc, scale = promote(name, x, a, b, loc, scale)
    y = jnp.clip((x - loc) / scale, 0, 1)
    return special.betainc(a, b, y), special.betainc(b, a, 1 - y)


beta = distribution(
    "beta", "The beta distribution with shapes ``a``, ``b`` on ``[loc, loc + scale]``.",
    logpdf=_beta_logpdf,
    pdf=lambda x, a, b, loc=0, scale=1: jnp.exp(_beta_logpdf(x, a, b, loc, scale)),
    cdf=lambda x, a, b, loc=0, scale=1: _beta_tails("beta.cdf", x, a, b, loc, scale)[0],
    logcdf=lambda x, a, b, loc=0, scale=1: jnp.log(
        _beta_tails("beta.logcdf", x, a, b, loc, scale)[0]),
    sf=lambda x, a, b, loc=0, scale=1: _beta_tails("beta.sf", x, a, b, loc, scale)[1],
    logsf=lambda x, a, b, loc=0, scale=1: jnp.log(
        _beta_tails("beta.logsf", x, a, b, loc, scale)[1]))


def _t_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote("t.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half_df1 = (df + 1) / 2
    norm_term = (special.gammaln(df / 2) - special.gammaln(half_df1)
                 + 0.5 * jnp.log(df * np.pi * scale * scale))
    return -(norm_term + half_df1 * jnp.log1p(y * y / df))


t = distribution(
    "t", "Student's t distribution with ``df`` degrees of freedom.", logpdf=_t_logpdf,
    pdf=lambda x, df, loc=0, scale=1: jnp.exp(_t_logpdf(x, df, loc, scale)))


# ---- cauchy, laplace, logistic ----

def _cauchy_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _z("cauchy.logpdf", x, loc, scale)
    return -np.log(np.pi) - jnp.log(scale) - jnp.log1p(z * z)


def _cauchy_cdf(x, loc=0, scale=1):
    z, *_ = _z("cauchy.cdf", x, loc, scale)
    return 0.5 + jnp.arctan(z) / np.pi


def _cauchy_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("cauchy.ppf", q, loc, scale)
    return _ppf_domain(q, loc + scale * jnp.tan(np.pi * (q - 0.5)))


cauchy = distribution(
    "cauchy", "The Cauchy distribution.", logpdf=_cauchy_logpdf,
    pdf=lambda x, loc=0, scale=1: jnp.exp(_cauchy_logpdf(x, loc, scale)),
    cdf=_cauchy_cdf, logcdf=lambda x, loc=0, scale=1: jnp.log(_cauchy_cdf(x, loc, scale)),
    sf=lambda x, loc=0, scale=1: _cauchy_cdf(-_as(x), -_as(loc), scale),
    logsf=lambda x, loc=0, scale=1: jnp.log(_cauchy_cdf(-_as(x), -_as(loc), scale)),
    ppf=_cauchy_ppf, isf=lambda q, loc=0, scale=1: _cauchy_ppf(1 - _as(q), loc, scale))


def _laplace_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _z("laplace.logpdf", x, loc, scale)
    return -jnp.log(2 * scale) - jnp.abs(z)


def _laplace_cdf(x, loc=0, scale=1):
    z, *_ = _z("laplace.cdf", x, loc, scale)
    half_exp = 0.5 * jnp.exp(-jnp.abs(z))
    return jnp.where(z < 0, half_exp, 1 - half_exp)


laplace = distribution(
    "laplace", "The Laplace (double exponential) distribution.", logpdf=_laplace_logpdf,
    pdf=lambda x, loc=0, scale=1: jnp.exp(_laplace_logpdf(x, loc, scale)),
    cdf=_laplace_cdf)


def _logistic_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _z("logistic.logpdf", x, loc, scale)
    return -2 * jnp.logaddexp(z / 2, -z / 2) - jnp.log(scale)


def _logistic_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("logistic.ppf", q, loc, scale)
    return _ppf_domain(q, special.logit(q) * scale + loc)


logistic = distribution(
    "logistic", "The logistic distribution.", logpdf=_logistic_logpdf,
    pdf=lambda x, loc=0, scale=1: jnp.exp(_logistic_logpdf(x, loc, scale)),
    cdf=lambda x, loc=0, scale=1: special.expit(_z("logistic.cdf", x, loc, scale)[0]),
    sf=lambda x, loc=0, scale=1: special.expit(-_z("logistic.sf", x, loc, scale)[0]),
    ppf=_logistic_ppf,
    isf=lambda q, loc=0, scale=1: _logistic_ppf(1 - _as(q), loc, scale))


# ---- gumbel_r, gumbel_l, pareto, gennorm ----

def _gumbel_r_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _z("gumbel_r.logpdf", x, loc, scale)
    return -z - jnp.exp(-z) - jnp.log(scale)


gumbel_r = distribution(
    "gumbel_r", "The right-skewed Gumbel distribution.", logpdf=_gumbel_r_logpdf,
    pdf=lambda x, loc=0, scale=1: jnp.exp(_gumbel_r_logpdf(x, loc, scale)),
    cdf=lambda x, loc=0, scale=1: jnp.exp(-jnp.exp(-_z("gumbel_r.cdf", x, loc, scale)[0])),
    logcdf=lambda x, loc=0, scale=1: -jnp.exp(-_z("gumbel_r.logcdf", x, loc, scale)[0]),
    sf=lambda x, loc=0, scale=1: -jnp.expm1(-jnp.exp(-_z("gumbel_r.sf", x, loc, scale)[0])),
    logsf=lambda x, loc=0, scale=1: jnp.log(
        -jnp.expm1(-jnp.exp(-_z("gumbel_r.logsf", x, loc, scale)[0]))),
    ppf=lambda q, loc=0, scale=1: _gumbel_ppf("gumbel_r.ppf", q, loc, scale, True))


def _gumbel_ppf(name, q, loc, scale, right):
    q, loc, scale = promote(name, q, loc, scale)
    y = -jnp.log(-jnp.log(q)) if right else jnp.log(-jnp.log1p(-q))
    return _ppf_domain(q, loc + scale * y)


def _gumbel_l_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _z("gumbel_l.logpdf", x, loc, scale)
    return z - jnp.exp(z) - jnp.log(scale)


gumbel_l = distribution(
    "gumbel_l", "The left-skewed Gumbel distribution.", logpdf=_gumbel_l_logpdf,
    pdf=lambda x, loc=0, scale=1: jnp.exp(_gumbel_l_logpdf(x, loc, scale)),
    cdf=lambda x, loc=0, scale=1: -jnp.expm1(-jnp.exp(_z("gumbel_l.cdf", x, loc, scale)[0])),
    logcdf=lambda x, loc=0, scale=1: jnp.log(
        -jnp.expm1(-jnp.exp(_z("gumbel_l.logcdf", x, loc, scale)[0]))),
    sf=lambda x, loc=0, scale=1: jnp.exp(-jnp.exp(_z("gumbel_l.sf", x, loc, scale)[0])),
    logsf=lambda x, loc=0, scale=1: -jnp.exp(_z("gumbel_l.logsf", x, loc, scale)[0]),
    ppf=lambda q, loc=0, scale=1: _gumbel_ppf("gumbel_l.ppf", q, loc, scale, False))


def _pareto_logpdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote("pareto.logpdf", x, b, loc, scale)
    y = (x - loc) / scale
    out = jnp.log(b) - (b + 1) * jnp.log(jnp.maximum(y, 1)) - jnp.log(scale)
    return jnp.where(y < 1, neg_inf(out), out)


def _pareto_logsf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote("pareto.logsf", x, b, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < 1, jnp.zeros_like(y), -b * jnp.log(jnp.maximum(y, 1)))


def _pareto_ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = promote("pareto.ppf", q, b, loc, scale)
    return _ppf_domain(q, scale * (1 - q) ** (-1 / b) + loc)


pareto = distribution(
    "pareto", "The Pareto distribution with shape ``b``.", logpdf=_pareto_logpdf,
    pdf=lambda x, b, loc=0, scale=1: jnp.exp(_pareto_logpdf(x, b, loc, scale)),
    cdf=lambda x, b, loc=0, scale=1: -jnp.expm1(_pareto_logsf(x, b, loc, scale)),
    logcdf=lambda x, b, loc=0, scale=1: jnp.log(-jnp.expm1(_pareto_logsf(x, b, loc, scale))),
    sf=lambda x, b, loc=0, scale=1: jnp.exp(_pareto_logsf(x, b, loc, scale)),
    logsf=_pareto_logsf, ppf=_pareto_ppf)


def _gennorm_logpdf(x, beta, loc=0, scale=1):
    x, beta, loc, scale = promote("gennorm.logpdf", x, beta, loc, scale)
    z = jnp.abs((x - loc) / scale)
    return (jnp.log(beta) - np.log(2.0) - special.gammaln(1 / beta) - jnp.log(scale)
            - z ** beta)


gennorm = distribution(
    "gennorm", "The generalized normal distribution with shape ``beta``.",
    logpdf=_gennorm_logpdf,
    pdf=lambda x, beta, loc=0, scale=1: jnp.exp(_gennorm_logpdf(x, beta, loc, scale)))
