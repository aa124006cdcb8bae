"""``xform.nn.initializers``: ``jax.nn.initializers``, same values for the same key.

An initializer is ``init(key, shape, dtype=float32, out_sharding=None) -> Array``
(``out_sharding``: a NamedSharding, or a PartitionSpec under a mesh context, that the
result is resharded to, as JAX's): JAX's formula over
``xform.random``'s samplers (each one compiled call, as JAX's), so values match JAX's
bit for bit eagerly and under jit.
"""
import functools
import math
import typing

import numpy as np

import xform.numpy as jnp
from xform import random
from xform.core import dtypes as _dt
from xform.lax.sharding_constraint import reshard
from xform.transforms.jit import jit

__all__ = ["Initializer", "constant", "delta_orthogonal", "glorot_normal",
           "glorot_uniform", "he_normal", "he_uniform", "kaiming_normal",
           "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones", "ones_init",
           "orthogonal", "truncated_normal", "uniform", "variance_scaling",
           "xavier_normal", "xavier_uniform", "zeros", "zeros_init"]

class Initializer(typing.Protocol):
    """What an initializer is (for annotations), as ``jax.nn.initializers.Initializer``."""

    def __call__(self, key, shape, dtype=None, out_sharding=None): ...


def _dtype(dtype):
    # JAX's default: float64 under x64 (Flax's layers pass param_dtype=float32 themselves)
    return np.dtype(_dt.default_float_dtype() if dtype is None else dtype)


def _placed(x, out_sharding):
    return x if out_sharding is None else reshard(x, out_sharding)


def _no_sharding(name, out_sharding):
    # JAX's QR-based initializers take no out_sharding either (NotImplementedError)
    if out_sharding is not None:
        raise NotImplementedError(f"nn.initializers.{name}: out_sharding is not "
                                  f"supported (as in JAX); got {out_sharding!r}")


def _shape(shape):
    return tuple(int(d) for d in shape) if np.ndim(shape) else (int(shape),)


def zeros(key, shape, dtype=None, out_sharding=None):
    """Zeros of ``shape``.

    >>> import xform.nn as nn
    >>> nn.initializers.zeros(None, (2,)).tolist()
    [0.0, 0.0]
    """
    return jnp.zeros(_shape(shape), _dtype(dtype), out_sharding=out_sharding)


def ones(key, shape, dtype=None, out_sharding=None):
    """Ones of ``shape``."""
    return jnp.ones(_shape(shape), _dtype(dtype), out_sharding=out_sharding)


def zeros_init():
    """Flax's ``zeros_init()``: returns the ``zeros`` initializer."""
    return zeros


def ones_init():
    """Flax's ``ones_init()``: returns the ``ones`` initializer."""
    return ones


def constant(value, dtype=None):
    """An initializer filling with ``value``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        return _placed(jnp.full(_shape(shape), value, dtype=_dtype(dtype)), out_sharding)
    return init


def uniform(scale=1e-2, dtype=None):
    """Uniform on ``[0, scale)``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dtype(dtype)
        x = random.uniform(key, _shape(shape), dt, 0.0, 1.0) * jnp.array(scale, dt)
        return _placed(x, out_sharding)
    return init


def normal(stddev=1e-2, dtype=None):
    """Normal with mean 0 and standard deviation ``stddev``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dtype(dtype)
        return _placed(random.normal(key, _shape(shape), dt) * jnp.array(stddev, dt),
                       out_sharding)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """Normal truncated to ``[lower, upper]`` (in standard deviations), times ``stddev``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dtype(dtype)
        return _placed(random.truncated_normal(key, lower, upper, _shape(shape), dt)
                       * jnp.array(stddev, dt), out_sharding)
    return init


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(
            f"Can't compute input and output sizes of a {len(shape)}-dimensional "
            f"weights tensor with default in_axis. Must be at least 2D or specify "
            f"in_axis explicitly.")
    size = lambda ax: (shape[ax] if isinstance(ax, int)
                       else math.prod(shape[i] for i in ax))
    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive, out_size * receptive


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """Samples with variance ``scale / fan`` (``mode``: fan_in, fan_out, fan_avg,
    fan_geo_avg; ``distribution``: truncated_normal, normal, uniform).

    >>> import xform, xform.nn as nn
    >>> w = nn.initializers.lecun_normal()(xform.random.PRNGKey(0), (3, 4))
    >>> w.shape
    (3, 4)
    """
    def init(key, shape, dtype=dtype, out_sharding=None):
        return _placed(_variance_scaled(key, _shape(shape), _dtype(dtype)), out_sharding)

    def _variance_scaled(key, shape, dt):
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out,
                       "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}.get(mode)
        if denominator is None:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dt)
        real = dt.kind != "c"
        if distribution == "truncated_normal":
            if not real:   # stddev of a complex standard normal truncated to 2
                stddev = jnp.sqrt(variance) / jnp.array(.95311164380491208, dt)
                return _complex_truncated_normal(key, 2, shape, dt) * stddev
            stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dt)
            return random.truncated_normal(key, -2, 2, shape, dt) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dt) * jnp.sqrt(variance)
        if distribution == "uniform":
            if not real:
                return _complex_uniform(key, shape, dt) * jnp.sqrt(variance)
            return random.uniform(key, shape, dt, -1, 1.0) * jnp.sqrt(3 * variance)
        raise ValueError(
            f"invalid distribution for variance scaling initializer: {distribution}")
    return init


def _complex_uniform(key, shape, dtype):
    # JAX's: uniform on the unit-variance disk, radius sqrt(2 u), angle 2 pi u'.
    key_r, key_theta = random.split(key)
    real_dtype = np.array(0, dtype).real.dtype
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real_dtype)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real_dtype).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
    # JAX's: a unit-variance complex normal with its modulus truncated to ``upper``.
    key_r, key_theta = random.split(key)
    real_dtype = np.array(0, dtype).real.dtype
    t = ((1 - jnp.exp(jnp.array(-(upper ** 2), dtype)))
         * random.uniform(key_r, shape, real_dtype).astype(dtype))
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real_dtype).astype(dtype)
    return r * jnp.exp(1j * theta)


def _vs(scale, mode, distribution, doc):
    def make(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis,
                                batch_axis, dtype)
    make.__doc__ = doc
    return make


glorot_uniform = xavier_uniform = _vs(1.0, "fan_avg", "uniform",
                                      "Glorot/Xavier uniform: variance 2/(fan_in+fan_out).")
glorot_normal = xavier_normal = _vs(1.0, "fan_avg", "truncated_normal",
                                    "Glorot/Xavier truncated normal.")
lecun_uniform = _vs(1.0, "fan_in", "uniform", "LeCun uniform: variance 1/fan_in.")
lecun_normal = _vs(1.0, "fan_in", "truncated_normal", "LeCun truncated normal.")
he_uniform = kaiming_uniform = _vs(2.0, "fan_in", "uniform",
                                   "He/Kaiming uniform: variance 2/fan_in.")
he_normal = kaiming_normal = _vs(2.0, "fan_in", "truncated_normal",
                                 "He/Kaiming truncated normal.")


@functools.partial(jit, static_argnums=(1, 2, 3))
def _orthogonal(key, n, m, dtype):
    # jax.random.orthogonal: QR of a normal matrix, columns sign-fixed by diag(R).
    z = random.normal(key, (max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    x = q * jnp.expand_dims(jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1)), -2)
    return x.T if n < m else x


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """A (semi-)orthogonal matrix over ``column_axis`` vs the other axes flattened."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("orthogonal", out_sharding)
        shape, dt = _shape(shape), _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype=dt)
        n_cols = shape[column_axis]
        q = _orthogonal(key, math.prod(shape) // n_cols, n_cols, dt)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.array(scale, dt) * jnp.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """Delta-orthogonal for 3-5D conv kernels: orthogonal at the spatial centre."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("delta_orthogonal", out_sharding)
        shape, dt = _shape(shape), _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D "
                             "shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dt)(
            key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype=dt).at[centre].set(ortho)
    return init
