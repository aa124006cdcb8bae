"""Normalization layers (Flax linen's ``BatchNorm``, ``LayerNorm``, ``RMSNorm``,
``GroupNorm``): statistics in float32 by default (``force_float32_reductions``), the
fast variance ``E[x^2] - E[x]^2``, cross-device means through ``lax.pmean`` over
``axis_name`` (pmap or a named vmap axis)."""
import xform.numpy as jnp
from xform import lax
from xform.nn import initializers
from xform.nn._linear import canonicalize_dtype
from xform.nn._module import Module, compact, merge_param


def _canonicalize_axes(rank, axes):
    if not isinstance(axes, (tuple, list)):
        axes = (axes,)
    return tuple({rank + a if a < 0 else a for a in axes})


def _abs_sq(x):
    if jnp.iscomplexobj(x):
        return lax.square(lax.real(x)) + lax.square(lax.imag(x))
    return lax.square(x)


def _compute_stats(x, axes, dtype, axis_name=None, axis_index_groups=None,
                   use_mean=True, use_fast_variance=True, mask=None,
                   force_float32_reductions=True):
    """Mean and variance of ``x`` over ``axes`` (and over devices on ``axis_name``)."""
    if dtype is None:
        dtype = jnp.result_type(x)
    if force_float32_reductions:
        dtype = jnp.promote_types(dtype, jnp.float32)
    x = jnp.asarray(x, dtype)
    axes = _canonicalize_axes(x.ndim, axes)
    if mask is not None:
        mask = jnp.asarray(mask, dtype=bool)

    def mean(*xs):
        mus = tuple(jnp.mean(v, axes, where=mask) for v in xs)
        if axis_name is None:
            return mus if len(xs) > 1 else mus[0]
        if len(xs) > 1:
            reduced = lax.pmean(jnp.stack(mus, axis=0), axis_name,
                                axis_index_groups=axis_index_groups)
            return tuple(reduced[i] for i in range(len(xs)))
        return lax.pmean(mus[0], axis_name, axis_index_groups=axis_index_groups)

    if not use_mean:
        var = mean(_abs_sq(x))
        return jnp.zeros_like(var), var
    if use_fast_variance:
        mu, mu2 = mean(x, _abs_sq(x))
        return mu, jnp.maximum(0.0, mu2 - _abs_sq(mu))
    mu = mean(x)
    return mu, mean(_abs_sq(x - jnp.expand_dims(mu, axes)))


def _normalize(mdl, x, mean, var, reduction_axes, feature_axes, dtype, param_dtype,
               epsilon, use_bias, use_scale, bias_init, scale_init,
               force_float32_reductions=True):
    """``(x - mean) * rsqrt(var + eps) * scale + bias`` with params over feature_axes."""
    reduction_axes = _canonicalize_axes(x.ndim, reduction_axes)
    feature_axes = _canonicalize_axes(x.ndim, feature_axes)
    feature_shape = [1] * x.ndim
    reduced_feature_shape = []
    for ax in feature_axes:
        feature_shape[ax] = x.shape[ax]
        reduced_feature_shape.append(x.shape[ax])
    mean = jnp.expand_dims(mean, reduction_axes)
    var = jnp.expand_dims(var, reduction_axes)
    y = x - mean
    mul = lax.rsqrt(var + epsilon)
    args = [x]
    if use_scale:
        scale = mdl.param("scale", scale_init, reduced_feature_shape,
                          param_dtype).reshape(feature_shape)
        if not force_float32_reductions:
            scale = jnp.asarray(scale, param_dtype)
        mul *= scale
        args.append(scale)
    y *= mul
    if use_bias:
        bias = mdl.param("bias", bias_init, reduced_feature_shape,
                         param_dtype).reshape(feature_shape)
        if not force_float32_reductions:
            bias = jnp.asarray(bias, param_dtype)
        y += bias
        args.append(bias)
    return jnp.asarray(y, canonicalize_dtype(*args, dtype=dtype))


class BatchNorm(Module):
    """Batch normalization with running statistics in the ``batch_stats`` collection.

    Training: ``apply(v, x, use_running_average=False, mutable=['batch_stats'])``
    normalizes by batch statistics (averaged over ``axis_name`` devices) and updates
    ``ra = momentum * ra + (1 - momentum) * batch``; evaluation uses ``ra``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> bn = nn.BatchNorm(use_running_average=False)
    >>> v = bn.init(xform.random.PRNGKey(0), jnp.ones((4, 3)))
    >>> sorted(v), v['batch_stats']['mean'].shape
    (['batch_stats', 'params'], (3,))
    """
    use_running_average: object = None
    axis: int = -1
    momentum: float = 0.99
    epsilon: float = 1e-5
    dtype: object = None
    param_dtype: object = jnp.float32
    use_bias: bool = True
    use_scale: bool = True
    bias_init: object = initializers.zeros
    scale_init: object = initializers.ones
    axis_name: object = None
    axis_index_groups: object = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(self, x, use_running_average=None, *, mask=None):
        use_running_average = merge_param("use_running_average",
                                          self.use_running_average, use_running_average)
        feature_axes = _canonicalize_axes(x.ndim, self.axis)
        reduction_axes = tuple(i for i in range(x.ndim) if i not in feature_axes)
        feature_shape = [x.shape[ax] for ax in feature_axes]
        stat_dtype = jnp.float32 if self.force_float32_reductions else self.param_dtype
        ra_mean = self.variable("batch_stats", "mean",
                                lambda s: jnp.zeros(s, stat_dtype), feature_shape)
        ra_var = self.variable("batch_stats", "var",
                               lambda s: jnp.ones(s, stat_dtype), feature_shape)
        if use_running_average:
            mean, var = ra_mean.value, ra_var.value
            if not self.force_float32_reductions:
                mean = jnp.asarray(mean, self.param_dtype)
                var = jnp.asarray(var, self.param_dtype)
        else:
            initializing = self.is_initializing()
            mean, var = _compute_stats(
                x, reduction_axes, dtype=self.dtype,
                axis_name=self.axis_name if not initializing else None,
                axis_index_groups=self.axis_index_groups,
                use_fast_variance=self.use_fast_variance, mask=mask,
                force_float32_reductions=self.force_float32_reductions)
            if not initializing:
                ra_mean.value = self.momentum * ra_mean.value + (1 - self.momentum) * mean
                ra_var.value = self.momentum * ra_var.value + (1 - self.momentum) * var
        return _normalize(self, x, mean, var, reduction_axes, feature_axes, self.dtype,
                          self.param_dtype, self.epsilon, self.use_bias, self.use_scale,
                          self.bias_init, self.scale_init, self.force_float32_reductions)


class LayerNorm(Module):
    """Normalizes over ``reduction_axes`` (default: the last), with a learned scale
    and bias over ``feature_axes``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.LayerNorm().init(xform.random.PRNGKey(0), jnp.ones((2, 3)))
    >>> sorted(v['params'])
    ['bias', 'scale']
    """
    epsilon: float = 1e-6
    dtype: object = None
    param_dtype: object = jnp.float32
    use_bias: bool = True
    use_scale: bool = True
    bias_init: object = initializers.zeros
    scale_init: object = initializers.ones
    reduction_axes: object = -1
    feature_axes: object = -1
    axis_name: object = None
    axis_index_groups: object = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(self, x, *, mask=None):
        mean, var = _compute_stats(x, self.reduction_axes, self.dtype, self.axis_name,
                                   self.axis_index_groups,
                                   use_fast_variance=self.use_fast_variance, mask=mask,
                                   force_float32_reductions=self.force_float32_reductions)
        return _normalize(self, x, mean, var, self.reduction_axes, self.feature_axes,
                          self.dtype, self.param_dtype, self.epsilon, self.use_bias,
                          self.use_scale, self.bias_init, self.scale_init,
                          self.force_float32_reductions)


class RMSNorm(Module):
    """Root-mean-square normalization: ``x * rsqrt(mean(x^2) + eps) * scale``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.RMSNorm().init(xform.random.PRNGKey(0), jnp.ones((2, 3)))
    >>> v['params']['scale'].shape
    (3,)
    """
    epsilon: float = 1e-6
    dtype: object = None
    param_dtype: object = jnp.float32
    use_scale: bool = True
    scale_init: object = initializers.ones
    reduction_axes: object = -1
    feature_axes: object = -1
    axis_name: object = None
    axis_index_groups: object = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(self, x, *, mask=None):
        mean, var = _compute_stats(x, self.reduction_axes, self.dtype, self.axis_name,
                                   self.axis_index_groups, use_mean=False,
                                   use_fast_variance=self.use_fast_variance, mask=mask,
                                   force_float32_reductions=self.force_float32_reductions)
        return _normalize(self, x, mean, var, self.reduction_axes, self.feature_axes,
                          self.dtype, self.param_dtype, self.epsilon, False,
                          self.use_scale, initializers.zeros, self.scale_init,
                          self.force_float32_reductions)


class GroupNorm(Module):
    """Normalizes each of ``num_groups`` channel groups (or groups of ``group_size``)
    over the non-batch axes.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.GroupNorm(num_groups=2).init(xform.random.PRNGKey(0), jnp.ones((1, 5, 4)))
    >>> v['params']['scale'].shape
    (4,)
    """
    num_groups: object = 32
    group_size: object = None
    epsilon: float = 1e-6
    dtype: object = None
    param_dtype: object = jnp.float32
    use_bias: bool = True
    use_scale: bool = True
    bias_init: object = initializers.zeros
    scale_init: object = initializers.ones
    reduction_axes: object = None
    axis_name: object = None
    axis_index_groups: object = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(self, x, *, mask=None):
        reduction_axes = (self.reduction_axes if self.reduction_axes is not None
                          else list(range(1, x.ndim - 1)) + [-1])
        reduction_axes = sorted(_canonicalize_axes(x.ndim, reduction_axes))
        if reduction_axes[-1] != x.ndim - 1:
            raise ValueError("The reduction axes must include the final dimension as "
                             "this is assumed to be the feature axis.")
        if (self.num_groups is None) == (self.group_size is None):
            raise ValueError(
                "Either `num_groups` or `group_size` should be specified. If "
                "`group_size` is to be specified, pass `num_groups=None` as argument to "
                "override the default `num_groups` value of 32.")
        channels = x.shape[-1]
        if self.group_size is not None:
            if channels % self.group_size != 0:
                raise ValueError(f"Number of channels ({channels}) is not multiple of "
                                 f"the group size ({self.group_size}).")
            num_groups = channels // self.group_size
        else:
            num_groups = self.num_groups
        if num_groups <= 0 or channels % num_groups != 0:
            raise ValueError(f"Number of groups ({num_groups}) does not divide the "
                             f"number of channels ({channels}).")
        group_size = channels // num_groups
        group_shape = x.shape[:-1] + (num_groups, group_size)
        if mask is not None:
            mask = mask.reshape(mask.shape[:-1] + (num_groups, group_size))
        mean, var = _compute_stats(x.reshape(group_shape), list(reduction_axes[:-1]) + [-1],
                                   self.dtype, self.axis_name, self.axis_index_groups,
                                   use_fast_variance=self.use_fast_variance, mask=mask,
                                   force_float32_reductions=self.force_float32_reductions)
        mean = jnp.repeat(mean, group_size, axis=-1)
        var = jnp.repeat(var, group_size, axis=-1)
        return _normalize(self, x, mean, var, reduction_axes[:-1], (-1,), self.dtype,
                          self.param_dtype, self.epsilon, self.use_bias, self.use_scale,
                          self.bias_init, self.scale_init, self.force_float32_reductions)


class InstanceNorm(Module):
    """Normalizes each example and channel over the remaining (spatial) axes.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.InstanceNorm().init(xform.random.PRNGKey(0), jnp.ones((2, 5, 3)))
    >>> v['params']['scale'].shape
    (3,)
    """
    epsilon: float = 1e-6
    dtype: object = None
    param_dtype: object = jnp.float32
    use_bias: bool = True
    use_scale: bool = True
    bias_init: object = initializers.zeros
    scale_init: object = initializers.ones
    feature_axes: object = -1
    axis_name: object = None
    axis_index_groups: object = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(self, x, *, mask=None):
        feature_axes = _canonicalize_axes(x.ndim, self.feature_axes)
        if 0 in feature_axes:
            raise ValueError("The channel axes cannot include the leading dimension as "
                             "this is assumed to be the batch axis.")
        reduction_axes = [i for i in range(1, x.ndim) if i not in feature_axes]
        mean, var = _compute_stats(x, reduction_axes, self.dtype, self.axis_name,
                                   self.axis_index_groups,
                                   use_fast_variance=self.use_fast_variance, mask=mask,
                                   force_float32_reductions=self.force_float32_reductions)
        return _normalize(self, x, mean, var, reduction_axes, feature_axes, self.dtype,
                          self.param_dtype, self.epsilon, self.use_bias, self.use_scale,
                          self.bias_init, self.scale_init, self.force_float32_reductions)
