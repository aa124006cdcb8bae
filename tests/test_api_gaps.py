"""Small JAX 0.10.2 names xform lacked, each checked against jax at run time:
scipy.stats (gaussian_kde, mode, rankdata, sem), monitoring and the events xform records,
ad_checkpoint's policy answers, checkify's ErrorCategory/init_error,
create_hybrid_device_mesh, sharding's abstract-mesh names, stages.ArgInfo,
tree_util.default_registry, random.random_gamma_p."""
import numpy as np
import pytest

import jax
import jax.ad_checkpoint  # noqa: F401  (jax.ad_checkpoint is not imported by jax)
import jax.scipy.stats as jstats
from jax.experimental import checkify as jck
from jax.experimental import mesh_utils as jmu

import xform
import xform.numpy as xjnp
from xform.core.avals import ShapedArray
import xform.scipy.stats as xstats
from xform.experimental import checkify as xck
from xform.experimental import mesh_utils as xmu

RNG = np.random.RandomState(0)
INTS = np.array([[1, 2, 1, 3, 2, 1], [3, 1, 3, 2, 1, 3], [1, 2, 2, 3, 1, 2]])


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ---- scipy.stats (each library's cases in one jit: one compile, not one per op) ----

def _both(fn, *args, tol=1e-5):
    """``fn(lib, stats, *args)`` jitted under jax and under xform, compared leafwise. The
    small inputs are closed over: constants XLA folds, so each compile is quick."""
    want = jax.jit(lambda: fn(jax, jstats, *args))()
    got = xform.jit(lambda: fn(xform, xstats, *args))()
    assert len(jax.tree_util.tree_leaves(want)) == len(xform.tree_util.tree_leaves(got))
    for w, g in zip(jax.tree_util.tree_leaves(want), xform.tree_util.tree_leaves(got)):
        assert g.shape == w.shape and g.dtype == w.dtype
        _close(g, w, tol)


def test_mode_rankdata_sem_match_jax():
    def fn(lib, st, ints, x, xnan):
        return ([st.mode(ints, **kw) for kw in ({}, {"axis": 1, "keepdims": True},
                                                {"axis": None})],
                [st.rankdata(x, m) for m in ("average", "min", "max", "dense", "ordinal")],
                st.rankdata(ints, "average", axis=1), st.rankdata(xnan),
                [st.sem(xnan, **kw) for kw in ({}, {"axis": None, "ddof": 0},
                                               {"axis": 1, "keepdims": True},
                                               {"nan_policy": "omit"})])
    xnan = INTS.astype(np.float32)
    xnan[0, 3] = xnan[2, 1] = np.nan
    _both(fn, INTS, np.array([3., 1., 2., 3., 1., 5.]), xnan)


def test_summary_errors_match_jax():
    x = np.array([1., 0.])
    for fn, kw, exc in [("rankdata", {"method": "nope"}, ValueError),
                        ("rankdata", {"nan_policy": "omit"}, NotImplementedError),
                        ("mode", {"nan_policy": "bad"}, ValueError),
                        ("mode", {"nan_policy": "raise"}, NotImplementedError)]:
        for lib in (jstats, xstats):
            with pytest.raises(exc):
                getattr(lib, fn)(x, **kw)


def test_gaussian_kde_matches_jax():
    def fn(lib, st, data, w, pts, d1, other, key):
        kdes = [st.gaussian_kde(data, bw, w) for bw in (None, "silverman")]
        k1 = st.gaussian_kde(d1, lambda k: k.neff ** -0.2)
        k2 = st.gaussian_kde(other, 0.5)
        return ([k.covariance for k in kdes + [k1, k2]], kdes[0](pts), kdes[1].logpdf(pts),
                kdes[0].integrate_gaussian(lib.numpy.zeros(2), lib.numpy.eye(2)),
                k1.integrate_box_1d(-1., 0.5), k1.integrate_kde(k2),
                k1.resample(key, (3,)), k1.pdf(d1[:2]))
    data, w, pts = RNG.randn(2, 7), np.arange(1., 8.), RNG.randn(2, 3)
    d1, other = RNG.randn(6), RNG.randn(4)
    args = data, w, pts, d1, other  # closed over (constants), as in _both
    want = jax.jit(lambda key: fn(jax, jstats, *args, key))(jax.random.key(1))
    got = xform.jit(lambda key: fn(xform, xstats, *args, key))(xform.random.key(1))
    for w_, g in zip(jax.tree_util.tree_leaves(want), xform.tree_util.tree_leaves(got)):
        _close(g, w_, 1e-4)
    kde = xstats.gaussian_kde(np.array([0., 1., 3.]))  # a pytree: through jit and back
    assert xform.jit(lambda k: k)(kde).n == 3
    with pytest.raises(NotImplementedError):
        kde.set_bandwidth("scott")
    with pytest.raises(ValueError, match="dimension"):
        kde(np.ones((2, 3)))


# ---- monitoring ----

def _events(lib, cache_dir, clear):
    seen = []
    lib.monitoring.register_event_listener(lambda e, **kw: seen.append(e))
    lib.monitoring.register_event_duration_secs_listener(
        lambda e, secs, **kw: seen.append((e, tuple(kw))))
    lib.config.update("jax_compilation_cache_dir", cache_dir)
    lib.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    try:
        for _ in range(2):  # a compile that writes the entry, then a hit from disk
            lib.jit(lambda x: x * 3 + 0.6125)(np.ones(3, np.float32)).block_until_ready()
            clear()
    finally:
        lib.monitoring.clear_event_listeners()
        lib.config.update("jax_compilation_cache_dir", None)
        lib.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    return seen


def test_monitoring_records_jaxs_events(tmp_path, monkeypatch):
    from jax._src import compilation_cache
    from xform.interpreters import compiler
    compilation_cache.reset_cache()  # so the once-per-process adoption event comes again
    monkeypatch.setattr(compiler, "_adoption_recorded", False)
    want = _events(jax, str(tmp_path / "j"), jax.clear_caches)
    got = _events(xform, str(tmp_path / "x"), compiler.clear_caches)
    # not recorded by xform: the compile time saved (its entries hold no compile time)
    skip = {("/jax/compilation_cache/compile_time_saved_sec", ())}
    assert "/jax/compilation_cache/tasks_using_cache" in got
    assert got == [e for e in want if e not in skip]
    assert ("/jax/core/compile/backend_compile_duration", ("fun_name",)) in got


def test_monitoring_listener_api():
    for lib in (jax, xform):
        seen = []
        def listener(e, v, **kw):  # noqa: E306
            seen.append((e, v, kw))
        lib.monitoring.register_scalar_listener(listener)
        lib.monitoring.record_scalar("/t/s", 2.5, tag="a")
        lib.monitoring.unregister_scalar_listener(listener)
        lib.monitoring.record_scalar("/t/s", 3.0)
        with pytest.raises(AssertionError):
            lib.monitoring.unregister_scalar_listener(listener)
        assert seen == [("/t/s", 2.5, {"tag": "a"})]
    assert ({n for n in dir(jax.monitoring) if not n.startswith("_")}
            <= set(dir(xform.monitoring)))


# ---- ad_checkpoint ----

def _remat_grad(lib, policy):
    def f(x):
        y = lib.ad_checkpoint.checkpoint_name(lib.numpy.sin(x), "y")
        return lib.numpy.sum(lib.numpy.cos(y) * x)
    g = lib.grad(lib.checkpoint(f, policy=policy))
    return g(np.arange(3.0, dtype=np.float32))


@pytest.mark.parametrize("answer", ["Saveable", "Recompute", "Offloadable"])
def test_policy_answers(answer):
    def policy_for(lib):
        ac = lib.ad_checkpoint
        ans = ac.Offloadable("device", "pinned_host") if answer == "Offloadable" else getattr(
            ac, answer)
        return lambda prim, *_, **params: ans if params.get("name") == "y" else ac.Recompute
    _close(_remat_grad(xform, policy_for(xform)), _remat_grad(jax, policy_for(jax)))
    if answer != "Recompute":  # a saved (on CPU: offloaded = saved) residual is listed
        from xform.transforms.checkpoint import saved_residuals
        f = xform.checkpoint(lambda x: xjnp.sum(xjnp.cos(xform.ad_checkpoint.checkpoint_name(
            xjnp.sin(x), "y"))), policy=policy_for(xform))
        assert len(saved_residuals(f, np.ones(3, np.float32))) == 2


def test_bad_policy_answer_is_a_type_error():
    with pytest.raises(TypeError, match="instantiated `Offloadable"):
        _remat_grad(xform, lambda *_, **__: xform.ad_checkpoint.Offloadable)


# ---- checkify, mesh_utils ----

def test_checkify_init_error_and_category():
    assert xck.init_error.get() is None and jck.init_error.get() is None
    xck.check_error(xck.init_error)
    assert xck.ErrorCategory == jck.ErrorCategory  # type['JaxException']


def test_create_hybrid_device_mesh_matches_jax():
    ids = lambda m: np.vectorize(lambda d: d.id)(m)  # noqa: E731
    for mesh_shape, dcn in [((2, 4), (1, 1)), ((8,), (1,))]:
        np.testing.assert_array_equal(
            ids(xmu.create_hybrid_device_mesh(mesh_shape, dcn, process_is_granule=True)),
            ids(jmu.create_hybrid_device_mesh(mesh_shape, dcn, process_is_granule=True)))
    for args, kw in [(((2, 4), (1, 1)), {}), (((2, 4), (2, 1)), {"process_is_granule": True}),
                     (((2, 2), (1, 1)), {"process_is_granule": True})]:
        msgs = []
        for mu, devs in [(jmu, jax.devices()), (xmu, xform.devices())]:
            with pytest.raises(ValueError) as e:
                mu.create_hybrid_device_mesh(*args, devs, **kw)
            msgs.append(str(e.value).replace("CpuDevice(id=0)", "cpu:0"))
        assert msgs[0] == msgs[1]


# ---- sharding, stages, tree_util, random ----

def test_abstract_mesh_names_match_jax():
    out = []
    for sh in (jax.sharding, xform.sharding):
        dev = sh.AbstractDevice(device_kind="cpu", num_cores=None, platform="cpu")
        m = sh.AbstractMesh((2,), ("x",), (sh.AxisType.Explicit,), abstract_device=dev)
        with sh.use_abstract_mesh(m):
            inside = repr(sh.get_abstract_mesh())
            with pytest.raises(ValueError, match="cannot change the size"):
                with sh.use_abstract_mesh(sh.AbstractMesh((4,), ("x",))):
                    pass
        out.append((repr(dev), inside, sh.get_abstract_mesh().empty))
        with pytest.raises(ValueError, match="Expected mesh of type"):
            sh.use_abstract_mesh(object())
    assert out[0] == out[1]
    assert (repr(xform.sharding.make_single_device_sharding(xform.devices()[1]))
            == repr(jax.sharding.make_single_device_sharding(jax.devices()[1])))


def test_arg_info_and_default_registry():
    a = xform.stages.ArgInfo(ShapedArray((2,), np.float32), True)
    b = jax.stages.ArgInfo(jax.core.ShapedArray((2,), np.float32), True)
    assert (a.shape, a.dtype, a.donated) == (b.shape, b.dtype, b.donated)
    xr, jr = xform.tree_util.default_registry, jax.tree_util.default_registry
    tree = {"a": 1, "b": [2, None, (3,)]}
    assert xr.flatten(tree)[0] == jr.flatten(tree)[0]
    assert str(xr.flatten_with_path(tree)[0]) == str(jr.flatten_with_path(tree)[0])
    for t in (tree, [1, 2], None, 1):
        assert str(xr.flatten_one_level(t)) == str(jr.flatten_one_level(t))
    assert [xr.is_node(t) for t in (tuple, int, type(None))] == [
        jr.is_node(t) for t in (tuple, int, type(None))]


def test_random_gamma_p_is_jaxs_primitive():
    # gamma samples are one random_gamma_p equation in both (values: tests/test_random*);
    # NB xform's binds raw key data, JAX's typed keys
    for lib in (jax, xform):
        jaxpr = lib.make_jaxpr(lambda k, a: lib.random.loggamma(k, a))(
            lib.random.key(0), np.ones(3, np.float32))
        assert "random_gamma[log_space=True]" in str(jaxpr)
    assert xform.random.random_gamma_p.name == jax.random.random_gamma_p.name


# ---- lax tokens ----

def test_tokens_lower_and_run_as_jaxs():
    texts = []
    for lib in (jax, xform):
        lax = lib.lax
        f = lib.jit(lambda t, x: (lax.after_all(t, lax.create_token(x)), x + 1))
        tok = lax.create_token()
        texts.append([line.split("=", 1)[-1].strip() for line in
                      f.lower(tok, 1.).as_text().splitlines() if "token" in line])
        out_tok, y = f(tok, 1.)
        assert float(y) == 2.0
        lax.after_all(out_tok, lax.after_all())  # a result token is a token again
        with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
            lax.after_all(tok, 1.)
    assert texts[0][1:] == texts[1][1:]  # the ops (the signature lines differ in attrs)
    assert "stablehlo.after_all" in texts[1][-2]
