"""Multivariate distributions of ``jax.scipy.stats``: multivariate_normal, dirichlet."""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.scipy import linalg, special
from xform.numpy._util import promote_dtypes
from xform.scipy.stats._common import distribution, neg_inf


def _mvn_logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote_dtypes("multivariate_normal.logpdf", x, mean, cov, to="inexact")
    if not mean.shape:  # a univariate normal with variance cov
        return -0.5 * (x - mean) ** 2 / cov - 0.5 * (np.log(2 * np.pi) + jnp.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if not cov.shape:  # cov * identity
        return (-0.5 * jnp.sum(y * y, axis=-1) / cov
                - n / 2 * (np.log(2 * np.pi) + jnp.log(cov)))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes: mean "
                         f"{mean.shape} needs cov of shape (..., {n}, {n}), got {cov.shape}")
    chol = jnp.linalg.cholesky(cov)
    if cov.ndim == 2:  # one factor: solve for every point at once
        flat = jnp.reshape(y, (-1, n)).T
        z = jnp.reshape(linalg.solve_triangular(chol, flat, lower=True).T, y.shape)
    else:
        solve = jnp.vectorize(lambda c, v: linalg.solve_triangular(c, v, lower=True),
                              signature="(n,n),(n)->(n)")
        z = solve(chol, y)
    log_det = jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * jnp.sum(z * z, axis=-1) - n / 2 * np.log(2 * np.pi) - log_det


multivariate_normal = distribution(
    "multivariate_normal", """The multivariate normal distribution ``N(mean, cov)``;
    ``x``'s last axis holds the ``n`` coordinates (``cov`` may be a scalar: ``cov * I``).

    >>> import xform.numpy as jnp
    >>> from xform.scipy.stats import multivariate_normal
    >>> multivariate_normal.logpdf(jnp.zeros(2), jnp.zeros(2), jnp.eye(2))
    Array(-1.837877, dtype=float32)
    """,
    logpdf=_mvn_logpdf,
    pdf=lambda x, mean, cov: jnp.exp(_mvn_logpdf(x, mean, cov)))


def _dirichlet_logpdf(x, alpha):
    x, alpha = promote_dtypes("dirichlet.logpdf", x, alpha, to="inexact")
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError("`x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:  # the last coordinate is implied
        x = jnp.concatenate([x, (1 - jnp.sum(x, axis=0))[None]], axis=0)
    a = lax.expand_dims(alpha, tuple(range(1, x.ndim))) if x.ndim > 1 else alpha
    normalize = jnp.sum(special.gammaln(alpha)) - special.gammaln(jnp.sum(alpha))
    out = jnp.sum(special.xlogy(a - 1, x), axis=0) - normalize
    simplex = jnp.all(x > 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1) < 1e-6)
    return jnp.where(simplex, out, neg_inf(out))


dirichlet = distribution(
    "dirichlet", "The Dirichlet distribution; ``x``'s first axis holds the categories.",
    logpdf=_dirichlet_logpdf, pdf=lambda x, alpha: jnp.exp(_dirichlet_logpdf(x, alpha)))
