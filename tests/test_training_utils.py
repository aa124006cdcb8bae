"""xform.training's common_utils, early_stopping, dynamic_scale, lr_schedule and
prefetch_iterator against flax.training's: same values step for step and same errors."""
import doctest
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from flax.training import (common_utils as fcu, dynamic_scale as fds,
                           early_stopping as fes, lr_schedule as flr,
                           prefetch_iterator as fpi)

import xform
import xform.numpy as jnp
from xform.training import (common_utils, dynamic_scale, early_stopping, lr_schedule,
                            prefetch_iterator)


def test_common_utils_match_flax():
    n = xform.local_device_count()
    assert n == jax.local_device_count()
    batch = {"x": np.arange(4 * n * 3, dtype=np.float32).reshape(4 * n, 3)}
    np.testing.assert_array_equal(common_utils.shard(batch)["x"], fcu.shard(batch)["x"])
    np.testing.assert_array_equal(
        xform.random.key_data(common_utils.shard_prng_key(xform.random.PRNGKey(3))),
        jax.random.key_data(fcu.shard_prng_key(jax.random.PRNGKey(3))))
    labels = np.array([[0, 3], [2, 1]])
    for kw in ({}, {"on_value": 0.9, "off_value": 0.05}):
        np.testing.assert_array_equal(common_utils.onehot(jnp.asarray(labels), 4, **kw),
                                      fcu.onehot(jjnp.asarray(labels), 4, **kw))
    steps = [{"loss": np.float32(i), "acc": np.full(n, i, np.float32)} for i in range(3)]
    sx, sj = common_utils.stack_forest(steps), fcu.stack_forest(steps)
    for k in sx:
        np.testing.assert_array_equal(sx[k], sj[k])
    per_device = [{"loss": np.full((n,), i, np.float32)} for i in range(3)]
    mx = common_utils.get_metrics(xform.pmap(lambda m: m)(per_device))
    mj = fcu.get_metrics(jax.pmap(lambda m: m)(per_device))
    np.testing.assert_array_equal(mx["loss"], mj["loss"])


def test_early_stopping_matches_flax():
    losses = [4, 3, 3.0005, 3, 2, 2, 2, 2, 1, 1]
    for kw in ({"min_delta": 1e-3, "patience": 2}, {"patience": 0}, {}):
        ex, ej = early_stopping.EarlyStopping(**kw), fes.EarlyStopping(**kw)
        for loss in losses:
            ex, ej = ex.update(loss), ej.update(loss)
            assert repr(ex).split("(", 1)[1] == repr(ej).split("(", 1)[1]
        assert repr(ex.reset()).split("(", 1)[1] == repr(ej.reset()).split("(", 1)[1]
    assert xform.tree_util.tree_leaves(ex) == jax.tree_util.tree_leaves(ej)


def test_dynamic_scale_matches_flax():
    def loss(lib):
        np_ = jjnp if lib == "jax" else jnp
        return lambda p, x: (np_.sum((p["w"].astype(np_.float16) * x) ** 2), p["w"].sum())

    x = np.array([1., 200., 3.], np.float32)
    w = np.array([0.5, 1.5, -2.], np.float32)
    for kw in ({"growth_interval": 2}, {"growth_interval": 1, "minimum_scale": 2.0**12}):
        dx, dj = dynamic_scale.DynamicScale(**kw), fds.DynamicScale(**kw)
        fx = xform.jit(lambda d, p, x: d.value_and_grad(loss("xform"), has_aux=True)(p, x))
        fj = jax.jit(lambda d, p, x: d.value_and_grad(loss("jax"), has_aux=True)(p, x))
        for i in range(5):
            xi = x / (4.0 ** i)   # overflows float16 at first, then finite steps
            rx = fx(dx, {"w": jnp.asarray(w)}, jnp.asarray(xi))
            rj = fj(dj, {"w": jjnp.asarray(w)}, jjnp.asarray(xi))
            dx, dj = rx.dynamic_scale, rj.dynamic_scale
            assert bool(rx.finite) == bool(rj.finite)
            assert float(dx.scale) == float(dj.scale) and int(dx.fin_steps) == \
                int(dj.fin_steps)
            np.testing.assert_allclose(rx.grad["w"], rj.grad["w"], rtol=1e-3)
            np.testing.assert_allclose(rx.aux[0], rj.aux[0], rtol=1e-3)
    assert dynamic_scale.DynamicScale().minimum_scale == fds.DynamicScale().minimum_scale


def test_lr_schedules_match_flax():
    steps = np.array([0, 3, 10, 17, 25, 40])
    cases = [("create_constant_learning_rate_schedule", (0.1, 10), {"warmup_length": 1.5}),
             ("create_stepped_learning_rate_schedule", (0.1, 10, [[1, 0.5], [2.5, 0.1]]),
              {"warmup_length": 0.5}),
             ("create_cosine_learning_rate_schedule", (0.1, 10, 4), {})]
    for name, args, kw in cases:
        fx, fj = getattr(lr_schedule, name)(*args, **kw), getattr(flr, name)(*args, **kw)
        for s in steps:
            np.testing.assert_allclose(fx(jnp.asarray(s)), fj(jjnp.asarray(s)),
                                       rtol=1e-6, atol=1e-8)


def test_prefetch_iterator_matches_flax():
    def gen():
        yield from range(5)
        raise KeyError("source failed")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for lib in (prefetch_iterator, fpi):
            it = lib.PrefetchIterator(gen(), buffer_size=2)
            assert [next(it) for _ in range(5)] == list(range(5))
            with pytest.raises(KeyError, match="source failed"):
                next(it)
            it = lib.PrefetchIterator(iter([1, 2]))
            assert list(it) == [1, 2]
            it.close()
    with pytest.warns(DeprecationWarning, match="PrefetchIterator is deprecated"):
        prefetch_iterator.PrefetchIterator(iter([])).close()


def test_doctests():
    for mod in (common_utils, early_stopping, dynamic_scale, lr_schedule,
                prefetch_iterator):
        r = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert r.attempted and not r.failed, mod.__name__
