"""xform.nn attention vs flax.linen: the attention functions and masks, the
MultiHeadDotProductAttention family (same key -> same variables and outputs, eagerly and
under jit; dropout masks; gradients; the decode cache; bfloat16); errors; doctests."""
import doctest
import warnings

import flax.linen as fnn
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import nn
from xform.nn import _attention_fns

from nn_oracle import close, fjit, same_leaves

R = np.random.RandomState(0)


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
              fjit(fnn.dot_product_attention_weights, **kw)(q, k))
        close(nn.dot_product_attention(q, k, v, **kw),
              fjit(fnn.dot_product_attention, **kw)(q, k, v))
    # Flax's dropout, bit for bit: same key -> same mask.
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(3)))
    for bd in (True, False):
        kw = dict(dropout_rng=key, dropout_rate=0.4, broadcast_dropout=bd)
        close(nn.dot_product_attention(q, k, v, mask=mask, **kw),
              fjit(fnn.dot_product_attention, mask=mask, **kw)(q, k, v))
    jitted = xform.jit(lambda *a: nn.dot_product_attention(*a, mask=mask,
                                                           deterministic=True))(q, k, v)
    expected = fjit(fnn.dot_product_attention, mask=mask)(q, k, v)
    close(jitted, expected)
    g = xform.grad(lambda *a: nn.dot_product_attention(*a, mask=mask).sum() ** 2,
                   (0, 1, 2))(q, k, v)
    gj = jax.jit(jax.grad(lambda *a: fnn.dot_product_attention(*a, mask=mask).sum() ** 2,
                  (0, 1, 2)))(q, k, v)
    for a, e in zip(g, gj):
        close(a, e, 1e-4)


def test_attention_functions_bf16_and_options():
    q, k, v = _qkv((2, 4, 2, 8))
    bq, bk, bv = (a.astype(jjnp.bfloat16) for a in (q, k, v))
    for kw in (dict(dtype=jjnp.bfloat16), dict(force_fp32_for_softmax=True)):
        ours = nn.dot_product_attention(bq, bk, bv, **kw)
        theirs = fjit(fnn.dot_product_attention, **kw)(bq, bk, bv)
        assert ours.dtype == theirs.dtype
        close(ours, theirs, 2e-2)
    # Mixed dtypes promote (Flax's), a custom einsum pair is used.
    close(nn.dot_product_attention(q, bk, bv), fjit(fnn.dot_product_attention)(q, bk, bv),
          1e-2)
    close(nn.dot_product_attention(q, k, v, qk_attn_weights_einsum=jnp.einsum,
                                   attn_weights_value_einsum=jnp.einsum),
          fjit(fnn.dot_product_attention)(q, k, v))
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


def test_plain_call_that_jax_nn_rejects_runs_flax():
    # A value depth other than the key's, or integer inputs: valid for Flax only, so
    # the plain call is Flax's (it used to run jax.nn's: an error, or int32 weights).
    q, k, _ = _qkv((2, 3, 2, 4))
    v = R.randn(2, 3, 2, 3).astype(np.float32)
    close(nn.dot_product_attention(q, k, v), fjit(fnn.dot_product_attention)(q, k, v))
    qi, ki, vi = (np.round(a * 2).astype(np.int32) for a in (q, k, k))
    ours, theirs = nn.dot_product_attention(qi, ki, vi), fnn.dot_product_attention(qi, ki, vi)
    assert ours.dtype == theirs.dtype == np.float32
    close(ours, theirs)


def test_attention_fns_doctests():
    result = doctest.testmod(_attention_fns, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ---- modules ----

RNGS = lambda lib: {"params": lib.random.PRNGKey(0), "dropout": lib.random.PRNGKey(1)}
X = R.randn(2, 5, 6).astype(np.float32)
KV = R.randn(2, 4, 6).astype(np.float32)


@pytest.mark.parametrize("cls,kw,args", [
    ("MultiHeadDotProductAttention", dict(num_heads=2), (X,)),
    ("MultiHeadAttention", dict(num_heads=3, qkv_features=9, out_features=4,
                                normalize_qk=True, use_bias=False), (X, KV)),
    ("MultiHeadDotProductAttention", dict(num_heads=2, dropout_rate=0.3,
                                          broadcast_dropout=False), (X, KV, KV + 1)),
    ("SelfAttention", dict(num_heads=2, dropout_rate=0.5, deterministic=False), (X,)),
])
def test_attention_modules_vs_flax(cls, kw, args):
    """Same variables, same outputs (Flax's dropout masks included), eager and jit."""
    ours, theirs = getattr(nn, cls)(**kw), getattr(fnn, cls)(**kw)
    call = {} if "deterministic" in kw or "dropout_rate" not in kw else \
        dict(deterministic=False)
    mask = np.asarray(fnn.make_attention_mask(np.ones((2, 5)), np.arange(
        args[-1].shape[1]) < 3 * np.ones((2, 1))))
    if cls != "SelfAttention":
        call["mask"] = mask
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        v = ours.init(RNGS(xform), *args, **call)
        fv = fjit(theirs.init, **call)(RNGS(jax), *args)
        same_leaves(v, fv, 0)
        fy = fjit(theirs.apply, rngs=RNGS(jax), **call)(fv, *args)
        close(ours.apply(v, *args, rngs=RNGS(xform), **call), fy)
        jitted = xform.jit(lambda v, *a: ours.apply(v, *a, rngs=RNGS(xform), **call))
        close(jitted(v, *args), fy)


def test_attention_grad_sow_and_bf16():
    kw = dict(num_heads=2, qkv_features=8)
    ours = nn.MultiHeadDotProductAttention(**kw)
    theirs = fnn.MultiHeadDotProductAttention(**kw)
    v, fv = ours.init(RNGS(xform), X), fjit(theirs.init)(RNGS(jax), X)
    loss = lambda m: lambda p, x: (m.apply(p, x) ** 2).sum()
    g = xform.jit(xform.grad(loss(ours), (0, 1)))(v, X)
    fg = jax.jit(jax.grad(loss(theirs), (0, 1)))(fv, X)
    same_leaves(g[0], fg[0], 1e-4)
    close(g[1], fg[1], 1e-4)
    _, state = ours.apply(v, X, sow_weights=True, mutable=["intermediates"])
    _, fstate = fjit(theirs.apply, sow_weights=True, mutable=["intermediates"])(fv, X)
    same_leaves(state, fstate, 1e-5)
    bkw = dict(kw, dtype=jjnp.bfloat16)
    ours = nn.MultiHeadDotProductAttention(**bkw)
    theirs = fnn.MultiHeadDotProductAttention(**bkw)
    v, fv = ours.init(RNGS(xform), X), fjit(theirs.init)(RNGS(jax), X)
    same_leaves(v, fv, 0)
    y, fy = ours.apply(v, X), fjit(theirs.apply)(fv, X)
    assert y.dtype == fy.dtype == jjnp.bfloat16
    close(y, fy, 3e-2)


def test_decode_cache_vs_full_causal_pass():
    """Step-by-step decoding with the cache equals the full causal pass (and Flax's
    cache contents and outputs, step by step)."""
    kw = dict(num_heads=2, qkv_features=8)
    full = nn.MultiHeadDotProductAttention(**kw)
    ffull = fnn.MultiHeadDotProductAttention(**kw)
    v = full.init(RNGS(xform), X)
    causal = nn.make_causal_mask(np.ones((2, 5)))
    expected = full.apply(v, X, mask=causal)
    dec = nn.MultiHeadDotProductAttention(**kw, decode=True)
    fdec = fnn.MultiHeadDotProductAttention(**kw, decode=True)
    cache = dec.init(RNGS(xform), X)["cache"]
    fcache = fjit(fdec.init)(RNGS(jax), X)["cache"]
    same_leaves(cache, fcache, 0)
    fv = fjit(ffull.init)(RNGS(jax), X)
    fstep = jax.jit(lambda c, x: fdec.apply({"params": fv["params"], "cache": c}, x,
                                            mutable=["cache"]))
    step = xform.jit(lambda c, x: dec.apply({"params": v["params"], "cache": c}, x,
                                           mutable=["cache"]))
    for t in range(X.shape[1]):
        y, upd = step(cache, X[:, t:t + 1])
        fy, fupd = fstep(fcache, X[:, t:t + 1])
        cache, fcache = upd["cache"], fupd["cache"]
        close(y, expected[:, t:t + 1])
        close(y, fy)
    same_leaves(cache, fcache, 1e-5)
    assert int(cache["cache_index"]) == 5
    with pytest.raises(ValueError, match=r"Autoregressive cache shape error, expected query "
                                         r"shape \(2, 1, 2, 4\) instead got \(2, 2, 2, 4\)"):
        dec.apply({"params": v["params"], "cache": cache}, X[:, :2], mutable=["cache"])


def test_attention_module_errors_and_doctests():
    with pytest.raises(ValueError, match=r"Memory dimension \(6\) must be divisible by "
                                         r"number of heads \(4\)"):
        nn.MultiHeadDotProductAttention(num_heads=4).init(RNGS(xform), X)
    m = nn.MultiHeadDotProductAttention(num_heads=2, dropout_rate=0.1)
    with pytest.raises(ValueError, match='"deterministic" must be passed'):
        m.init(RNGS(xform), X)
    with pytest.raises(ValueError, match="`inputs_k` cannot be None"):
        m.init(RNGS(xform), X, inputs_v=X, deterministic=True)
    from xform.nn import _attention
    result = doctest.testmod(_attention, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
