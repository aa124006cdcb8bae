"""Continuous samplers built from uniform/normal draws by JAX's formulas: weibull_min,
maxwell, double_sided_maxwell, multivariate_normal, orthogonal, triangular, wald."""
import operator

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core.dtypes import to_inexact_dtype
from xform.random._core import (_bcast_param, _check_all_safe_to_cast, _float_dtype, _jit,
                                _key_data, _shape_from, _static_shape, normal, split,
                                uniform)
from xform.random._derived import rademacher

__all__ = ["weibull_min", "maxwell", "double_sided_maxwell", "multivariate_normal",
           "orthogonal", "triangular", "wald"]


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples ``scale * (-log1p(-u)) ** (1 / concentration)``.

    >>> import xform.random as random
    >>> random.weibull_min(random.PRNGKey(0), 1.0, 2.0, (3,)).shape
    (3,)
    """
    kd = _key_data("weibull_min", key)
    dtype = _float_dtype("weibull_min", dtype)
    return _weibull_min(kd, scale, concentration, _static_shape("weibull_min", shape), dtype)


@_jit(3, 4)
def _weibull_min(key, scale, concentration, shape, dtype):
    u = uniform(key, shape, dtype, 0, 1)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale   # inverse CDF


def maxwell(key, shape=(), dtype=None):
    """Maxwell samples: the norm of a 3-vector of standard normals.

    >>> import xform.random as random
    >>> random.maxwell(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    kd = _key_data("maxwell", key)
    dtype = _float_dtype("maxwell", dtype)
    return _maxwell(kd, _static_shape("maxwell", shape), dtype)


@_jit(1, 2)
def _maxwell(key, shape, dtype):
    return jnp.linalg.norm(normal(key, shape + (3,), dtype), axis=-1)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Double-sided Maxwell samples ``sign * maxwell * scale + loc``.

    NB: as JAX, a non-empty ``shape`` is *prefixed* to the parameters' broadcast shape.

    >>> import xform.random as random
    >>> random.double_sided_maxwell(random.PRNGKey(0), 0.0, 1.0, (2,)).shape
    (2,)
    """
    kd = _key_data("double_sided_maxwell", key)
    dtype = _float_dtype("double_sided_maxwell", dtype)
    shape = _static_shape("double_sided_maxwell", shape)
    return _double_sided_maxwell(kd, loc, scale, shape, dtype)


@_jit(3, 4)
def _double_sided_maxwell(key, loc, scale, shape, dtype):
    params_shape = tuple(np.broadcast_shapes(np.shape(loc), np.shape(scale)))
    shape = (shape or params_shape) + params_shape
    k_maxwell, k_sign = split(key)
    m = maxwell(k_maxwell, shape, dtype)
    sign = rademacher(k_sign, shape, dtype)
    return sign * m * scale + loc


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Multivariate normal samples ``mean + factor @ z`` with ``factor factor^T = cov``.

    Args:
      key: a PRNG key.
      mean: ``(..., n)`` means.
      cov: ``(..., n, n)`` covariances.
      shape: batch shape (broadcast with ``mean.shape[:-1]`` and ``cov.shape[:-2]``).
      dtype: float dtype (default: that of ``mean``).
      method: ``"cholesky"``, ``"eigh"`` or ``"svd"`` (how ``factor`` is computed).

    >>> import numpy as np, xform.random as random
    >>> random.multivariate_normal(random.PRNGKey(0), np.zeros(2), np.eye(2), (3,)).shape
    (3, 2)
    """
    kd = _key_data("multivariate_normal", key)
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    mean, cov = jnp.asarray(mean), jnp.asarray(cov)
    dt = to_inexact_dtype(jnp.result_type(mean, cov))   # JAX's promote_dtypes_inexact
    mean, cov = mean.astype(dt), cov.astype(dt)
    dtype = mean.dtype if dtype is None else _float_dtype("multivariate_normal", dtype)
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{cov.ndim}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {cov.shape}.")
    batch = tuple(np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2]))
    if shape is not None:
        shape = _static_shape("multivariate_normal", shape)
        if tuple(np.broadcast_shapes(shape, batch)) != shape:
            raise ValueError(
                f"multivariate_normal parameter shapes must be broadcast-compatible with "
                f"shape argument, and the result of broadcasting the shapes must equal the "
                f"shape argument, but got result {np.broadcast_shapes(shape, batch)} for "
                f"shape argument {shape}.")
    return _multivariate_normal(kd, mean, cov, shape, dtype, method)


@_jit(3, 4, 5)
def _multivariate_normal(key, mean, cov, shape, dtype, method):
    if shape is None:
        shape = tuple(np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2]))
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = jnp.linalg.cholesky(cov)
    z = normal(key, shape + mean.shape[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, z)


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Haar-random ``(n, m)`` matrices with orthonormal columns (or rows if n < m).

    >>> import numpy as np, xform.random as random
    >>> q = random.orthogonal(random.PRNGKey(0), 3)
    >>> bool(np.allclose(np.asarray(q @ q.T), np.eye(3), atol=1e-5))
    True
    """
    kd = _key_data("orthogonal", key)
    shape = _static_shape("orthogonal", shape)
    dtype = _float_dtype("orthogonal", dtype, complex_ok=True)   # complex: unitary
    n = _static_int("orthogonal", "n", n)
    m = n if m is None else _static_int("orthogonal", "m", m)
    return _orthogonal(kd, n, m, shape, dtype)


@_jit(1, 2, 3, 4)
def _orthogonal(key, n, m, shape, dtype):
    z = normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x


def _static_int(name, argname, v):
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{name}: {argname} must be a static integer (not a traced value "
                        f"under jit), got {v!r}.") from None


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular samples on ``[left, right]`` peaking at ``mode`` (inverse CDF).

    >>> import xform.random as random
    >>> random.triangular(random.PRNGKey(0), 0.0, 0.5, 1.0, (3,)).shape
    (3,)
    """
    kd = _key_data("triangular", key)
    dtype = _float_dtype("triangular", dtype)
    shape = _shape_from("triangular", shape, left, mode, right)
    _check_all_safe_to_cast("triangular", dtype, left, mode, right)
    return _triangular(kd, left, mode, right, shape, dtype)


@_jit(4, 5, inline=True)
def _triangular(key, left, mode, right, shape, dtype):
    left, right, mode = (_bcast_param(v, dtype, shape) for v in (left, right, mode))
    fc = (mode - left) / (right - left)
    u = uniform(key, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, out1, out2)


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) samples (Michael, Schucany and Haas).

    >>> import xform.random as random
    >>> random.wald(random.PRNGKey(0), 1.0, (3,)).shape
    (3,)
    """
    kd = _key_data("wald", key)
    dtype = _float_dtype("wald", dtype)
    shape = _shape_from("wald", shape, mean)
    _check_all_safe_to_cast("wald", dtype, mean)
    return _wald(kd, mean, shape, dtype)


@_jit(2, 3)
def _wald(key, mean, shape, dtype):
    k1, k2 = split(key, 2)
    mean = jnp.broadcast_to(lax.convert_element_type(mean, dtype), shape)
    v = normal(k1, shape, dtype)
    z = uniform(k2, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)
