"""Public API details: vmap's in_axes/out_axes forms, jit options, device helpers,
disable_jit and x64, each checked against JAX or a Python loop."""
import jax
import jax.numpy as jnp_ref
import numpy as np
import pytest

import xform
import xform.numpy as jnp

RNG = np.random.RandomState(0)


def rand(*shape):
    return RNG.randn(*shape).astype(np.float32)


def test_vmap_pytree_prefix_in_axes_with_none_subtree():
    def f(p, x, np_=jnp):
        return np_.sum(p["w"] * x) + p["b"]
    p = {"w": rand(4, 3), "b": rand(3)}
    x = rand(3)
    in_axes = ({"w": 0, "b": None}, None)
    got = xform.vmap(f, in_axes=in_axes)(p, x)
    want = np.stack([f({"w": p["w"][i], "b": p["b"]}, x) for i in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-5)
    want_jax = jax.vmap(lambda p, x: f(p, x, jnp_ref), in_axes=in_axes)(p, x)
    np.testing.assert_allclose(got, want_jax, rtol=1e-5)


def test_vmap_negative_axes_and_out_axes():
    x = rand(3, 4, 5)
    got = xform.vmap(lambda a: jnp.sum(a, axis=0), in_axes=-1, out_axes=-1)(x)
    want = jax.vmap(lambda a: jnp_ref.sum(a, axis=0), in_axes=-1, out_axes=-1)(x)
    assert got.shape == want.shape == (4, 5)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_vmap_out_axes_pytree_and_none():
    x = rand(6, 2)
    f = lambda a: (a * 2.0, jnp.float32(1.0))  # second output does not depend on a
    got = xform.vmap(f, out_axes=(1, None))(x)
    assert got[0].shape == (2, 6) and got[1].shape == ()
    np.testing.assert_allclose(got[0], (x * 2).T)


def test_vmap_elementwise_broadcasts_size_one_as_jax():
    # an unbatched operand (or a batched per-example scalar) gets a size-1 axis, not a
    # full-size copy, as JAX's broadcast_batcher: XLA then rewrites the division by it
    # as JAX's program (129 and 164 of 600 quotients were an ulp apart)
    rng = np.random.default_rng(0)
    m = rng.standard_normal((200, 3)).astype(np.float32)
    t, s = (rng.standard_normal(n).astype(np.float32) + 2 for n in (3, 200))
    for args, axes in (((m, t), (0, None)), ((m, s), (0, 0)), ((t, m), (None, 0))):
        np.testing.assert_array_equal(xform.vmap(lambda a, b: a / b, axes)(*args),
                                      jax.vmap(lambda a, b: a / b, axes)(*args))
    jx = xform.make_jaxpr(xform.vmap(lambda a, b: a / b, (0, None)))(m, t)
    assert [e.outvars[0].aval.shape for e in jx.jaxpr.eqns] == [(1, 3), (200, 3)]


def test_vmap_axis_size_without_mapped_inputs():
    got = xform.vmap(lambda: jnp.ones(2), in_axes=(), axis_size=3)()
    assert got.shape == (3, 2)


def test_vmap_kwargs_are_mapped_over_axis_0():
    x, y = rand(5, 2), rand(5, 2)
    got = xform.vmap(lambda a, b=None: a * b)(x, b=y)
    np.testing.assert_allclose(got, x * y)


def test_vmap_axis_name_is_accepted():
    x = rand(4)
    np.testing.assert_allclose(xform.vmap(jnp.sin, axis_name="batch")(x), np.sin(x),
                               rtol=1e-6)


def test_nested_vmap_matches_loops():
    x, y = rand(3, 4), rand(5, 4)
    got = xform.vmap(lambda a: xform.vmap(lambda b: jnp.dot(a, b))(y))(x)
    np.testing.assert_allclose(got, x @ y.T, rtol=1e-5)


def test_jit_grad_jit_composition():
    f = xform.jit(lambda x: jnp.sum(jnp.tanh(x) ** 2))
    g = xform.jit(xform.grad(f))
    x = rand(5)
    want = jax.jit(jax.grad(jax.jit(lambda x: jnp_ref.sum(jnp_ref.tanh(x) ** 2))))(x)
    np.testing.assert_allclose(g(x), want, rtol=1e-5)
    # repeated calls of grad(jit(f)) reuse the derived jaxprs, results unchanged
    np.testing.assert_allclose(xform.grad(f)(x), want, rtol=1e-5)
    np.testing.assert_allclose(xform.grad(f)(x), want, rtol=1e-5)


def test_grad_of_jit_closing_over_outer_tracer():
    def outer(a):
        inner = xform.jit(lambda y: jnp.sin(a) * y)
        return inner(2.0)
    np.testing.assert_allclose(xform.grad(outer)(1.0), 2 * np.cos(1.0), rtol=1e-6)


def test_jit_donate_argnums_accepted_and_kwargs():
    f = xform.jit(lambda x, *, scale: x * scale, donate_argnums=0)
    np.testing.assert_allclose(f(np.ones(3, np.float32), scale=2.0), 2 * np.ones(3))


def test_jit_static_argnames():
    calls = []

    def f(x, mode):
        calls.append(mode)
        return x * (2.0 if mode == "double" else 3.0)
    g = xform.jit(f, static_argnames="mode")
    assert float(g(1.0, mode="double")) == 2.0
    assert float(g(1.0, mode="triple")) == 3.0
    assert float(g(1.0, mode="double")) == 2.0
    assert calls == ["double", "triple"]


def test_jit_static_args_left_to_their_defaults():
    from functools import partial

    @partial(xform.jit, static_argnames="n")
    def f(x, n=2):
        return x * n

    @partial(xform.jit, static_argnums=1)
    def g(x, n=3):
        return x * n
    assert [float(f(1.0)), float(f(1.0, n=3)), float(f(1.0, 4))] == [2.0, 3.0, 4.0]
    assert [float(g(1.0)), float(g(1.0, 5))] == [3.0, 5.0]


def test_jit_as_decorator_with_options():
    @xform.jit
    def f(x):
        return x + 1
    assert float(f(1.0)) == 2.0

    from functools import partial

    @partial(xform.jit, static_argnums=1)
    def g(x, n):
        return x * n
    assert float(g(2.0, 3)) == 6.0


def test_disable_jit_runs_python_each_call():
    traces = []

    @xform.jit
    def f(x):
        traces.append(type(x).__name__)
        return x * 2
    f(1.0)
    f(1.0)
    assert len(traces) == 1
    with xform.disable_jit():
        f(1.0)
    assert traces[-1] == "float" and len(traces) == 2  # the Python value itself, as in JAX
    x = xform.device_put(np.float32(1.0))
    f(x)
    f(x)  # now served by the all-Array fast path
    n = len(traces)
    with xform.disable_jit():
        f(x)
    assert len(traces) == n + 1 and traces[-1] == "Array"
    f(x)
    assert len(traces) == n + 1  # compiled again, without re-tracing
    assert not xform.config.jax_disable_jit


def test_device_helpers():
    devs = xform.devices()
    assert devs and xform.device_count() == len(devs)
    x = xform.device_put({"a": np.ones(2, np.float32), "b": [1.0]})
    assert isinstance(x["a"], xform.Array) and x["a"].devices() == {devs[0]}
    assert xform.block_until_ready(x) is x
    y = xform.device_put(np.ones(2, np.float32), devs[-1])
    assert y.devices() == {devs[-1]}


def test_x64_switch_changes_defaults_and_recompiles():
    f = xform.jit(lambda x: x * 2)
    assert jnp.array([1.0]).dtype == np.float32
    assert f(np.ones(2)).dtype == np.float32  # float64 input canonicalized
    try:
        xform.config.update("jax_enable_x64", True)
        assert jnp.array([1.0]).dtype == np.float64
        assert f(np.ones(2)).dtype == np.float64
        assert jnp.arange(3).dtype == np.int64
    finally:
        xform.config.update("jax_enable_x64", False)
    assert f(np.ones(2)).dtype == np.float32


def test_unknown_config_option():
    with pytest.raises(AttributeError, match="Unrecognized config option"):
        xform.config.update("jax_no_such_flag", True)


@pytest.mark.parametrize("name, value", [
    ("jax_numpy_rank_promotion", "foo"), ("jax_numpy_rank_promotion", None),
    ("jax_numpy_rank_promotion", "RAISE"), ("jax_transfer_guard", "x"),
    ("jax_transfer_guard_device_to_host", 1)])
def test_enum_config_options_refuse_other_values_as_jax(name, value):
    # a bad value used to be stored (a later rank check then compared against "foo")
    msgs = []
    for lib in (jax, xform):
        before = getattr(lib.config, name)
        with pytest.raises(ValueError, match="new enum value must be") as e:
            lib.config.update(name, value)
        msgs.append(str(e.value))
        assert getattr(lib.config, name) == before
    assert msgs[0] == msgs[1]


def test_jacobians_of_pytrees_match_jax():
    def f(p, np_=jnp):
        return {"y": np_.tanh(p["a"] * p["b"]), "z": np_.sum(p["a"] ** 2)}
    p = {"a": rand(3), "b": rand(3)}
    for xj, jj in ((xform.jacfwd, jax.jacfwd), (xform.jacrev, jax.jacrev)):
        got, want = xj(f)(p), jj(lambda p: f(p, jnp_ref))(p)
        assert xform.tree_util.tree_structure(got) == xform.tree_util.tree_structure(
            jax.tree_util.tree_map(np.asarray, want))
        for g, w in zip(xform.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_jit_static_values_of_different_types_do_not_share_a_trace():
    """1 == True == 1.0 hash equal; each must still get its own trace (issue 8, bug 5)."""
    from functools import partial
    calls = []

    @partial(xform.jit, static_argnums=1)
    def f(x, n):
        calls.append(type(n))
        return x * n if not isinstance(n, bool) else x + n

    @partial(jax.jit, static_argnums=1)
    def g(x, n):
        return x * n if not isinstance(n, bool) else x + n
    for n in (1, True, 1.0, 1):
        out, ref = f(jnp.arange(3), n), g(jnp_ref.arange(3), n)
        assert out.dtype == ref.dtype, n
        np.testing.assert_array_equal(out, ref)
    assert calls == [int, bool, float]


def test_eager_executable_cache_is_bounded_lru():
    from xform.interpreters import dispatch
    cache = dispatch.LRUCache(2)
    cache.insert("a", 1)
    cache.insert("b", 2)
    assert cache.lookup("a") == 1  # "a" is now the most recent
    cache.insert("c", 3)
    assert list(cache) == ["a", "c"] and cache.lookup("b") is None
    assert dispatch._prim_cache.maxsize == 4096


def test_jit_inline_joins_the_enclosing_jaxpr_as_jax():
    # inline=True: traced into an outer jit, no nested call; eagerly and under grad/vmap
    # a jitted call as usual (it was accepted and ignored)
    def make(lib, m):
        g = lib.jit(lambda x, y: m.sin(x) * y + 1.0, inline=True)
        h = lib.jit(lambda x: m.cos(x))
        return lambda x: g(x, m.float32(2)) + h(x)

    def calls(lib, f):
        return [e.primitive.name for e in lib.make_jaxpr(f)(np.float32(1)).jaxpr.eqns
                if e.primitive.name in ("pjit", "jit")]
    x = np.linspace(0, 1, 3, dtype=np.float32)
    ours, want = make(xform, jnp), make(jax, jnp_ref)
    assert calls(xform, ours) == calls(jax, want) == ["jit"]
    for o, w in ((ours(x), want(x)), (xform.jit(ours)(x), jax.jit(want)(x)),
                 (xform.grad(lambda v: ours(v).sum())(x), jax.grad(lambda v: want(v).sum())(x)),
                 (xform.vmap(ours)(x), jax.vmap(want)(x))):
        np.testing.assert_allclose(o, w, rtol=1e-6)
