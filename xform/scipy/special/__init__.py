"""``xform.scipy.special``: the special functions of ``jax.scipy.special``, composed
from xform.lax (private modules by family, re-exported here)."""
from xform.scipy.special._basic import (  # noqa: F401
    betainc, betaln, digamma, entr, erf, erfc, erfinv, expit, gammainc, gammaincc, gammaln,
    log_ndtr, log_softmax, logit, logsumexp, ndtr, ndtri, softmax, xlog1py, xlogy)
from xform.scipy.special._gamma import (  # noqa: F401
    bernoulli, beta, comb, factorial, gamma, gammasgn, loggamma, multigammaln, poch,
    polygamma, zeta)
from xform.scipy.special._misc import (  # noqa: F401
    bessel_jn, boxcox, boxcox1p, dawsn, erfcx, i0, i0e, i1, i1e, kl_div, owens_t, rel_entr,
    wofz)
from xform.scipy.special._expint import exp1, expi, expn, sici, spence  # noqa: F401
from xform.scipy.special._hyper import hyp1f1  # noqa: F401
from xform.scipy.special._fresnel import fresnel  # noqa: F401
