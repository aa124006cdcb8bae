"""xform.nn attention vs flax.linen: the attention functions and masks, the
MultiHeadDotProductAttention family (same key -> same variables and outputs, eagerly and
under jit; dropout masks; gradients; the decode cache; bfloat16); errors; doctests."""
import doctest

import flax.linen as fnn
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import nn
from xform.nn import _attention_fns

R = np.random.RandomState(0)


def close(a, e, tol=1e-5):
    a, e = np.asarray(a, np.float32), np.asarray(e, np.float32)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


# ---- functions ----

def test_masks_vs_flax():
    q = np.array([[1, 1, 0], [1, 0, 0]], np.int32)
    k = np.array([[1, 0, 1, 1], [1, 1, 1, 0]], np.int32)
    close(nn.make_attention_mask(q, k), fnn.make_attention_mask(q, k))
    close(nn.make_attention_mask(q, k, jnp.greater_equal, extra_batch_dims=2),
          fnn.make_attention_mask(q, k, jjnp.greater_equal, extra_batch_dims=2))
    assert nn.make_attention_mask(q, k, dtype=jnp.bool_).dtype == np.bool_
    close(nn.make_causal_mask(k, extra_batch_dims=1), fnn.make_causal_mask(k, 1))
    m1, m2 = nn.make_causal_mask(q), nn.make_attention_mask(q, q)
    close(nn.combine_masks(m1, None, m2), fnn.combine_masks(np.asarray(m1), None,
                                                           np.asarray(m2)))
    assert nn.combine_masks(None, None) is None
    with pytest.raises(ValueError, match=r"same rank, got ranks \(4, 3\)"):
        nn.combine_masks(m1, m1[0])


def _qkv(shape=(2, 3, 5, 2, 4), dtype=np.float32):
    return [R.randn(*shape).astype(dtype) for _ in range(3)]


def test_attention_functions_vs_flax():
    q, k, v = _qkv()
    mask = np.asarray(fnn.make_causal_mask(np.ones((2, 3, 5))))
    bias = R.randn(1, 1, 2, 5, 5).astype(np.float32)
    for kw in (dict(), dict(mask=mask), dict(bias=bias, mask=mask > 0)):
        close(nn.dot_product_attention_weights(q, k, **kw),
              fnn.dot_product_attention_weights(q, k, **kw))
        close(nn.dot_product_attention(q, k, v, **kw),
              fnn.dot_product_attention(q, k, v, **kw))
    # Flax's dropout, bit for bit: same key -> same mask.
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(3)))
    for bd in (True, False):
        kw = dict(dropout_rng=key, dropout_rate=0.4, broadcast_dropout=bd)
        close(nn.dot_product_attention(q, k, v, mask=mask, **kw),
              fnn.dot_product_attention(q, k, v, mask=mask, **kw))
    jitted = xform.jit(lambda *a: nn.dot_product_attention(*a, mask=mask,
                                                           deterministic=True))(q, k, v)
    close(jitted, fnn.dot_product_attention(q, k, v, mask=mask))
    g = xform.grad(lambda *a: nn.dot_product_attention(*a, mask=mask).sum() ** 2,
                   (0, 1, 2))(q, k, v)
    gj = jax.grad(lambda *a: fnn.dot_product_attention(*a, mask=mask).sum() ** 2,
                  (0, 1, 2))(q, k, v)
    for a, e in zip(g, gj):
        close(a, e, 1e-4)


def test_attention_functions_bf16_and_options():
    q, k, v = _qkv((2, 4, 2, 8))
    bq, bk, bv = (a.astype(jjnp.bfloat16) for a in (q, k, v))
    for kw in (dict(dtype=jjnp.bfloat16), dict(force_fp32_for_softmax=True)):
        ours = nn.dot_product_attention(bq, bk, bv, **kw)
        theirs = fnn.dot_product_attention(bq, bk, bv, **kw)
        assert ours.dtype == theirs.dtype
        close(ours, theirs, 2e-2)
    # Mixed dtypes promote (Flax's), a custom einsum pair is used.
    close(nn.dot_product_attention(q, bk, bv), fnn.dot_product_attention(q, bk, bv), 1e-2)
    ein = lambda: jnp.einsum
    close(nn.dot_product_attention(q, k, v, qk_attn_weights_einsum=jnp.einsum,
                                   attn_weights_value_einsum=jnp.einsum),
          fnn.dot_product_attention(q, k, v))
    del ein
    with pytest.raises(ValueError, match="must be specified together"):
        nn.dot_product_attention(q, k, v, qk_attn_weights_einsum=jnp.einsum,
                                 dropout_rate=0.1)
    with pytest.raises(ValueError, match=r"Flax's options \['dropout_rate'\] and jax.nn's "
                                         r"options \['is_causal'\] cannot be combined"):
        nn.dot_product_attention(q, k, v, dropout_rate=0.1, is_causal=True)
    with pytest.raises(ValueError, match="needs a dropout_rng"):
        nn.dot_product_attention(q, k, v, dropout_rate=0.1)
    with pytest.raises(ValueError, match="num_heads must match"):
        nn.dot_product_attention_weights(q, k[:, :, :1])


def test_attention_fns_doctests():
    result = doctest.testmod(_attention_fns, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
