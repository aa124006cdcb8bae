"""Attention modules of ``flax.linen``: MultiHeadDotProductAttention (alias
MultiHeadAttention) and SelfAttention, with Flax's parameter tree (``query``/``key``/
``value``/``out`` DenseGenerals, optional ``query_ln``/``key_ln``), dropout stream and
autoregressive ``cache`` collection (``cached_key``, ``cached_value``, ``cache_index``)."""
import functools
import inspect
import warnings

from xform import lax
from xform import numpy as jnp
from xform.nn import initializers
from xform.nn._attention_fns import combine_masks, dot_product_attention
from xform.nn._linear import DenseGeneral, default_kernel_init
from xform.nn._module import Module, compact, merge_param
from xform.nn._normalization import LayerNorm


class MultiHeadDotProductAttention(Module):
    """Multi-head dot-product attention, as ``flax.linen.MultiHeadDotProductAttention``.

    Inputs are projected to ``num_heads`` heads of ``qkv_features // num_heads`` features
    by the ``query``, ``key`` and ``value`` DenseGenerals, attended with
    ``attention_fn`` and projected back by ``out``.

    Attributes:
      num_heads: number of heads (must divide ``qkv_features``).
      dtype: computation dtype (default: promoted from inputs and params).
      param_dtype: parameter dtype (default float32).
      qkv_features: size of the projected keys/queries/values (default: the query's
        feature size).
      out_features: output size (default: the query's feature size).
      broadcast_dropout: share the attention-dropout mask over batch and heads.
      dropout_rate: attention-weights dropout (the ``'dropout'`` rng stream).
      deterministic: no dropout (may instead be given at call time).
      precision: ``lax.Precision`` of the projections and dot products.
      kernel_init, bias_init: initializers of the projections (out_kernel_init /
        out_bias_init override them for ``out``).
      use_bias: projections with bias.
      attention_fn: ``dot_product_attention`` or a function with its signature.
      decode: autoregressive decoding: keys and values go into the ``cache`` collection
        (initialise it with ``init`` on a full-length input), then each ``apply`` with
        ``mutable=['cache']`` takes one position.
      normalize_qk: LayerNorm (no bias) the queries and keys (``query_ln``/``key_ln``).
      force_fp32_for_softmax: float32 softmax for low-precision dtypes.
      qkv_dot_general, out_dot_general, qkv_dot_general_cls, out_dot_general_cls:
        ``dot_general`` replacements for the projections.
      qk_attn_weights_einsum_cls, attn_weights_value_einsum_cls: factories of the two
        attention einsums.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> layer = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8)
    >>> x = jnp.ones((1, 3, 4))
    >>> v = layer.init(xform.random.key(0), x)
    >>> sorted(v['params']), v['params']['query']['kernel'].shape
    (['key', 'out', 'query', 'value'], (4, 2, 4))
    >>> layer.apply(v, x).shape
    (1, 3, 4)
    """

    num_heads: int
    dtype: object = None
    param_dtype: object = jnp.float32
    qkv_features: object = None
    out_features: object = None
    broadcast_dropout: bool = True
    dropout_rate: float = 0.0
    deterministic: object = None
    precision: object = None
    kernel_init: object = default_kernel_init
    out_kernel_init: object = None
    bias_init: object = initializers.zeros
    out_bias_init: object = None
    use_bias: bool = True
    attention_fn: object = dot_product_attention
    decode: bool = False
    normalize_qk: bool = False
    force_fp32_for_softmax: bool = False
    qkv_dot_general: object = None
    out_dot_general: object = None
    qkv_dot_general_cls: object = None
    out_dot_general_cls: object = None
    qk_attn_weights_einsum_cls: object = None
    attn_weights_value_einsum_cls: object = None

    @compact
    def __call__(self, inputs_q, inputs_k=None, inputs_v=None, *, inputs_kv=None,
                 mask=None, deterministic=None, dropout_rng=None, sow_weights=False):
        """Attend from ``inputs_q`` ``(*batch, q_len, features)`` to ``inputs_k`` /
        ``inputs_v`` ``(*batch, kv_len, features)`` (default: ``inputs_q``: self
        attention).

        Args:
          inputs_q, inputs_k, inputs_v: queries, keys (default: queries), values
            (default: keys).
          inputs_kv: deprecated: keys and values at once.
          mask: ``(*batch, num_heads or 1, q_len, kv_len)``: attend where True/nonzero.
          deterministic: no dropout (merged with the attribute: give it once).
          dropout_rng: a key for the dropout (default: ``make_rng('dropout')``).
          sow_weights: sow the attention weights into ``intermediates``.

        Returns:
          ``(*batch, q_len, out_features)``.
        """
        if inputs_kv is not None:
            if inputs_k is not None or inputs_v is not None:
                raise ValueError(
                    "If either `inputs_k` or `inputs_v` is not None, `inputs_kv` must be "
                    "None. If `inputs_kv` is not None, both `inputs_k` and `inputs_v` "
                    "must be None. We recommend using `inputs_k` and `inputs_v` args, "
                    "since `inputs_kv` will be deprecated soon.")
            inputs_k = inputs_v = inputs_kv
            warnings.warn("The inputs_kv arg will be deprecated soon. Use inputs_k and "
                          "inputs_v instead.", DeprecationWarning)
        else:
            if inputs_k is None:
                if inputs_v is not None:
                    raise ValueError(
                        "`inputs_k` cannot be None if `inputs_v` is not None. To have "
                        "both `inputs_k` and `inputs_v` be the same value, pass in the "
                        "value to `inputs_k` and leave `inputs_v` as None.")
                inputs_k = inputs_q
            if inputs_v is None:
                inputs_v = inputs_k
            elif jnp.shape(inputs_v)[-1] == jnp.shape(inputs_v)[-2]:
                warnings.warn(
                    f"You are passing an array of shape {jnp.shape(inputs_v)} to the "
                    f"`inputs_v` arg, when you may have intended to pass it to the `mask` "
                    f"arg. The signature is `__call__(inputs_q, inputs_k=None, "
                    f"inputs_v=None, *, inputs_kv=None, mask=None, deterministic=None)`: "
                    f"use the kwarg `mask` instead.", DeprecationWarning)
        features = self.out_features or jnp.shape(inputs_q)[-1]
        qkv_features = self.qkv_features or jnp.shape(inputs_q)[-1]
        if qkv_features % self.num_heads:
            raise ValueError(f"Memory dimension ({qkv_features}) must be divisible by "
                             f"number of heads ({self.num_heads}).")
        head_dim = qkv_features // self.num_heads
        dense = functools.partial(
            DenseGeneral, axis=-1, dtype=self.dtype, param_dtype=self.param_dtype,
            features=(self.num_heads, head_dim), kernel_init=self.kernel_init,
            bias_init=self.bias_init, use_bias=self.use_bias, precision=self.precision,
            dot_general=self.qkv_dot_general, dot_general_cls=self.qkv_dot_general_cls)
        query = dense(name="query")(inputs_q)
        key = dense(name="key")(inputs_k)
        value = dense(name="value")(inputs_v)
        if self.normalize_qk:
            ln = functools.partial(LayerNorm, use_bias=False, dtype=self.dtype,
                                   param_dtype=self.param_dtype)
            query = ln(name="query_ln")(query)
            key = ln(name="key_ln")(key)
        if self.decode:
            key, value, mask = self._decode_step(query, key, value, mask)
        if self.dropout_rate > 0.0:    # `deterministic` is needed only with dropout
            m_deterministic = merge_param("deterministic", self.deterministic,
                                          deterministic)
            if not m_deterministic and dropout_rng is None:
                dropout_rng = self.make_rng("dropout")
        else:
            m_deterministic = True
        attn_kwargs = dict(
            mask=mask, dropout_rng=dropout_rng, dropout_rate=self.dropout_rate,
            broadcast_dropout=self.broadcast_dropout, deterministic=m_deterministic,
            dtype=self.dtype, precision=self.precision,
            force_fp32_for_softmax=self.force_fp32_for_softmax,
            qk_attn_weights_einsum=(self.qk_attn_weights_einsum_cls()
                                    if self.qk_attn_weights_einsum_cls else None),
            attn_weights_value_einsum=(self.attn_weights_value_einsum_cls()
                                       if self.attn_weights_value_einsum_cls else None))
        # deterministic=True (always given) makes the shared-name dot_product_attention
        # take Flax's path.
        accepted = inspect.signature(self.attention_fn).parameters
        attn_kwargs = {k: v for k, v in attn_kwargs.items() if k in accepted}
        if sow_weights:
            x = self.attention_fn(query, key, value, **attn_kwargs, module=self)
        else:
            x = self.attention_fn(query, key, value, **attn_kwargs)
        return DenseGeneral(
            features=features, axis=(-2, -1),
            kernel_init=self.out_kernel_init or self.kernel_init,
            bias_init=self.out_bias_init or self.bias_init, use_bias=self.use_bias,
            dtype=self.dtype, param_dtype=self.param_dtype, precision=self.precision,
            dot_general=self.out_dot_general, dot_general_cls=self.out_dot_general_cls,
            name="out")(x)

    def _decode_step(self, query, key, value, mask):
        """Write this step's key/value at ``cache_index`` in the cache and mask out the
        positions not yet written. The first call (during ``init``) only creates the
        cache, shaped like the full-length keys and values."""
        is_initialized = self.has_variable("cache", "cached_key")
        cached_key = self.variable("cache", "cached_key", jnp.zeros, jnp.shape(key),
                                   jnp.result_type(key))
        cached_value = self.variable("cache", "cached_value", jnp.zeros,
                                     jnp.shape(value), jnp.result_type(value))
        cache_index = self.variable("cache", "cache_index",
                                    lambda: jnp.array(0, dtype=jnp.int32))
        if not is_initialized:
            return key, value, mask
        *batch_dims, max_length, num_heads, depth = jnp.shape(cached_key.value)
        expected = tuple(batch_dims) + (1, num_heads, depth)
        if expected != jnp.shape(query):
            raise ValueError(f"Autoregressive cache shape error, expected query shape "
                             f"{expected} instead got {jnp.shape(query)}.")
        cur = cache_index.value
        zero = jnp.array(0, dtype=jnp.result_type(cur))
        indices = (zero,) * len(batch_dims) + (cur, zero, zero)
        key = lax.dynamic_update_slice(cached_key.value, key, indices)
        value = lax.dynamic_update_slice(cached_value.value, value, indices)
        cached_key.value, cached_value.value = key, value
        cache_index.value = cache_index.value + 1
        written = jnp.broadcast_to(jnp.arange(max_length) <= cur,
                                   tuple(batch_dims) + (1, 1, max_length))
        return key, value, combine_masks(mask, written)


class MultiHeadAttention(MultiHeadDotProductAttention):
    """Alias of :class:`MultiHeadDotProductAttention` (as in Flax).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> x = jnp.ones((1, 3, 4))
    >>> nn.MultiHeadAttention(num_heads=2).init_with_output(xform.random.key(0), x)[0].shape
    (1, 3, 4)
    """


class SelfAttention(MultiHeadDotProductAttention):
    """Self-attention: :class:`MultiHeadDotProductAttention` with keys and values from
    the queries (deprecated in Flax, which warns; so does this).

    >>> import warnings, xform, xform.numpy as jnp, xform.nn as nn
    >>> warnings.simplefilter('ignore', DeprecationWarning)
    >>> x = jnp.ones((1, 3, 4))
    >>> nn.SelfAttention(num_heads=2).init_with_output(xform.random.key(0), x)[0].shape
    (1, 3, 4)
    """

    @compact
    def __call__(self, inputs_q, mask=None, deterministic=None, dropout_rng=None,
                 sow_weights=False):
        """Self-attend ``inputs_q`` (see :class:`MultiHeadDotProductAttention`)."""
        warnings.warn("SelfAttention will be deprecated soon. Use "
                      "`MultiHeadDotProductAttention.__call__(inputs_q)` instead.",
                      DeprecationWarning)
        return super().__call__(inputs_q, mask=mask, deterministic=deterministic,
                                dropout_rng=dropout_rng, sow_weights=sow_weights)
