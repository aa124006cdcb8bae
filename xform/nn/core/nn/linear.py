"""``flax.core.nn.linear``: dense, dense_general, conv, conv_transpose and embedding as
scope functions (params ``kernel``/``bias``/``table`` on the scope given)."""
import dataclasses
from collections.abc import Iterable

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core.tree_util import register_pytree_node
from xform.nn import initializers

__all__ = ["Embedding", "conv", "conv_transpose", "dense", "dense_general", "embedding"]

default_kernel_init = initializers.lecun_normal()
default_embed_init = initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0)


def _tuple(x):
    return tuple(x) if isinstance(x, Iterable) else (x,)


def _add_bias(scope, y, features, bias_init, dtype):
    bias = jnp.asarray(scope.param("bias", bias_init, (features,)), dtype)
    return y + jnp.reshape(bias, (1,) * (y.ndim - 1) + (-1,))


def dense_general(scope, inputs, features, axis=-1, batch_dims=(), bias=True,
                  dtype=jnp.float32, kernel_init=default_kernel_init,
                  bias_init=initializers.zeros_init(), precision=None):
    """Contracts ``inputs``' ``axis`` with a kernel of ``features`` outputs;
    ``batch_dims`` (consecutive leading axes) get their own kernel slice each."""
    inputs = jnp.asarray(inputs, dtype)
    features, axis, batch_dims = _tuple(features), _tuple(axis), _tuple(batch_dims)
    if batch_dims and set(batch_dims) != set(range(max(batch_dims) + 1)):
        raise ValueError(f"batch_dims {batch_dims} must be consecutive leading "
                         f"dimensions starting from 0.")
    ndim, n_batch = inputs.ndim, len(batch_dims)
    axis = tuple(a % ndim for a in axis)
    batch_dims = tuple(a % ndim for a in batch_dims)
    n_axis, n_features = len(axis), len(features)

    def per_batch(init, flat_shape):   # one ``init`` call per batch index, stacked
        def wrapped(rng, shape, dtype=jnp.float32):
            n = int(np.prod(shape[:n_batch], dtype=np.int32))
            parts = [init(rng, flat_shape(shape), dtype) for _ in range(n)]
            return jnp.reshape(jnp.concatenate(parts, axis=0), shape)
        return wrapped
    kernel_flat = lambda s: (int(np.prod(s[n_batch:n_axis + n_batch])),
                             int(np.prod(s[-n_features:])))
    batch_shape = tuple(inputs.shape[a] for a in batch_dims)
    kernel_shape = tuple(inputs.shape[a] for a in axis) + features
    kernel = scope.param("kernel", per_batch(kernel_init, kernel_flat),
                         batch_shape + kernel_shape)
    kernel = jnp.asarray(kernel, dtype)
    out = lax.dot_general(
        inputs, kernel, ((axis, tuple(range(n_batch, n_axis + n_batch))),
                         (batch_dims, tuple(range(n_batch)))), precision=precision)
    if bias:
        b = scope.param("bias", per_batch(bias_init, lambda s: (int(np.prod(
            s[-n_features:])),)), batch_shape + features)
        for ax in sorted(set(range(ndim)) - set(axis) - set(batch_dims)):
            b = jnp.expand_dims(b, ax)
        out = out + jnp.asarray(b, dtype)
    return out


def dense(scope, inputs, features, bias=True, dtype=jnp.float32, precision=None,
          kernel_init=default_kernel_init, bias_init=initializers.zeros_init()):
    """``inputs @ kernel + bias`` over the last axis."""
    inputs = jnp.asarray(inputs, dtype)
    kernel = jnp.asarray(scope.param("kernel", kernel_init, (inputs.shape[-1], features)),
                         dtype)
    y = lax.dot_general(inputs, kernel, (((inputs.ndim - 1,), (0,)), ((), ())),
                        precision=precision)
    return _add_bias(scope, y, features, bias_init, dtype) if bias else y


def _conv_dimension_numbers(ndim):
    lhs = (0, ndim - 1) + tuple(range(1, ndim - 1))
    return lax.ConvDimensionNumbers(lhs, (ndim - 1, ndim - 2) + tuple(range(ndim - 2)), lhs)


def conv(scope, inputs, features, kernel_size, strides=None, padding="SAME",
         input_dilation=None, kernel_dilation=None, feature_group_count=1, bias=True,
         dtype=jnp.float32, precision=None, kernel_init=default_kernel_init,
         bias_init=initializers.zeros_init()):
    """An N-d convolution of channels-last ``inputs`` (``(batch, *spatial, in)``)."""
    inputs = jnp.asarray(inputs, dtype)
    strides = (1,) * (inputs.ndim - 2) if strides is None else strides
    in_features = inputs.shape[-1]
    if in_features % feature_group_count:
        raise ValueError(f"conv: input features ({in_features}) must be divisible by "
                         f"feature_group_count ({feature_group_count})")
    kernel_shape = tuple(kernel_size) + (in_features // feature_group_count, features)
    kernel = jnp.asarray(scope.param("kernel", kernel_init, kernel_shape), dtype)
    y = lax.conv_general_dilated(
        inputs, kernel, strides, padding, lhs_dilation=input_dilation,
        rhs_dilation=kernel_dilation, dimension_numbers=_conv_dimension_numbers(
            inputs.ndim), feature_group_count=feature_group_count, precision=precision)
    return _add_bias(scope, y, features, bias_init, dtype) if bias else y


def conv_transpose(scope, inputs, features, kernel_size, strides=None, padding="SAME",
                   kernel_dilation=None, bias=True, dtype=jnp.float32, precision=None,
                   kernel_init=default_kernel_init, bias_init=initializers.zeros_init()):
    """A transposed convolution (``lax.conv_transpose``) of channels-last ``inputs``."""
    inputs = jnp.asarray(inputs, dtype)
    strides = strides or (1,) * (inputs.ndim - 2)
    kernel_shape = tuple(kernel_size) + (inputs.shape[-1], features)
    kernel = jnp.asarray(scope.param("kernel", kernel_init, kernel_shape), dtype)
    y = lax.conv_transpose(inputs, kernel, strides, padding, rhs_dilation=kernel_dilation,
                           precision=precision)
    return _add_bias(scope, y, features, bias_init, dtype) if bias else y


@dataclasses.dataclass(frozen=True)
class Embedding:
    """An embedding table (a pytree) with ``lookup`` and ``attend``."""
    table: object

    def lookup(self, indices):
        """The rows of ``indices`` (integer array of any shape)."""
        if not jnp.issubdtype(jnp.asarray(indices).dtype, jnp.integer):
            raise ValueError("Input type must be an integer or unsigned integer.")
        return self.table[indices]

    def replace(self, **updates):
        return dataclasses.replace(self, **updates)

    def attend(self, query):
        """``query`` against every embedding (shared input/output embeddings)."""
        return jnp.dot(query, self.table.T)


register_pytree_node(Embedding, lambda e: ((e.table,), None),
                     lambda _, kids: Embedding(kids[0]))


def embedding(scope, num_embeddings, features, init_fn=default_embed_init):
    """An ``Embedding`` whose ``table`` param is ``(num_embeddings, features)``."""
    return Embedding(scope.param("table", init_fn, (num_embeddings, features)))
