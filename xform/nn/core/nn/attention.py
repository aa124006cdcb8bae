"""``flax.core.nn.attention``: dot-product and multi-head attention as scope functions
(params ``query``/``key``/``value``/``out`` dense_generals, an optional ``cache/entry``
for causal decoding one position at a time), with their mask builders."""
import functools
from collections.abc import Iterable

import numpy as np

import xform.numpy as jnp
from xform import lax, random
from xform.nn import initializers
from xform.nn._functions import logsumexp
from xform.nn.core.nn.linear import default_kernel_init, dense_general
from xform.training import struct

__all__ = ["CacheEntry", "dot_product_attention", "make_padding_mask",
           "multi_head_dot_product_attention"]


def _check_axes(axes, ndim):
    for ax in axes:
        if not (ndim >= 3 and 1 <= ax < ndim - 2):
            raise ValueError("Attention axis must be between the batch axis and the "
                             "last-two axes.")


def dot_product_attention(scope, query, key, value, dtype=jnp.float32, bias=None,
                          axis=None, broadcast_dropout=True, dropout_rng=None,
                          dropout_rate=0.0, deterministic=False, precision=None):
    """Attention of ``query`` over ``key``/``value`` (``[batch, *dims, heads, depth]``)
    along ``axis`` (default: every ``dims`` axis, so N-d inputs attend over all
    positions); ``bias`` is added to the logits before the softmax."""
    if key.shape[:-1] != value.shape[:-1]:
        raise ValueError(f"key and value must agree but for the last axis, got "
                         f"{key.shape} and {value.shape}")
    if query.shape[:1] != key.shape[:1] or query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query and key must agree in batch and depth, got "
                         f"{query.shape} and {key.shape}")
    if not key.ndim == query.ndim == value.ndim:
        raise ValueError(f"query, key and value must have the same rank, got "
                         f"{query.ndim}, {key.ndim}, {value.ndim}")
    n = key.ndim
    axis = tuple(range(1, n - 2)) if axis is None else axis
    axis = tuple(axis) if isinstance(axis, Iterable) else (axis,)
    _check_axes(axis, query.ndim)
    batch_dims = tuple(np.delete(range(n), axis + (n - 1,)))   # batch, others, heads
    qk_perm = batch_dims + axis + (n - 1,)
    key, query = jnp.transpose(key, qk_perm), jnp.transpose(query, qk_perm)
    value = jnp.transpose(value, batch_dims + (n - 1,) + axis)
    query = query / jnp.sqrt(query.shape[-1]).astype(dtype)
    bt = tuple(range(len(batch_dims)))
    logits = lax.dot_general(query, key, (((n - 1,), (n - 1,)), (bt, bt)),
                             precision=precision)
    if bias is not None:
        logits = logits + bias
    norm_dims = tuple(range(logits.ndim - len(axis), logits.ndim))
    weights = lax.exp(logits - logsumexp(logits, axis=norm_dims, keepdims=True))
    weights = weights.astype(dtype)
    if not deterministic and dropout_rate > 0.0:
        if dropout_rng is None:
            dropout_rng = scope.make_rng("dropout")
        keep_prob = 1.0 - dropout_rate
        shape = weights.shape
        if broadcast_dropout:   # one mask for every batch/head/other position
            shape = (1,) * len(bt) + shape[-2 * len(axis):]
        keep = random.bernoulli(dropout_rng, keep_prob, shape)
        weights = weights * (keep.astype(weights.dtype) / jnp.asarray(keep_prob, dtype))
    y = lax.dot_general(weights, value, ((norm_dims, tuple(range(
        value.ndim - len(axis), value.ndim))), (bt, bt)), precision=precision)
    return jnp.transpose(y, tuple(np.argsort(qk_perm)))


class CacheEntry(struct.PyTreeNode):
    """The decoding cache: keys and values so far and the next position ``i``."""
    key: object
    value: object
    i: object


def _cache_step(scope, inputs_q, key, value, attention_axis):
    """Writes this step's ``key``/``value`` into the cache at position ``i``; returns
    the cached keys/values, the key padding mask (positions < i+1) and the entry (the
    entry's ``init_fn`` on the first, initializing call)."""
    if not scope.has_variable("cache", "entry"):
        ndim, tail_shape = key.ndim, key.shape[-2:]

        def init_fn(shape, dtype=jnp.float32):
            full_shape = tuple(shape) + tail_shape
            if len(full_shape) != ndim:
                raise ValueError("Shape should be a tuple with the shape of the batch "
                                 "and attention dims.")
            return CacheEntry(key=jnp.zeros(full_shape, dtype),
                              value=jnp.zeros(full_shape, dtype),
                              i=jnp.zeros((), jnp.uint32))
        scope.put_variable("cache", "entry", init_fn)
        return key, value, None, init_fn
    entry = scope.get_variable("cache", "entry")
    if not isinstance(entry, CacheEntry):
        raise ValueError("Cache is not initialized.")
    expected = list(entry.key.shape[:-2])
    for ax in attention_axis:
        expected[ax] = 1
    expected = tuple(expected) + inputs_q.shape[-1:]
    if expected != inputs_q.shape:
        raise ValueError(f"Invalid shape provided, expected shape {expected} instead "
                         f"got {inputs_q.shape}.")
    cshape = entry.key.shape
    indices, i = [0] * len(cshape), entry.i
    # an np.int64, as Flax's: i // it is an int index like the zeros, not a uint32 one
    attn_size = np.prod(np.take(cshape, attention_axis))
    for ax in attention_axis:   # position i, row-major over the attention axes
        attn_size //= cshape[ax]
        indices[ax], i = i // attn_size, i % attn_size
    key = lax.dynamic_update_slice(entry.key, key, indices)
    value = lax.dynamic_update_slice(entry.value, value, indices)
    entry = entry.replace(i=entry.i + jnp.array(1, jnp.uint32), key=key, value=value)
    scope.put_variable("cache", "entry", entry)
    key_padding_mask = jnp.broadcast_to(jnp.arange(cshape[1]) < entry.i, cshape[:2])
    return key, value, key_padding_mask.astype(jnp.float32)[..., None], entry


def multi_head_dot_product_attention(
        scope, inputs_q, inputs_kv, num_heads, dtype=jnp.float32, qkv_features=None,
        out_features=None, attention_axis=None, causal_mask=False, padding_mask=None,
        key_padding_mask=None, segmentation=None, key_segmentation=None, cache=False,
        broadcast_dropout=True, dropout_rng=None, dropout_rate=0.0, deterministic=False,
        precision=None, kernel_init=default_kernel_init,
        bias_init=initializers.zeros_init(), bias=True,
        attention_fn=dot_product_attention):
    """Projects ``inputs_q`` (queries) and ``inputs_kv`` (keys/values; ``None``:
    self-attention) to ``num_heads`` heads, applies ``attention_fn`` under the
    causal/padding/segmentation masks, and projects back to ``out_features``.
    ``cache=True`` (causal only) decodes one position per call from ``cache/entry``."""
    if cache and not causal_mask:
        raise ValueError("Caching is only support for causal attention.")
    inputs_kv = inputs_q if inputs_kv is None else inputs_kv
    if attention_axis is None:
        attention_axis = tuple(range(1, inputs_q.ndim - 1))
    features = out_features or inputs_q.shape[-1]
    qkv_features = qkv_features or inputs_q.shape[-1]
    if qkv_features % num_heads:
        raise ValueError(f"Memory dimension ({qkv_features}) must be divisible by "
                         f"number of heads ({num_heads}).")
    dense = functools.partial(
        dense_general, axis=-1, dtype=dtype, features=(num_heads, qkv_features // num_heads),
        kernel_init=kernel_init, bias_init=bias_init, bias=bias, precision=precision)
    query = scope.child(dense, "query")(inputs_q)
    key = scope.child(dense, "key")(inputs_kv)
    value = scope.child(dense, "value")(inputs_kv)
    entry = None
    if cache:
        key, value, cache_padding, entry = _cache_step(scope, inputs_q, key, value,
                                                       attention_axis)
        if cache_padding is not None:
            key_padding_mask = cache_padding
    masks = []
    if causal_mask:
        if isinstance(entry, CacheEntry):   # decoding: keys up to the current position
            attn_shape = tuple(np.take(key.shape, attention_axis))
            ii = jnp.arange(int(np.prod(attn_shape)), dtype=jnp.uint32)
            masks.append(jnp.reshape(ii < entry.i, (1,) * (key.ndim - 1) + attn_shape))
        else:
            masks.append(_make_causal_mask(key, attention_axis))
    for q_mask, k_mask, seg in ((padding_mask, key_padding_mask, False),
                                (segmentation, key_segmentation, True)):
        if q_mask is not None:
            masks.append(make_padding_mask(
                q_mask, q_mask if k_mask is None else k_mask, query.shape, key.shape,
                attention_axis, segmentation_mask=seg))
    attention_bias = None
    if masks:
        mask = functools.reduce(jnp.logical_and, masks)
        attention_bias = lax.select(mask > 0, jnp.full(mask.shape, 0.0).astype(dtype),
                                    jnp.full(mask.shape, -1e10).astype(dtype))
    x = scope.child(attention_fn)(
        query, key, value, dtype=dtype, axis=attention_axis, bias=attention_bias,
        precision=precision, dropout_rng=dropout_rng, dropout_rate=dropout_rate,
        broadcast_dropout=broadcast_dropout, deterministic=deterministic)
    return scope.child(dense_general, name="out")(
        x, features=features, axis=(-2, -1), kernel_init=kernel_init,
        bias_init=bias_init, bias=bias, dtype=dtype, precision=precision)


def make_padding_mask(padding_mask_query, padding_mask_key, query_shape, key_shape,
                      attention_axis=None, segmentation_mask=False):
    """The ``[batch, 1, *q_dims, *k_dims]`` float mask from per-position query and key
    masks: their outer product, or (``segmentation_mask``) where their segment ids
    are equal."""
    if query_shape[0] != key_shape[0] or len(query_shape) != len(key_shape):
        raise ValueError(f"query_shape {tuple(query_shape)} and key_shape "
                         f"{tuple(key_shape)} must have the same rank and batch size")
    ndim = len(key_shape)
    attention_axis = tuple(range(1, ndim - 2)) if attention_axis is None else attention_axis
    if not isinstance(attention_axis, tuple):
        raise TypeError(f"attention_axis must be a tuple, got {attention_axis!r}")
    _check_axes(attention_axis, ndim)
    final = ((query_shape[0], 1) + tuple(query_shape[ax] for ax in attention_axis)
             + tuple(key_shape[ax] for ax in attention_axis))
    q, k = padding_mask_query[..., None], padding_mask_key[..., None]
    k = jnp.transpose(k, (0,) + tuple(range(k.ndim - 1, 0, -1)))
    mask = jnp.equal(q, k) if segmentation_mask else jnp.multiply(q, k)
    return lax.convert_element_type(jnp.reshape(mask, final), jnp.float32)


def _make_causal_mask(key, attention_axis=None, self_mask=False):
    """Position p may attend to q <= p (q < p with ``self_mask``), positions counted
    row-major over the attention axes; shape ``[1, ..., 1, *dims, *dims]``."""
    attention_axis = (tuple(range(1, key.ndim - 2)) if attention_axis is None
                      else attention_axis)
    _check_axes(attention_axis, key.ndim)
    dims = tuple(key.shape[ax] for ax in attention_axis)
    n = int(np.prod(dims))
    x = lax.broadcast_in_dim(jnp.arange(n, dtype=jnp.int32), (n, n), (0,))
    tri = lax.ge(x + (-1 if self_mask else 0),
                 lax.broadcast(jnp.arange(n, dtype=jnp.int32), [n]))
    return jnp.reshape(tri, (1,) * (key.ndim - len(attention_axis) - 1) + dims + dims)
