"""``xform.scipy.stats``: the probability distributions of ``jax.scipy.stats`` that compose
from ``xform.numpy`` and ``xform.scipy.special`` (logpdf/pdf/cdf/... as JAX has them).
Each distribution is a small module (``from xform.scipy.stats import norm``).

>>> from xform.scipy.stats import norm
>>> norm.cdf(0.)
Array(0.5, dtype=float32)
"""
from xform.scipy.stats._continuous import (beta, cauchy, chi2, expon, gamma,  # noqa: F401
                                           gennorm, gumbel_l, gumbel_r, laplace, logistic,
                                           norm, pareto, t, uniform)
from xform.scipy.stats._discrete import (bernoulli, binom, geom, nbinom,  # noqa: F401
                                         poisson)
from xform.scipy.stats._extra import (betabinom, multinomial, truncnorm,  # noqa: F401
                                      vonmises, wrapcauchy)
from xform.scipy.stats._kde import gaussian_kde  # noqa: F401
from xform.scipy.stats._multivariate import dirichlet, multivariate_normal  # noqa: F401
from xform.scipy.stats._summary import mode, rankdata, sem  # noqa: F401
