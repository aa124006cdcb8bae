"""``flax.core.nn.normalization``: batch, layer and group norm as scope functions
(statistics as ``E[x^2] - E[x]^2``, as Flax's functional layers compute them)."""
import xform.numpy as jnp
from xform import lax
from xform.nn import initializers

__all__ = ["batch_norm", "group_norm", "layer_norm"]


def batch_norm(scope, x, use_running_average=False, axis=-1, momentum=0.99, epsilon=1e-5,
               dtype=jnp.float32, bias=True, scale=True,
               bias_init=initializers.zeros_init(), scale_init=initializers.ones_init(),
               axis_name=None, axis_index_groups=None, kind="batch_stats"):
    """Normalizes ``x`` over all axes but ``axis`` with batch statistics (or the
    running averages ``kind/mean``, ``kind/var``, updated when not initializing)."""
    x = jnp.asarray(x, jnp.float32)
    axis = axis if isinstance(axis, tuple) else (axis,)
    axis = tuple(x.ndim + a if a < 0 else a for a in axis)
    redux = tuple(i for i in range(x.ndim) if i not in axis)

    def pmean(v):
        m = jnp.mean(v, redux, keepdims=True)
        if axis_name is not None:
            m = lax.pmean(m, axis_name=axis_name, axis_index_groups=axis_index_groups)
        return m
    mean = pmean(x)
    squeeze_shape = jnp.squeeze(mean).shape
    var = pmean(jnp.square(x)) - jnp.square(mean)
    is_init = not scope.has_variable(kind, "mean")
    ra_mean = scope.variable(kind, "mean", jnp.zeros, squeeze_shape)
    ra_var = scope.variable(kind, "var", jnp.ones, squeeze_shape)
    if use_running_average:
        mean = jnp.reshape(ra_mean.value, mean.shape)
        var = jnp.reshape(ra_var.value, var.shape)
    elif not is_init:
        beta = 1.0 - momentum
        ra_mean.value += beta * (jnp.squeeze(mean) - ra_mean.value)
        ra_var.value += beta * (jnp.squeeze(var) - ra_var.value)
    y = x - mean
    mul = lax.rsqrt(var + epsilon)
    if scale:
        mul = mul * scope.param("scale", scale_init, squeeze_shape).reshape(mean.shape)
    y = y * mul
    if bias:
        y = y + scope.param("bias", bias_init, squeeze_shape).reshape(mean.shape)
    return jnp.asarray(y, dtype)


def layer_norm(scope, x, epsilon=1e-6, dtype=jnp.float32, bias=True, scale=True,
               bias_init=initializers.zeros_init(), scale_init=initializers.ones_init()):
    """Normalizes each example over its last axis."""
    features = x.shape[-1]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(lax.square(x), axis=-1, keepdims=True) - lax.square(mean)
    mul = lax.rsqrt(var + epsilon)
    if scale:
        mul = mul * jnp.asarray(scope.param("scale", scale_init, (features,)), dtype)
    y = (x - mean) * mul
    if bias:
        y = y + jnp.asarray(scope.param("bias", bias_init, (features,)), dtype)
    return y


def group_norm(scope, x, num_groups=32, group_size=None, epsilon=1e-6, dtype=jnp.float32,
               bias=True, scale=True, bias_init=initializers.zeros_init(),
               scale_init=initializers.ones_init()):
    """Normalizes ``x`` (``N...C``) per example over groups of channels: give
    ``num_groups`` or ``group_size``, not both."""
    x = jnp.asarray(x, jnp.float32)
    if (num_groups is None) == (group_size is None):
        raise ValueError("Either `num_groups` or `group_size` should be specified, but "
                         "not both of them.")
    if group_size is not None:
        channels = x.shape[-1]
        if channels % group_size != 0:
            raise ValueError(f"Number of channels ({channels}) is not multiple of the "
                             f"group size ({group_size}).")
        num_groups = channels // group_size
    input_shape = x.shape
    x = x.reshape(x.shape[:-1] + (num_groups, x.shape[-1] // num_groups))
    reduction_axis = list(range(1, x.ndim - 2)) + [x.ndim - 1]
    mean = jnp.mean(x, axis=reduction_axis, keepdims=True)
    var = jnp.mean(jnp.square(x), axis=reduction_axis, keepdims=True) - jnp.square(mean)
    x = ((x - mean) * lax.rsqrt(var + epsilon)).reshape(input_shape)
    feature_shape = (1,) * (len(input_shape) - 1) + (input_shape[-1],)
    if scale:
        x = x * scope.param("scale", scale_init, feature_shape)
    if bias:
        x = x + scope.param("bias", bias_init, feature_shape)
    return x.astype(dtype)
