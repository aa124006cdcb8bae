"""The attention functions of ``flax.linen``: dot_product_attention_weights,
dot_product_attention (Flax's, which also takes jax.nn's arguments: see its docstring),
make_attention_mask, make_causal_mask, combine_masks.

NB: ``flax.linen.dot_product_attention`` and ``jax.nn.dot_product_attention`` share a name
and their first five arguments, and ``xform.nn`` stands for both modules. As in
``flax.linen`` the name is Flax's function; a call that uses jax.nn's keyword-only options
(or that only jax.nn accepts, grouped-query heads) runs jax.nn's implementation, and a
call valid for both computes the same attention either way (up to rounding).
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform import random
from xform.nn import _functions
from xform.nn._linear import promote_dtype


def _check_qk(query, key, value=None):
    qs, ks = jnp.shape(query), jnp.shape(key)
    vs = ks if value is None else jnp.shape(value)
    if not len(qs) == len(ks) == len(vs):
        raise ValueError(f"dot_product_attention: query, key and value must have the same "
                         f"rank, got shapes {qs}, {ks}, {vs}")
    if len(qs) < 3:
        raise ValueError(f"dot_product_attention: inputs must be (*batch, length, heads, "
                         f"depth), got query shape {qs}")
    if not qs[:-3] == ks[:-3] == vs[:-3]:
        raise ValueError(f"dot_product_attention: batch dims must match, got query {qs}, "
                         f"key {ks}, value {vs}")
    if not qs[-2] == ks[-2] == vs[-2]:
        raise ValueError(f"dot_product_attention: num_heads must match, got query {qs}, "
                         f"key {ks}, value {vs}")
    if qs[-1] != ks[-1]:
        raise ValueError(f"dot_product_attention: query and key depths must match, got "
                         f"{qs} and {ks}")
    if ks[-3] != vs[-3]:
        raise ValueError(f"dot_product_attention: key and value lengths must match, got "
                         f"{ks} and {vs}")


def _batched_dot(lhs, rhs, lhs_contract, rhs_contract, lhs_head, rhs_head, precision,
                 dot_general):
    """dot_general over (..., heads) batch axes: out (..., heads, lhs free, rhs free)."""
    nd = jnp.ndim(lhs)
    batch = tuple(range(nd - 3))
    dims = (((nd + lhs_contract,), (nd + rhs_contract,)),
            (batch + (nd + lhs_head,), batch + (nd + rhs_head,)))
    return dot_general(lhs, rhs, dims, precision=precision)


def dot_product_attention_weights(query, key, bias=None, mask=None, broadcast_dropout=True,
                                  dropout_rng=None, dropout_rate=0.0, deterministic=False,
                                  dtype=None, precision=None, module=None,
                                  force_fp32_for_softmax=False, einsum_dot_general=None,
                                  einsum=None):
    """Attention weights ``softmax(q k^T / sqrt(depth) + bias)`` per head (Flax's).

    Args:
      query: ``(*batch, q_length, num_heads, depth)``.
      key: ``(*batch, kv_length, num_heads, depth)``.
      bias: optional, broadcastable to ``(*batch, num_heads, q_length, kv_length)``;
        added to the logits.
      mask: optional, same broadcasting; where it is False (or 0) the logit becomes the
        dtype's lowest value.
      broadcast_dropout: one dropout mask shared over the batch and head axes.
      dropout_rng: the key for dropout.
      dropout_rate: the dropout probability.
      deterministic: no dropout when True.
      dtype: the computation dtype (default: promoted from the inputs).
      precision: the ``lax.Precision`` of the dot products.
      module: a Module to ``sow`` the weights into its ``intermediates`` collection.
      force_fp32_for_softmax: compute the softmax in float32 (for low-precision dtypes).
      einsum_dot_general: a ``dot_general`` replacement for the dot product.
      einsum: a callable used as ``einsum(subscripts, q, k)`` instead (exclusive with
        ``precision`` and ``einsum_dot_general``).

    Returns:
      The weights, ``(*batch, num_heads, q_length, kv_length)``.

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> nn.dot_product_attention_weights(jnp.ones((2, 1, 4)), jnp.ones((3, 1, 4))).shape
    (1, 2, 3)
    """
    if (precision or einsum_dot_general) and einsum:
        raise ValueError("precision/einsum_dot_general and einsum are mutually exclusive. "
                         "Please specify only one of them.")
    query, key = promote_dtype(query, key, dtype=dtype)
    dtype = query.dtype
    _check_qk(query, key)
    depth = jnp.shape(query)[-1]
    query = query / jnp.asarray(np.float32(np.sqrt(depth)), dtype)
    if einsum is not None:
        weights = einsum("...qhd,...khd->...hqk", query, key)
    else:
        weights = _batched_dot(query, key, -1, -1, -2, -2, precision,
                               einsum_dot_general or lax.dot_general)
    if bias is not None:
        weights = weights + bias
    if mask is not None:
        weights = jnp.where(mask, weights, jnp.finfo(dtype).min)
    if force_fp32_for_softmax and dtype != jnp.float32:
        weights = _functions.softmax(weights.astype(jnp.float32))
    else:
        weights = _functions.softmax(weights).astype(dtype)
    if module is not None:
        module.sow("intermediates", "attention_weights", weights)
    if not deterministic and dropout_rate > 0.0:
        if dropout_rng is None:
            raise ValueError("dot_product_attention: dropout_rate > 0 and not deterministic "
                             "needs a dropout_rng")
        keep_prob = 1.0 - dropout_rate
        shape = jnp.shape(weights)
        if broadcast_dropout:
            shape = (1,) * (jnp.ndim(key) - 2) + shape[-2:]
        keep = random.bernoulli(dropout_rng, keep_prob, shape)
        weights = weights * (keep.astype(dtype) / jnp.asarray(keep_prob, dtype))
    return weights


_FLAX_DEFAULTS = dict(broadcast_dropout=True, dropout_rng=None, dropout_rate=0.0,
                      deterministic=False, dtype=None, precision=None, module=None,
                      force_fp32_for_softmax=False, einsum_dot_general=None,
                      qk_attn_weights_einsum=None, attn_weights_value_einsum=None)
_JAX_DEFAULTS = dict(scale=None, is_causal=False, query_seq_lengths=None,
                     key_value_seq_lengths=None, local_window_size=None,
                     implementation=None, return_residual=False)


def dot_product_attention(query, key, value, bias=None, mask=None, broadcast_dropout=True,
                          dropout_rng=None, dropout_rate=0.0, deterministic=False,
                          dtype=None, precision=None, module=None,
                          force_fp32_for_softmax=False, einsum_dot_general=None,
                          qk_attn_weights_einsum=None, attn_weights_value_einsum=None, *,
                          scale=None, is_causal=False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    """Multi-head dot-product attention ``softmax(q k^T / sqrt(depth) + bias) v`` (Flax's
    ``flax.linen.dot_product_attention``, which also serves as ``jax.nn``'s).

    The positional arguments are Flax's; the keyword-only ones are ``jax.nn``'s. A call
    with any of jax.nn's options (or grouped-query heads, which only jax.nn accepts) is
    ``jax.nn.dot_product_attention``; one with any of Flax's options, a non-boolean mask,
    more than one batch axis, mixed or integer dtypes, or a value depth other than the
    key's is Flax's; a plain call is valid for both and
    computes the same attention, as jax.nn's (so its errors are jax.nn's).

    Args:
      query: ``(*batch, q_length, num_heads, depth)``.
      key: ``(*batch, kv_length, num_heads, depth)``.
      value: ``(*batch, kv_length, num_heads, v_depth)``.
      bias, mask, broadcast_dropout, dropout_rng, dropout_rate, deterministic, dtype,
      precision, module, force_fp32_for_softmax, einsum_dot_general: as in
        :func:`dot_product_attention_weights`.
      qk_attn_weights_einsum, attn_weights_value_einsum: callables used as the two
        einsums (given together).
      scale, is_causal, query_seq_lengths, key_value_seq_lengths, local_window_size,
      implementation, return_residual: ``jax.nn.dot_product_attention``'s options.

    Returns:
      ``(*batch, q_length, num_heads, v_depth)``.

    Raises:
      ValueError: for mismatched shapes, or Flax's and jax.nn's options mixed.

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> q = jnp.ones((1, 3, 2, 4))
    >>> nn.dot_product_attention(q, q, q, dropout_rate=0.1, deterministic=True).shape
    (1, 3, 2, 4)
    """
    flax_args = dict(broadcast_dropout=broadcast_dropout, dropout_rng=dropout_rng,
                     dropout_rate=dropout_rate, deterministic=deterministic, dtype=dtype,
                     precision=precision, module=module,
                     force_fp32_for_softmax=force_fp32_for_softmax,
                     einsum_dot_general=einsum_dot_general,
                     qk_attn_weights_einsum=qk_attn_weights_einsum,
                     attn_weights_value_einsum=attn_weights_value_einsum)
    jax_args = dict(scale=scale, is_causal=is_causal, query_seq_lengths=query_seq_lengths,
                    key_value_seq_lengths=key_value_seq_lengths,
                    local_window_size=local_window_size, implementation=implementation,
                    return_residual=return_residual)
    flax_used = [k for k, v in flax_args.items() if not _is_default(v, _FLAX_DEFAULTS[k])]
    jax_used = [k for k, v in jax_args.items() if not _is_default(v, _JAX_DEFAULTS[k])]
    if flax_used and jax_used:
        raise ValueError(f"dot_product_attention: Flax's options {flax_used} and jax.nn's "
                         f"options {jax_used} cannot be combined")
    shapes = [jnp.shape(t) for t in (query, key, value)]
    dtypes_ = {jnp.result_type(t) for t in (query, key, value)}
    # jax.nn rejects (or, for integers, computes in int32) what Flax accepts: run Flax's.
    only_flax = (flax_used or len(shapes[0]) > 4 or len(dtypes_) > 1
                 or not jnp.issubdtype(dtypes_.pop(), jnp.inexact)
                 or shapes[1][-1:] != shapes[2][-1:]
                 or (mask is not None and jnp.result_type(mask) != np.bool_))
    grouped = shapes[0][-2:-1] != shapes[1][-2:-1]
    if jax_used or grouped or not only_flax:
        return _functions.dot_product_attention(query, key, value, bias, mask, **jax_args)
    return _flax_attention(query, key, value, bias, mask, **flax_args)


def _is_default(value, default):
    if default is None or value is None:
        return value is default
    return not hasattr(value, "shape") and value == default


def _flax_attention(query, key, value, bias, mask, broadcast_dropout, dropout_rng,
                    dropout_rate, deterministic, dtype, precision, module,
                    force_fp32_for_softmax, einsum_dot_general, qk_attn_weights_einsum,
                    attn_weights_value_einsum):
    if (qk_attn_weights_einsum is None) != (attn_weights_value_einsum is None):
        raise ValueError("qk_attn_weights_einsum and attn_weights_value_einsum must be "
                         "specified together.")
    if (precision or einsum_dot_general) and qk_attn_weights_einsum:
        raise ValueError("precision/einsum_dot_general and qk_attn_weights_einsum/"
                         "attn_weights_value_einsum are mutually exclusive. Please specify "
                         "only one of them.")
    query, key, value = promote_dtype(query, key, value, dtype=dtype)
    _check_qk(query, key, value)
    weights = dot_product_attention_weights(
        query, key, bias, mask, broadcast_dropout, dropout_rng, dropout_rate,
        deterministic, query.dtype, precision, module, force_fp32_for_softmax,
        einsum_dot_general=einsum_dot_general, einsum=qk_attn_weights_einsum)
    if attn_weights_value_einsum is not None:
        return attn_weights_value_einsum("...hqk,...khd->...qhd", weights, value)
    # (..., h, q, k) x (..., k, h, d) -> (..., h, q, d) -> (..., q, h, d); float32
    # weights (force_fp32_for_softmax) promote the value, as jnp.einsum would.
    weights, value = promote_dtype(weights, value)
    out = _batched_dot(weights, value, -1, -3, -3, -2, precision,
                       einsum_dot_general or lax.dot_general)
    return jnp.swapaxes(out, -2, -3)


def make_attention_mask(query_input, key_input, pairwise_fn=jnp.multiply,
                        extra_batch_dims=0, dtype=jnp.float32):
    """An attention mask ``(*batch, 1, q_len, kv_len)`` from per-position values.

    Args:
      query_input: ``(*batch, q_len)``, e.g. 1 for real tokens and 0 for padding.
      key_input: ``(*batch, kv_len)``.
      pairwise_fn: combines a query and a key value (default: multiply).
      extra_batch_dims: leading size-1 axes to add.
      dtype: the mask dtype (default float32).

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> nn.make_attention_mask(jnp.array([1, 0]), jnp.array([1, 1, 0]))[0]
    Array([[1., 1., 0.],
           [0., 0., 0.]], dtype=float32)
    """
    mask = pairwise_fn(jnp.expand_dims(query_input, -1), jnp.expand_dims(key_input, -2))
    mask = jnp.expand_dims(mask, -3)
    mask = jnp.expand_dims(mask, tuple(range(extra_batch_dims)))
    return mask.astype(dtype)


def make_causal_mask(x, extra_batch_dims=0, dtype=jnp.float32):
    """A causal mask ``(*batch, 1, len, len)`` for inputs ``x`` of shape ``(*batch, len)``:
    position i attends to positions j <= i.

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> nn.make_causal_mask(jnp.ones((1, 2)))[0, 0]
    Array([[1., 0.],
           [1., 1.]], dtype=float32)
    """
    shape = jnp.shape(x)
    idxs = jnp.broadcast_to(jnp.arange(shape[-1], dtype=jnp.int32), shape)
    return make_attention_mask(idxs, idxs, jnp.greater_equal,
                               extra_batch_dims=extra_batch_dims, dtype=dtype)


def combine_masks(*masks, dtype=jnp.float32):
    """The logical AND of the given masks (None entries skipped), or None if all are None.

    Raises:
      ValueError: if the masks have different ranks.

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> nn.combine_masks(jnp.array([1, 1]), None, jnp.array([0, 1]))
    Array([0., 1.], dtype=float32)
    """
    masks = [m for m in masks if m is not None]
    if not masks:
        return None
    ranks = tuple(jnp.ndim(m) for m in masks)
    if len(set(ranks)) > 1:
        raise ValueError(f"combine_masks: masks must have the same rank, got ranks {ranks}")
    mask = masks[0]
    for other in masks[1:]:
        mask = jnp.logical_and(mask, other)
    return jnp.asarray(mask).astype(dtype)
