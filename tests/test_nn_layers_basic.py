"""xform.nn basic layers vs flax.linen: same key -> same variables and outputs, eagerly
and under jit; BatchNorm statistics updates and axis_name; Dropout masks; bfloat16."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import flax.linen as fnn
import jax
import jax.numpy as jjnp

import xform
import xform.numpy as jnp
import xform.nn as nn
from nn_oracle import assert_trees, keys

R = np.random.RandomState(0)
X = R.randn(2, 3, 4).astype(np.float32)
IDS = np.array([[1, 4, 0], [2, 2, 5]], np.int32)

# (name, constructor args, kwargs, input, init/apply kwargs)
CASES = [
    ("Dense", (5,), {}, X),
    ("Dense", (5,), {"use_bias": False, "kernel_init": "glorot_uniform"}, X),
    ("DenseGeneral", ((2, 3),), {"axis": (-2, -1)}, X),
    ("DenseGeneral", (5,), {"batch_dims": (0,), "axis": -1}, X),
    ("Einsum", ((4, 6),), {"einsum_str": "bti,io->bto"}, X),
    ("Einsum", ((4, 6),), {"einsum_str": "...i,io->...o"}, X),    # bias shape (6,)
    ("Embed", (6, 3), {}, IDS),
    ("LayerNorm", (), {}, X),
    ("LayerNorm", (), {"reduction_axes": (-2, -1), "feature_axes": -1,
                       "use_fast_variance": False}, X),
    ("RMSNorm", (), {}, X),
    ("GroupNorm", (), {"num_groups": 2}, X),
    ("GroupNorm", (), {"num_groups": None, "group_size": 1}, X),
    ("BatchNorm", (), {"use_running_average": True}, X),
    ("InstanceNorm", (), {}, X),
]


def _build(lib, name, args, kw):
    kw = dict(kw)
    if kw.get("kernel_init") == "glorot_uniform":
        kw["kernel_init"] = lib.initializers.glorot_uniform()
    return getattr(lib, name)(*args, **kw)


@pytest.mark.parametrize("name,args,kw,x", CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_layer_matches_flax(name, args, kw, x):
    xk, fk = keys(11)
    xm, fm = _build(nn, name, args, kw), _build(fnn, name, args, kw)
    v, fv = xm.init(xk, x), fm.init(fk, x)
    assert_trees(v, fv)
    # bit-exact: eager vs eager and jit vs jit (XLA fuses the norms' chains in jit)
    assert_trees(xm.apply(v, x), fm.apply(fv, x))
    assert_trees(xform.jit(xm.apply)(v, x), jax.jit(fm.apply)(fv, x))


def test_embed_attend():
    xk, fk = keys(12)
    xm, fm = nn.Embed(7, 4), fnn.Embed(7, 4)
    v, fv = xm.init(xk, IDS), fm.init(fk, IDS)
    q = R.randn(3, 4).astype(np.float32)
    assert_trees(xm.apply(v, q, method=xm.attend), fm.apply(fv, q, method=fm.attend),
                 rtol=1e-6)
    with pytest.raises(ValueError, match="must be an integer"):
        xm.apply(v, q)


@pytest.mark.parametrize("momentum", [0.9, 0.99])
def test_batchnorm_training_updates_stats(momentum):
    xk, fk = keys(13)
    xm = nn.BatchNorm(use_running_average=False, momentum=momentum)
    fm = fnn.BatchNorm(use_running_average=False, momentum=momentum)
    v, fv = xm.init(xk, X), fm.init(fk, X)
    assert_trees(v, fv)
    y, upd = xm.apply(v, X, mutable=["batch_stats"])
    fy, fupd = fm.apply(fv, X, mutable=["batch_stats"])
    assert_trees(y, fy, rtol=1e-5, atol=1e-6)
    assert_trees(upd, fupd, rtol=1e-6, atol=1e-7)
    ev = nn.BatchNorm(use_running_average=True).apply({**v, **upd}, X)
    fev = fnn.BatchNorm(use_running_average=True).apply({**fv, **fupd}, X)
    assert_trees(ev, fev, rtol=1e-5, atol=1e-6)


def test_batchnorm_axis_name_under_vmap_matches_flax_and_full_batch():
    xk, fk = keys(14)
    xs = R.randn(4, 2, 3).astype(np.float32)   # 4 "devices" x local batch 2
    xm = nn.BatchNorm(use_running_average=False, axis_name="batch")
    fm = fnn.BatchNorm(use_running_average=False, axis_name="batch")
    v, fv = xm.init(xk, xs[0]), fm.init(fk, xs[0])

    def xstep(x):
        return xm.apply(v, x, mutable=["batch_stats"])
    y, upd = xform.vmap(xstep, axis_name="batch")(xs)
    fy, fupd = jax.vmap(lambda x: fm.apply(fv, x, mutable=["batch_stats"]),
                        axis_name="batch")(xs)
    assert_trees(y, fy, rtol=1e-5, atol=1e-5)
    assert_trees(upd, fupd, rtol=1e-6, atol=1e-6)
    # cross-device statistics equal full-batch statistics
    full = nn.BatchNorm(use_running_average=False).apply(v, xs.reshape(8, 3),
                                                         mutable=["batch_stats"])[0]
    np.testing.assert_allclose(np.asarray(y).reshape(8, 3), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("broadcast_dims", [(), (1,)])
def test_dropout_masks_match_flax(broadcast_dims):
    xk, fk = keys(15)
    xm = nn.Dropout(0.3, broadcast_dims=broadcast_dims)
    fm = fnn.Dropout(0.3, broadcast_dims=broadcast_dims)
    y = xm.apply({}, X, deterministic=False, rngs={"dropout": xk})
    fy = fm.apply({}, X, deterministic=False, rngs={"dropout": fk})
    assert_trees(y, fy)
    np.testing.assert_array_equal(xm.apply({}, X, deterministic=True), X)
    z = nn.Dropout(0.5, rng_collection="other").apply(
        {}, X, deterministic=False, rngs={"other": xk})
    fz = fnn.Dropout(0.5, rng_collection="other").apply(
        {}, X, deterministic=False, rngs={"other": fk})
    assert_trees(z, fz)


def test_dropout_inside_model_and_missing_rng_error():
    class M(nn.Module):
        @nn.compact
        def __call__(self, x, train):
            return nn.Dropout(0.5)(nn.Dense(3)(x), deterministic=not train)

    class FM(fnn.Module):
        @fnn.compact
        def __call__(self, x, train):
            return fnn.Dropout(0.5)(fnn.Dense(3)(x), deterministic=not train)

    xk, fk = keys(16)
    v, fv = M().init(xk, X, False), FM().init(fk, X, False)
    out = xform.jit(lambda v, x, k: M().apply(v, x, True, rngs={"dropout": k}))(v, X, xk)
    assert_trees(out, FM().apply(fv, X, True, rngs={"dropout": fk}), rtol=1e-6)
    with pytest.raises(nn.errors.InvalidRngError, match='/Dropout_0 needs PRNG for '
                                                        '"dropout"'):
        M().apply(v, X, True)


def test_sequential_matches_flax():
    xk, fk = keys(17)
    xm = nn.Sequential([nn.Dense(4), nn.relu, nn.LayerNorm(), nn.Dense(2)])
    fm = fnn.Sequential([fnn.Dense(4), fnn.relu, fnn.LayerNorm(), fnn.Dense(2)])
    v, fv = xm.init(xk, X), fm.init(fk, X)
    assert_trees(v, fv)
    assert_trees(xm.apply(v, X), fm.apply(fv, X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,args,kw", [("Dense", (5,), {}),
                                          ("LayerNorm", (), {}), ("RMSNorm", (), {}),
                                          ("DenseGeneral", ((2, 2),), {})])
def test_bfloat16_mixed_precision(name, args, kw):
    xk, fk = keys(18)
    kw = dict(kw, dtype=jnp.bfloat16)
    xm, fm = getattr(nn, name)(*args, **kw), getattr(fnn, name)(*args, **kw)
    v, fv = xm.init(xk, X), fm.init(fk, X)
    assert_trees(v, fv)                      # params stay float32
    y, fy = xform.jit(xm.apply)(v, X), jax.jit(fm.apply)(fv, X)
    assert y.dtype == fy.dtype == jjnp.bfloat16
    np.testing.assert_array_equal(np.asarray(y, np.float32),     # bit-exact
                                  np.asarray(fy, np.float32))
    bf = nn.Dense(3, param_dtype=jnp.bfloat16).init(xk, X)
    fbf = fnn.Dense(3, param_dtype=jjnp.bfloat16).init(fk, X)
    assert_trees(bf, fbf)


def test_batchnorm_cross_device_stats_under_pmap():
    n = min(4, xform.device_count(), jax.device_count())
    xk, fk = keys(19)
    xs = R.randn(n, 2, 3).astype(np.float32)
    xm = nn.BatchNorm(use_running_average=False, axis_name="dev")
    fm = fnn.BatchNorm(use_running_average=False, axis_name="dev")
    v, fv = xm.init(xk, xs[0]), fm.init(fk, xs[0])
    y, upd = xform.pmap(lambda x: xm.apply(v, x, mutable=["batch_stats"]),
                        axis_name="dev")(xs)
    fy, fupd = jax.pmap(lambda x: fm.apply(fv, x, mutable=["batch_stats"]),
                        axis_name="dev")(xs)
    assert_trees(y, fy, rtol=1e-6, atol=1e-6)
    assert_trees(upd, fupd, rtol=1e-6, atol=1e-7)


@given(batch=st.integers(1, 3), fin=st.integers(1, 5), fout=st.integers(1, 5),
       seed=st.integers(0, 2**31 - 1))
def test_dense_params_match_flax_for_any_shape_and_key(batch, fin, fout, seed):
    x = np.ones((batch, fin), np.float32)
    v = nn.Dense(fout).init(xform.random.PRNGKey(seed), x)
    fv = fnn.Dense(fout).init(jax.random.PRNGKey(seed), x)
    assert_trees(v, fv)
