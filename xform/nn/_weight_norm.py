"""Flax linen's parameter-reparametrizing wrappers ``WeightNorm`` and ``SpectralNorm``
(over ``nn.map_variables``) and the ``PReLU`` activation layer."""
import dataclasses
import functools

import xform.numpy as jnp
from xform import lax, random
from xform.core.tree_util import keystr, tree_map_with_path
from xform.nn import initializers
from xform.nn._lifted_ad import map_variables
from xform.nn._linear import canonicalize_dtype
from xform.nn._module import Module, compact
from xform.nn._normalization import _canonicalize_axes

__all__ = ["PReLU", "SpectralNorm", "WeightNorm"]


def _l2_normalize(x, axis=None, eps=1e-12):
    return x * lax.rsqrt((x * x).sum(axis=axis, keepdims=True) + eps)


class SpectralNorm(Module):
    """Spectral normalization: wraps a layer and divides each of its weight matrices
    by an estimate of its largest singular value (power iteration).

    The ``u`` vector and ``sigma`` of each weight live in ``collection_name``
    (``'batch_stats'``) under ``'<layer>/<path>/u'``; pass ``update_stats=True`` and
    ``mutable=['batch_stats']`` to refine them while training.

    Attributes:
      layer_instance: the wrapped module.
      n_steps: power iterations per call.
      epsilon: added inside the l2 normalization.
      dtype, param_dtype: result dtype (default inferred) and ``u``/``sigma`` dtype.
      error_on_non_matrix: raise for weights of rank > 2 (default: flatten leading
        axes).
      collection_name: the collection of ``u`` and ``sigma``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> m = nn.SpectralNorm(nn.Dense(3))
    >>> v = m.init(xform.random.PRNGKey(0), jnp.ones((1, 2)), update_stats=False)
    >>> sorted(v['batch_stats'])
    ['layer_instance/kernel/sigma', 'layer_instance/kernel/u']
    """
    layer_instance: Module
    n_steps: int = 1
    epsilon: float = 1e-12
    dtype: object = None
    param_dtype: object = jnp.float32
    error_on_non_matrix: bool = False
    collection_name: str = "batch_stats"

    @compact
    def __call__(self, *args, update_stats, **kwargs):
        """Runs the layer with its weights spectrally normalized."""
        def layer_forward(layer_instance):
            return layer_instance(*args, **kwargs)
        return map_variables(
            layer_forward,
            trans_in_fn=lambda vs: tree_map_with_path(
                functools.partial(self._spectral_normalize, update_stats=update_stats),
                vs),
            init=self.is_initializing(), mutable=True)(self.layer_instance)

    def _spectral_normalize(self, path, vs, update_stats):
        value = jnp.asarray(vs)
        value_shape = value.shape
        if value.ndim <= 1 or self.n_steps < 1:
            return value
        if value.ndim > 2:
            if self.error_on_non_matrix:
                raise ValueError(f"Input is {value.ndim}D but error_on_non_matrix is True")
            value = jnp.reshape(value, (-1, value.shape[-1]))
        prefix = self.layer_instance.name + "/" + "/".join(k.key for k in path[1:])
        u_name, sigma_name = prefix + "/u", prefix + "/sigma"
        key = (None if self.has_variable(self.collection_name, u_name)
               else self.make_rng("params"))
        u_var = self.variable(self.collection_name, u_name, random.normal, key,
                              (1, value.shape[-1]), self.param_dtype)
        sigma_var = self.variable(self.collection_name, sigma_name, jnp.ones, (),
                                  self.param_dtype)
        u0 = u_var.value
        for _ in range(self.n_steps):   # power iteration
            v0 = _l2_normalize(jnp.matmul(u0, value.transpose([1, 0])), eps=self.epsilon)
            u0 = _l2_normalize(jnp.matmul(v0, value), eps=self.epsilon)
        u0, v0 = lax.stop_gradient(u0), lax.stop_gradient(v0)
        sigma = jnp.matmul(jnp.matmul(v0, value), jnp.transpose(u0))[0, 0]
        value = value / jnp.where(sigma != 0, sigma, 1)
        if update_stats:
            u_var.value = u0
            sigma_var.value = sigma
        dtype = canonicalize_dtype(vs, u0, v0, sigma, dtype=self.dtype)
        return jnp.asarray(value.reshape(value_shape), dtype)


class WeightNorm(Module):
    """L2 weight normalization: wraps a layer and rescales each selected weight to
    unit l2 norm over its non-feature axes, times a learned ``scale`` param named
    ``'<layer>/<path>/scale'``.

    Attributes:
      layer_instance: the wrapped module.
      epsilon: added inside the l2 normalization.
      dtype, param_dtype: result dtype (default inferred) and ``scale`` dtype.
      use_scale: learn a per-feature scale.
      scale_init: the scale's initializer.
      feature_axes: axes that keep their own norm (None: one norm per weight).
      variable_filter: substrings of ``'<layer>/<path>'`` selecting weights (default
        ``{'kernel'}``; None or empty: all).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> m = nn.WeightNorm(nn.Dense(3))
    >>> v = m.init(xform.random.PRNGKey(0), jnp.ones((1, 2)))
    >>> v['params']['layer_instance/kernel/scale'].shape
    (3,)
    """
    layer_instance: Module
    epsilon: float = 1e-12
    dtype: object = None
    param_dtype: object = jnp.float32
    use_scale: bool = True
    scale_init: object = initializers.ones
    feature_axes: object = -1
    variable_filter: object = dataclasses.field(default_factory=lambda: {"kernel"})

    @compact
    def __call__(self, *args, **kwargs):
        """Runs the layer with its selected weights l2-normalized."""
        def layer_forward(layer_instance):
            return layer_instance(*args, **kwargs)
        return map_variables(
            layer_forward,
            trans_in_fn=lambda vs: tree_map_with_path(self._l2_normalize, vs),
            init=self.is_initializing())(self.layer_instance)

    def _l2_normalize(self, path, vs):
        value = jnp.asarray(vs)
        str_path = (self.layer_instance.name + "/"
                    + keystr(path[1:], simple=True, separator="/"))
        if self.variable_filter and not any(name in str_path
                                            for name in self.variable_filter):
            return value
        if self.feature_axes is None:
            feature_axes, reduction_axes = (), tuple(range(value.ndim))
        else:
            feature_axes = _canonicalize_axes(value.ndim, self.feature_axes)
            reduction_axes = tuple(i for i in range(value.ndim) if i not in feature_axes)
        feature_shape = [1] * value.ndim
        for ax in feature_axes:
            feature_shape[ax] = value.shape[ax]
        value_bar = _l2_normalize(value, axis=reduction_axes, eps=self.epsilon)
        args = [vs]
        if self.use_scale:
            scale = self.param(str_path + "/scale", self.scale_init,
                               [value.shape[ax] for ax in feature_axes],
                               self.param_dtype).reshape(feature_shape)
            value_bar = value_bar * scale
            args.append(scale)
        return jnp.asarray(value_bar, canonicalize_dtype(*args, dtype=self.dtype))


class PReLU(Module):
    """Parametric ReLU: ``x`` where ``x >= 0``, else a learned ``negative_slope`` (a
    scalar param, initialized to ``negative_slope_init``) times ``x``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.PReLU().init(xform.random.PRNGKey(0), jnp.ones(2))
    >>> nn.PReLU().apply(v, jnp.array([-1., 2.])).tolist()
    [-0.009999999776482582, 2.0]
    """
    param_dtype: object = jnp.float32
    negative_slope_init: float = 0.01

    @compact
    def __call__(self, inputs):
        """Applies the activation to ``inputs``."""
        negative_slope = self.param(
            "negative_slope", lambda k: jnp.asarray(self.negative_slope_init,
                                                    self.param_dtype))
        return jnp.where(inputs >= 0, inputs,
                         jnp.asarray(negative_slope, inputs.dtype) * inputs)
