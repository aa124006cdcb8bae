"""Samplers derived from uniform/normal draws by JAX's formulas, each a public function
(argument checks) over its jitted impl: exponential, laplace, logistic, gumbel, cauchy,
rademacher, lognormal, pareto, rayleigh."""
import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.lax.prng import bitcast_convert_type
from xform.random._core import (_check_all_safe_to_cast, _float_dtype, _jit, _key_data,
                                _random_bits, _shape_from, _static_shape, _uniform,
                                bernoulli, normal, uniform)
from xform.core import dtypes as _dt

__all__ = ["exponential", "laplace", "logistic", "gumbel", "cauchy", "rademacher",
           "lognormal", "pareto", "rayleigh"]


def exponential(key, shape=(), dtype=None):
    """Standard exponential samples ``-log1p(-u)``.

    >>> import xform.random as random
    >>> bool((random.exponential(random.PRNGKey(0), (4,)) >= 0).all())
    True
    """
    kd = _key_data("exponential", key)
    dtype = _float_dtype("exponential", dtype)
    return _exponential(kd, _static_shape("exponential", shape), dtype)


@_jit(1, 2)
def _exponential(key, shape, dtype):
    u = uniform(key, shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))   # 1 - u: log's domain (0, 1]


def laplace(key, shape=(), dtype=None):
    """Standard Laplace samples.

    >>> import xform.random as random
    >>> random.laplace(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    kd = _key_data("laplace", key)
    dtype = _float_dtype("laplace", dtype)
    return _laplace(kd, _static_shape("laplace", shape), dtype)


@_jit(1, 2)
def _laplace(key, shape, dtype):
    u = uniform(key, shape, dtype, -1.0 + jnp.finfo(dtype).epsneg, 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic samples ``log(u) - log1p(-u)``.

    >>> import xform.random as random
    >>> random.logistic(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    kd = _key_data("logistic", key)
    dtype = _float_dtype("logistic", dtype)
    return _logistic(kd, _static_shape("logistic", shape), dtype)


@_jit(1, 2)
def _logistic(key, shape, dtype):
    x = uniform(key, shape, dtype, jnp.finfo(dtype).tiny, 1.0)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel samples ``-log(-log(u))``.

    ``mode``: ``"low"`` (default: one uniform), ``"high"`` (two, for more dynamic range
    near 0) or ``"highest"`` (float32: 64 random bits, exact near 0 and 1), as JAX's.

    >>> import xform.random as random
    >>> random.gumbel(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    kd = _key_data("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    shape = _static_shape("gumbel", shape)
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return _gumbel(kd, shape, dtype, mode)


@_jit(1, 2, 3)
def _gumbel(key, shape, dtype, mode):
    fi = jnp.finfo(dtype)
    if mode == "highest" and dtype == np.float32:
        # u in (0, 1) from 64 random bits (fixed point, all of them kept near 0 and 1):
        # log1p(-u) below 1/2, log(u) above, from the flipped bits 1 - u there.
        b = _random_bits(key, 32, (2,) + shape)
        neg = lax.bitwise_not(b)
        carry = lax.convert_element_type(lax.eq(neg[1], np.uint32(0xFFFFFFFF)), np.uint32)
        neg = neg + jnp.stack([carry, jnp.ones_like(carry)])   # 1 - u: ~u + 1, 64-bit
        flip = b[0] < np.uint32(1 << 31)
        x = _bits_to_unit_float32(jnp.where(flip, b, neg))
        return jnp.where(flip, -jnp.log(-jnp.log1p(-x)), -jnp.log(-jnp.log(x)))
    if mode in ("high", "highest"):
        # Two uniforms: the second fills the low-order bits below 1/2 (more dynamic range).
        u = _uniform(key, 0.0, 1.0, (2,) + shape, dtype)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high, high + 2 ** -int(fi.nmant) * low + fi.tiny)
        return -jnp.log(-jnp.log1p(-x))
    return -jnp.log(-jnp.log(_uniform(key, fi.tiny, 1.0, shape, dtype)))


def _bits_to_unit_float32(b):
    # uint32[2, ...] (hi, lo) read as the 64-bit fixed-point fraction in (0, 1), rounded
    # down to float32: the leading one found by counting leading zeros, 23 bits after it.
    hiclz, loclz = lax.clz(b[0]), lax.clz(b[1])
    hi, lo = b[0], b[1]
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hiclz),
        jnp.where(hiclz == 32, lax.shift_left(lo, loclz),
                  lax.shift_right_logical(lo, np.uint32(32) - hiclz)))
    mantissa = lax.bitwise_and(lax.shift_right_logical(mantissa, np.uint32(8)),
                               np.uint32((1 << 23) - 1))
    exp = lax.shift_left(np.uint32(126) - jnp.where(hiclz == 32, 32 + loclz, hiclz),
                         np.uint32(23))
    exp = lax.bitwise_and(exp, np.uint32((1 << 30) - (1 << 22)))
    return bitcast_convert_type(lax.bitwise_or(exp, mantissa), np.float32)


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy samples ``tan(pi * (u - 1/2))``.

    >>> import xform.random as random
    >>> random.cauchy(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    kd = _key_data("cauchy", key)
    dtype = _float_dtype("cauchy", dtype)
    return _cauchy(kd, _static_shape("cauchy", shape), dtype)


@_jit(1, 2)
def _cauchy(key, shape, dtype):
    u = uniform(key, shape, dtype, jnp.finfo(dtype).eps, 1.0)
    return lax.tan(lax.mul(np.array(np.pi, dtype), lax.sub(u, np.array(0.5, dtype))))


def rademacher(key, shape=(), dtype=None):
    """Uniform samples from ``{-1, +1}``.

    >>> import xform.random as random
    >>> random.rademacher(random.PRNGKey(0), (3,)).dtype
    dtype('int32')
    """
    kd = _key_data("rademacher", key)
    dtype = _dt.canonicalize_dtype(_dt.default_int_dtype() if dtype is None else dtype)
    return _rademacher(kd, _static_shape("rademacher", shape), dtype)


@_jit(1, 2)
def _rademacher(key, shape, dtype):
    b = bernoulli(key, 0.5, shape).astype(dtype)
    return (2 * b - 1).astype(dtype)


def lognormal(key, sigma=1.0, shape=None, dtype=None):
    """Log-normal samples ``exp(sigma * normal)``.

    >>> import xform.random as random
    >>> bool((random.lognormal(random.PRNGKey(0), shape=(3,)) > 0).all())
    True
    """
    kd = _key_data("lognormal", key)
    dtype = _float_dtype("lognormal", dtype, complex_ok=True)
    shape = _shape_from("lognormal", shape, sigma)
    _check_all_safe_to_cast("lognormal", dtype, sigma)
    return _lognormal(kd, sigma, shape, dtype)


@_jit(2, 3, inline=True)
def _lognormal(key, sigma, shape, dtype):
    sigma = lax.convert_element_type(sigma, dtype)
    return lax.exp(normal(key, shape, dtype) * sigma)


def pareto(key, b, shape=None, dtype=None):
    """Pareto samples ``exp(exponential / b)``.

    >>> import xform.random as random
    >>> random.pareto(random.PRNGKey(0), 3.0, (2,)).shape
    (2,)
    """
    kd = _key_data("pareto", key)
    dtype = _float_dtype("pareto", dtype)
    shape = _shape_from("pareto", shape, b)
    _check_all_safe_to_cast("pareto", dtype, b)
    return _pareto(kd, b, shape, dtype)


@_jit(2, 3)
def _pareto(key, b, shape, dtype):
    b = lax.convert_element_type(b, dtype)
    return lax.exp(exponential(key, shape, dtype) / b)


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh samples ``scale * sqrt(-2 log u)``.

    >>> import xform.random as random
    >>> random.rayleigh(random.PRNGKey(0), 1.0, (2,)).shape
    (2,)
    """
    kd = _key_data("rayleigh", key)
    dtype = _float_dtype("rayleigh", dtype)
    shape = _shape_from("rayleigh", shape, scale)
    _check_all_safe_to_cast("rayleigh", dtype, scale)
    return _rayleigh(kd, scale, shape, dtype)


@_jit(2, 3)
def _rayleigh(key, scale, shape, dtype):
    u = uniform(key, shape, dtype)
    scale = jnp.broadcast_to(lax.convert_element_type(scale, dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), np.array(-2, dtype))))
