"""``gaussian_kde``: JAX's Gaussian kernel density estimator (a frozen pytree, so it
crosses ``jit``/``vmap``). As in JAX, the bandwidth is fixed at construction
(``set_bandwidth`` and n-d ``integrate_box`` raise NotImplementedError)."""
import dataclasses
import functools

import numpy as np

from xform import numpy as jnp
from xform import random
from xform.core import dtypes
from xform.core.pytree_registry import register_pytree_node
from xform.numpy import _util
from xform.scipy import linalg, special
from xform.transforms.vmap import vmap


@dataclasses.dataclass(frozen=True, init=False)
class gaussian_kde:
    """Gaussian kernel density estimator (``scipy.stats.gaussian_kde``).

    Args:
      dataset: real data, shape ``(n,)`` or ``(d, n)``.
      bw_method: ``"scott"`` (default), ``"silverman"``, a scalar factor, or a callable
        taking the estimator and returning the factor.
      weights: optional weights of shape ``(n,)`` (normalised to sum to 1).

    >>> import xform.numpy as jnp
    >>> kde = gaussian_kde(jnp.array([0., 1., 2., 4.]))
    >>> kde.integrate_box_1d(-100., 100.)
    Array(1., dtype=float32)
    """
    neff: object
    dataset: object
    weights: object
    covariance: object
    inv_cov: object

    def __init__(self, dataset, bw_method=None, weights=None):
        _util.check_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if dtypes.issubdtype(dataset.dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is not None:
            _util.check_arraylike("gaussian_kde", weights)
            dataset, weights = _util.promote_dtypes("gaussian_kde", dataset, weights,
                                                    to="inexact")
            weights = jnp.atleast_1d(weights)
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if len(weights) != n:
                raise ValueError("`weights` input should be of length n")
        else:
            dataset, = _util.promote_dtypes("gaussian_kde", dataset, to="inexact")
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        object.__setattr__(self, "dataset", dataset)
        object.__setattr__(self, "weights", weights)
        neff = 1 / jnp.sum(weights ** 2)
        object.__setattr__(self, "neff", neff)

        bw_method = "scott" if bw_method is None else bw_method
        if isinstance(bw_method, str) and bw_method == "scott":
            factor = jnp.power(neff, -1. / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = jnp.power(neff * (d + 2) / 4.0, -1. / (d + 4))
        elif jnp.isscalar(bw_method) and not isinstance(bw_method, str):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError(
                "`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")
        data_cov = jnp.atleast_2d(jnp.cov(dataset, rowvar=1, bias=False, aweights=weights))
        object.__setattr__(self, "covariance", data_cov * factor ** 2)
        object.__setattr__(self, "inv_cov", jnp.linalg.inv(data_cov) / factor ** 2)

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def evaluate(self, points):
        """The estimated density at ``points`` (shape ``(d, m)``, or ``(m,)`` when d=1)."""
        _util.check_arraylike("evaluate", points)
        points = self._reshape_points(points)
        return _kernel_eval(False, self.dataset.T, self.weights[:, None], points.T,
                            self.inv_cov)[:, 0]

    __call__ = pdf = evaluate

    def logpdf(self, x):
        """The log of the estimated density (a logsumexp, so far tails stay finite)."""
        _util.check_arraylike("logpdf", x)
        x = self._reshape_points(x)
        return _kernel_eval(True, self.dataset.T, self.weights[:, None], x.T,
                            self.inv_cov)[:, 0]

    def integrate_gaussian(self, mean, cov):
        """The integral of the density times the Gaussian ``N(mean, cov)``."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        chol = linalg.cho_factor(self.covariance + cov)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol[0])))
        return _kernel_convolve(chol, norm, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low, high):
        """The probability mass between scalar limits ``low`` and ``high`` (d=1 only)."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        low = jnp.squeeze((low - self.dataset) / sigma)
        high = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (special.ndtr(high) - special.ndtr(low)))

    def integrate_kde(self, other):
        """The integral of the product of this density and ``other``'s."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        chol = linalg.cho_factor(self.covariance + other.covariance)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol[0])))
        sm, lg = (self, other) if self.n < other.n else (other, self)
        conv = functools.partial(_kernel_convolve, chol, norm, lg.dataset, lg.weights)
        return jnp.sum(vmap(conv, in_axes=1)(sm.dataset) * sm.weights)

    def resample(self, key, shape=()):
        """Draws of shape ``(d,) + shape``: a weighted data point plus kernel noise."""
        ind_key, eps_key = random.split(key)
        ind = random.choice(ind_key, self.n, shape=shape, p=self.weights)
        eps = random.multivariate_normal(eps_key, jnp.zeros(self.d, self.covariance.dtype),
                                         self.covariance, shape=shape,
                                         dtype=self.dataset.dtype).T
        return self.dataset[:, ind] + eps

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        """Not implemented (as in JAX): use ``integrate_box_1d``."""
        del low_bounds, high_bounds, maxpts
        raise NotImplementedError(
            "only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        """Not implemented (as in JAX): the estimator is immutable; build a new one."""
        del bw_method
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

    def _reshape_points(self, points):
        if dtypes.issubdtype(jnp.result_type(points), np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                points = jnp.reshape(points, (self.d, 1))
            else:
                raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points


def _kde_flatten(kde):
    return (kde.neff, kde.dataset, kde.weights, kde.covariance, kde.inv_cov), None


def _kde_unflatten(_, children):
    kde = gaussian_kde.__new__(gaussian_kde)
    for field, value in zip(("neff", "dataset", "weights", "covariance", "inv_cov"),
                            children):
        object.__setattr__(kde, field, value)
    return kde


register_pytree_node(gaussian_kde, _kde_flatten, _kde_unflatten)


def _kernel_convolve(chol, norm, target, weights, mean):
    diff = target - mean[:, None]
    alpha = linalg.cho_solve(chol, diff)
    return norm * jnp.sum(jnp.exp(-0.5 * jnp.sum(diff * alpha, axis=0)) * weights)


def _kernel_eval(in_log, points, values, xi, precision):
    points, values, xi, precision = _util.promote_dtypes(
        "gaussian_kde", points, values, xi, precision, to="inexact")
    d = points.shape[1]
    if xi.shape[1] != d:
        raise ValueError("points and xi must have same trailing dim")
    if precision.shape != (d, d):
        raise ValueError("precision matrix must match data dims")
    # whiten with the precision's Cholesky factor: the kernel is then N(0, I)
    whitening = linalg.cholesky(precision, lower=True)
    points, xi = jnp.dot(points, whitening), jnp.dot(xi, whitening)
    log_norm = jnp.sum(jnp.log(jnp.diag(whitening))) - 0.5 * d * jnp.log(2 * np.pi)

    def kernel(x_test, x_train, y_train):
        arg = log_norm - 0.5 * jnp.sum(jnp.square(x_train - x_test))
        return jnp.log(y_train) + arg if in_log else y_train * jnp.exp(arg)

    reduce = special.logsumexp if in_log else jnp.sum
    return vmap(lambda x: reduce(vmap(kernel, in_axes=(None, 0, 0))(x, points, values),
                                 axis=0))(xi)
