"""``xform.scipy.special``: the special functions of ``jax.scipy.special``, composed
from xform.lax (private modules by family, re-exported here)."""
from xform.scipy.special._basic import (
    betainc, betaln, digamma, entr, erf, erfc, erfinv, expit, gammainc, gammaincc, gammaln,
    log_ndtr, log_softmax, logit, logsumexp, ndtr, ndtri, softmax, xlog1py, xlogy)
from xform.scipy.special._gamma import (
    bernoulli, beta, comb, factorial, gamma, gammasgn, loggamma, multigammaln, poch,
    polygamma, zeta)
from xform.scipy.special._misc import (
    bessel_jn, boxcox, boxcox1p, dawsn, erfcx, i0, i0e, i1, i1e, kl_div, owens_t, rel_entr,
    wofz)
from xform.scipy.special._expint import exp1, expi, expn, sici, spence
from xform.scipy.special._hyper import hyp1f1, hyp2f1
from xform.scipy.special._fresnel import fresnel
from xform.scipy.special._sph_harm import sph_harm_y

__all__ = [
    "bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb",
    "dawsn", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp1", "expi", "expit",
    "expn", "factorial", "fresnel", "gamma", "gammainc", "gammaincc", "gammaln",
    "gammasgn", "hyp1f1", "hyp2f1", "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr",
    "log_softmax", "loggamma", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
    "owens_t", "poch", "polygamma", "rel_entr", "sici", "softmax", "spence", "sph_harm_y",
    "wofz", "xlog1py", "xlogy", "zeta",
]
