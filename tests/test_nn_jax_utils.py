"""``xform.nn.jax_utils`` against ``flax.jax_utils``: the same calls give equal values,
shapes and dtypes (8 CPU devices from conftest)."""
import doctest
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import jax_utils as fju

import xform
import xform.numpy as xnp
from xform.nn import jax_utils as xju


def _same(a, b, weak=True):
    """Equal trees: structure, and per leaf shape, dtype, weak type and values."""
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = xform.tree_util.tree_flatten(b)
    assert str(ta).replace("PyTreeDef", "") == str(tb).replace("PyTreeDef", ""), (ta, tb)
    for x, y in zip(la, lb):
        assert np.shape(x) == np.shape(y) and np.asarray(x).dtype == np.asarray(y).dtype
        if weak:
            assert getattr(x, "weak_type", None) == getattr(y, "weak_type", None)
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)


def test_replicate_unreplicate_and_pmapped_train_step_as_flax():
    tree = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": 1.5,
            "i": np.int32(7), "k": np.arange(4)}
    jtree = dict(tree, w=jnp.asarray(2.0), s=jnp.float32(3.0))
    xtree = dict(tree, w=xnp.asarray(2.0), s=xnp.float32(3.0))
    jrep, xrep = fju.replicate(jtree), xju.replicate(xtree)
    _same(jrep, xrep)
    assert xrep["a"].shape == (8, 2, 3)
    assert tuple(xrep["a"].sharding.spec) == ("_internal_pmap_axis_name",)
    _same(fju.unreplicate(jrep), xju.unreplicate(xrep))
    # a value replicated whole over the devices comes back whole (not its first row)
    whole = [lib.pmap(lambda v: lib.lax.psum(v, "i"), "i", out_axes=None)(x)
             for lib, x in ((jax, jrep["a"]), (xform, xrep["a"]))]
    _same(fju.unreplicate(whole[0]), xju.unreplicate(whole[1]))
    # a device subset; NumPy leaves unreplicate to NumPy; scalars pass through
    _same(fju.replicate(tree, jax.local_devices()[:3]),
          xju.replicate(tree, xform.local_devices()[:3]))
    host = {"n": np.ones((2, 3)), "s": np.float32(4.0)}
    ju, xu = fju.unreplicate(host), xju.unreplicate(host)
    assert type(ju["n"]) is type(xu["n"]) is np.ndarray
    _same(ju, xu)

    # Flax's ensembling pattern: replicate the state, a pmapped step, unreplicate.
    def make_step(lib):
        def loss(w, x, y):
            return ((x @ w["k"] + w["b"] - y) ** 2).mean()

        def step(w, x, y):
            g = lib.grad(loss)(w, x, y)
            g = lib.lax.pmean(g, "batch")
            return lib.tree_util.tree_map(lambda p, d: p - 0.1 * d, w, g), \
                lib.lax.pmean(loss(w, x, y), "batch")
        return lib.pmap(step, axis_name="batch")

    rng = np.random.RandomState(0)
    w = {"k": rng.randn(3, 2).astype(np.float32), "b": np.zeros(2, np.float32)}
    x, y = rng.randn(8, 4, 3).astype(np.float32), rng.randn(8, 4, 2).astype(np.float32)
    jstate, xstate = fju.replicate(w), xju.replicate(w)
    jstep, xstep = make_step(jax), make_step(xform)
    for _ in range(2):
        jstate, jl = jstep(jstate, x, y)
        xstate, xl = xstep(xstate, x, y)
    _same(fju.unreplicate(jstate), xju.unreplicate(xstate))
    _same(fju.unreplicate(jl), xju.unreplicate(xl))

    # the deprecated pmean warns in both and averages over the axis
    with pytest.warns(DeprecationWarning), warnings.catch_warnings():
        warnings.simplefilter("always")
        jm = jax.pmap(lambda v: fju.pmean(v, "i"), axis_name="i")(x[:, 0])
        xm = xform.pmap(lambda v: xju.pmean(v, "i"), axis_name="i")(x[:, 0])
    _same(jm, xm)


def test_pad_shard_unpad_as_flax():
    def make(lib, **kw):
        f = lib.pmap(lambda w, x, *, z: (x * w + z, x.sum()), in_axes=(None, 0))
        return lambda wrap: wrap(f, **kw)

    x = np.arange(10, dtype=np.float32).reshape(5, 2)   # 5 rows over 8 devices
    z = np.ones(5, np.float32)[:, None]
    for kw, call_kw in [({}, {}), ({}, {"min_device_batch": 2}),
                        ({"static_return": True}, {})]:
        jf = make(jax, **kw)(fju.pad_shard_unpad)
        xf = make(xform, **kw)(xju.pad_shard_unpad)
        jout, xout = jf(3.0, x, z=z, **call_kw), xf(3.0, x, z=z, **call_kw)
        _same(jout, xout, weak=False)
    assert xout[0].shape == (8, 1, 2)
    with pytest.raises(AssertionError, match="Inconsistent batch-sizes"):
        make(xform)(xju.pad_shard_unpad)(3.0, x, z=z[:4])


def test_prefetch_to_device_as_flax():
    batches = [{"x": np.full((8, 2), i, np.float32), "y": np.arange(8) + i}
               for i in range(3)]
    jout = list(fju.prefetch_to_device(iter(batches), 2))
    xout = list(xju.prefetch_to_device(iter(batches), 2))
    assert len(xout) == 3
    _same(jout, xout)
    # one slice per device: laid out as pmap takes it; the xform Array passes too
    assert tuple(xout[0]["x"].sharding.spec) == ("_internal_pmap_axis_name",)
    _same(list(fju.prefetch_to_device(iter([jnp.ones((16, 2))]), 1)),
          list(xju.prefetch_to_device(iter([xnp.ones((16, 2))]), 1)))
    two = xform.local_devices()[:2]
    _same(list(fju.prefetch_to_device(iter(batches[:1]), 1, jax.local_devices()[:2])),
          list(xju.prefetch_to_device(iter(batches[:1]), 1, two)))
    with pytest.raises(ValueError):
        list(fju.prefetch_to_device(iter([np.ones((5, 2))]), 1))
    with pytest.raises(ValueError, match=r"shape \(5, 2\).*multiple of 8"):
        list(xju.prefetch_to_device(iter([np.ones((5, 2))]), 1))


def test_scan_in_dim_and_partial_eval_by_shape_as_flax():
    xs = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

    def body(c, x):
        return c + x, {"y": x * c}

    for axis, keepdims, unroll in [(1, False, 1), ((2, 0), False, 2), ((1,), True, (1,))]:
        init = np.zeros([s for i, s in enumerate(xs.shape)
                         if i not in np.atleast_1d(axis)], np.float32)
        if keepdims:
            init = np.expand_dims(init, tuple(np.atleast_1d(axis)))
        jres = fju.scan_in_dim(body, init, xs, axis=axis, unroll=unroll,
                               keepdims=keepdims)
        xres = xju.scan_in_dim(body, init, xs, axis=axis, unroll=unroll,
                               keepdims=keepdims)
        _same(jres, xres)

    def fn(lib):
        def f(x, i, scale):
            return {"y": x * scale, "s": i.sum(), "c": lib.ones(3) + scale, "k": 2}
        return f

    spec = [(2, 3), ((4,), np.int32)]
    jout = fju.partial_eval_by_shape(fn(jnp), spec, 2.0)
    xout = xju.partial_eval_by_shape(fn(xnp), spec, scale=2.0)
    for k in ("y", "s"):
        assert isinstance(jout[k], jax.ShapeDtypeStruct)
        assert isinstance(xout[k], xform.ShapeDtypeStruct)
        assert (jout[k].shape, jout[k].dtype) == (xout[k].shape, xout[k].dtype)
    assert xout["k"] == jout["k"] == 2
    _same(jout["c"], xout["c"])


def test_doctests():
    result = doctest.testmod(xju, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
