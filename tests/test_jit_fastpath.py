"""jit's cache-hit fast paths (positional Arrays; pytrees flattened by jaxlib's C++
registry; C++ result handlers) give exactly what the slow path gives: randomized over
shapes, dtypes, weak types, pytree structures and static arguments, with x64 on and off,
under disable_jit, and with leaked tracers (which must never reach the fast path)."""
import collections

import jax
import jax.numpy as jnp_ref
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xform
from xform.core.array import Array as ConcreteArray
import xform.numpy as jnp
from xform.interpreters import compiler

Point = collections.namedtuple("Point", "x y")
DTYPES = [np.float32, np.int32, np.bool_, np.float16, np.complex64, np.uint8]
STRUCTURES = ["positional", "dict", "list", "nested", "namedtuple", "with_none"]


def _counting(g):
    """Count calls of ``g``'s slow path (the fast paths never reach ``_call``)."""
    calls = []
    slow = g._call

    def call(args, kwargs):
        calls.append(1)
        return slow(args, kwargs)
    g._call = call
    return calls


def _pack(structure, a, b):
    return {"positional": (a, b), "dict": ({"b": b, "a": a},), "list": ([a, b],),
            "nested": ({"p": [a, (b,)], "q": {}},), "namedtuple": (Point(a, b),),
            "with_none": ((a, None, b),)}[structure]


def _body(a, b):
    out = {"sum": a + b, "pair": (a * b, b)}
    if np.dtype(a.dtype) != np.bool_:
        out["neg"] = [-a]
    return out


def _unpack(structure, args):
    if structure == "positional":
        return args
    (t,) = args
    return {"dict": lambda: (t["a"], t["b"]), "list": lambda: tuple(t),
            "nested": lambda: (t["p"][0], t["p"][1][0]), "namedtuple": lambda: (t.x, t.y),
            "with_none": lambda: (t[0], t[2])}[structure]()


def _same(x, y):
    xl, xt = xform.tree_util.tree_flatten(x)
    yl, yt = xform.tree_util.tree_flatten(y)
    assert xt == yt
    for u, v in zip(xl, yl):
        assert type(u) is ConcreteArray and u.dtype == v.dtype and u.shape == v.shape
        assert u.aval.weak_type == v.aval.weak_type
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def _rand(rng, shape, dtype):
    return np.asarray(np.abs(rng.randn(*shape)) * 3, dtype=dtype)


@settings(max_examples=25)
@given(shape=st.lists(st.integers(0, 3), max_size=3).map(tuple),
       dtype=st.sampled_from(DTYPES), structure=st.sampled_from(STRUCTURES),
       seed=st.integers(0, 2**16))
def test_fast_path_matches_slow_path(shape, dtype, structure, seed):
    rng = np.random.RandomState(seed)

    def f(*args):
        return _body(*_unpack(structure, args))
    a, b, a2, b2 = (jnp.asarray(_rand(rng, shape, dtype)) for _ in range(4))
    c = jnp.asarray(_rand(rng, shape + (2,), dtype))
    with xform.disable_jit():  # (flipping the flag clears fast paths: do it first)
        eager = [f(*_pack(structure, a, b)), f(*_pack(structure, a2, b2)),
                 f(*_pack(structure, c, c))]
    g = xform.jit(f)
    slow = _counting(g)
    first = g(*_pack(structure, a, b))  # slow path: traces, compiles, fills the fast path
    _same(first, eager[0])
    _same(g(*_pack(structure, a, b)), first)  # cache hit
    _same(g(*_pack(structure, a2, b2)), eager[1])  # new values, same avals: cache hit
    assert len(slow) == 1
    _same(g(*_pack(structure, c, c)), eager[2])  # a new shape: slow path again
    assert len(slow) == 2


def test_weak_typed_arrays_get_their_own_entries_in_the_fast_path():
    g = xform.jit(lambda a, w: a * w)
    gj = jax.jit(lambda a, w: a * w)
    a = jnp.ones(3, jnp.float16)
    weak, strong = xform.device_put(2.0), jnp.float32(2.0)
    assert weak.aval.weak_type and not strong.aval.weak_type
    for _ in range(2):  # second round: both are cache hits
        assert g(a, weak).dtype == gj(jnp_ref.ones(3, jnp_ref.float16), 2.0).dtype == np.float16
        assert g(a, strong).dtype == gj(jnp_ref.ones(3, jnp_ref.float16),
                                        jnp_ref.float32(2.0)).dtype == np.float32
    assert len(g._fast) == 2


def test_static_arguments_and_kwargs_take_the_slow_path_correctly():
    from functools import partial

    @partial(xform.jit, static_argnums=1)
    def f(d, n, *, scale=1.0):
        return {k: v * n * scale for k, v in d.items()}
    d = {"a": jnp.arange(3.0), "b": jnp.ones(2)}
    for n in (2, 3, 2):
        out = f(d, n, scale=2.0)
        np.testing.assert_array_equal(out["a"], np.arange(3.0) * n * 2.0)
    assert not f._fast and not f._tree_fast   # (a dict argument: not the static fast path)


def test_positional_static_arguments_take_the_fast_path_keyed_on_type_and_value():
    from functools import partial

    def body(x, n, mode, s):
        return x * n + s if mode == "mul" else x + n + s

    g = xform.jit(body, static_argnums=(1, -2))
    gj = jax.jit(body, static_argnums=(1, -2))
    calls = _counting(g)
    x = jnp.arange(3.0)
    cases = [(2, "mul", 1.0), (2, "mul", 1.0), (2.0, "mul", 0.5), (True, "add", 1),
             (1, "add", 1), (2, "mul", np.float32(3))]
    for n, mode, s in cases:
        got, want = g(x, n, mode, s), gj(jnp_ref.arange(3.0), n, mode, s)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.aval.weak_type == want.weak_type
    # 1 == 1.0 == True hash equal but trace apart; the repeated case and nothing else hits
    assert len(calls) == len(cases) - 1
    g(x, 1, "add", 1)
    assert len(calls) == len(cases) - 1
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        g(x, [2], "mul", 1.0)
    np.testing.assert_array_equal(partial(g, x)(3, "mul", 0.0), np.arange(3.0) * 3)
    assert len(calls) == len(cases) + 1


def test_keyword_arguments_take_the_fast_path_keyed_on_their_names():
    def body(x, y=None, *, train=False, scale=1.0):
        return x * scale + train + (0 if y is None else y)

    for static in ((), ("train",)):
        g = xform.jit(body, static_argnames=static)
        gj = jax.jit(body, static_argnames=static)
        calls = _counting(g)
        x, y = jnp.arange(3.0), jnp.ones(3)
        cases = [dict(train=True), dict(scale=2.0, train=True), dict(train=True, scale=2.0),
                 dict(y=y, train=True), dict(train=True, y=y), dict(scale=2, train=True)]
        if static:
            cases += [dict(train=False), dict(train=0), dict(train=False)]
        for kw in cases:
            want = gj(jnp_ref.arange(3.0), **{k: (jnp_ref.ones(3) if k == "y" else v)
                                               for k, v in kw.items()})
            got = g(x, **kw)
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype and got.aval.weak_type == want.weak_type
        # hits: the same names in another order; each static value once per type
        assert len(calls) == len(cases) - 2 - bool(static)
        for kw in cases:
            g(x, **kw)
        assert len(calls) == len(cases) - 2 - bool(static)
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        g(x, train=[1])


def test_x64_flip_clears_fast_paths(x64):
    g = xform.jit(lambda d: d["x"] + 1)
    assert g({"x": jnp.arange(3)}).dtype == np.int64
    assert g({"x": jnp.arange(3)}).dtype == np.int64  # fast path hit under x64
    xform.config.update("jax_enable_x64", False)
    assert not g._tree_fast
    assert g({"x": jnp.arange(3)}).dtype == np.int32
    assert g({"x": 1}).dtype == np.int32  # a Python scalar in a dict: the slow path
    h = xform.jit(lambda s: s + 1)
    assert h(1).dtype == np.int32 and h(1).dtype == np.int32  # positional: the fast path
    xform.config.update("jax_enable_x64", True)  # (cleared: host values retyped)
    assert h(1).dtype == np.int64 and h(2.5).dtype == np.float64


def test_python_scalars_and_numpy_arrays_take_the_fast_path():
    f = lambda a, s, n: (a * s + n, s)  # noqa: E731
    g, gj = xform.jit(f), jax.jit(f)
    slow = _counting(g)
    a = np.linspace(-1, 1, 3).astype(np.float32)
    n64, ni, nb = np.arange(3.0), np.arange(3, dtype=np.int64), np.array([True, False, True])
    cases = [(2.0, n64), (3.5, n64), (0.0, n64), (-0.0, n64), (float("nan"), n64), (1, n64),
             (7, ni), (True, nb), (2.5, ni)]
    for s_, n in cases * 2:
        got, want = g(jnp.asarray(a), s_, n), gj(jnp_ref.asarray(a), s_, n)
        for u, v in zip(got, want):
            assert u.dtype == v.dtype and u.aval.weak_type == v.weak_type
            np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
            assert list(np.signbit(np.asarray(u)).ravel()) == \
                list(np.signbit(np.asarray(v)).ravel())
    # one trace per (scalar type, NumPy dtype) signature, not per value: the rest hit
    assert len(slow) == 5 and len(g._fast) == 5
    n = n64.copy()
    assert float(g(jnp.asarray(a), 1.0, n)[0][0]) == -1.0
    n[0] = 10.0  # a NumPy argument is read at each call, never cached
    assert float(g(jnp.asarray(a), 1.0, n)[0][0]) == 9.0
    with pytest.raises(OverflowError, match="too large to convert"):
        g(jnp.asarray(a), 2**40, n)
    with pytest.raises(OverflowError):
        gj(jnp_ref.asarray(a), 2**40, n)


def test_disable_jit_bypasses_filled_fast_paths():
    traces = []

    def f(t):
        traces.append(1)
        return t[0] * 2.0
    g = xform.jit(f)
    args = ([jnp.ones(2), None],)
    g(*args)
    g(*args)
    assert len(traces) == 1 and g._tree_fast
    with xform.disable_jit():
        g(*args)
        g(*args)
    assert len(traces) == 3
    g(*args)
    assert len(traces) == 3  # back on: the trace cache still holds


def test_leaked_tracers_never_reach_the_fast_paths():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2.0
    xform.grad(f)(1.0)
    g = xform.jit(lambda t: t["a"] + 1.0)
    h = xform.jit(lambda x: x + 1.0)
    g({"a": jnp.float32(1.0)})  # fill both fast paths
    h(jnp.float32(1.0))
    with pytest.raises(xform.errors.UnexpectedTracerError, match="unexpected tracer"):
        g({"a": leaked[0]})
    with pytest.raises(xform.errors.UnexpectedTracerError, match="unexpected tracer"):
        h(leaked[0])


def test_custom_pytree_nodes_fall_back_to_xform_flatten():
    @xform.tree_util.register_pytree_node_class
    class Box:
        def __init__(self, v):
            self.v = v

        def tree_flatten(self):
            return (self.v,), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)
    g = xform.jit(lambda b: Box(b.v * 3.0))
    for _ in range(2):
        out = g(Box(jnp.ones(2)))
        assert type(out) is Box
        np.testing.assert_array_equal(out.v, [3.0, 3.0])
    assert not g._tree_fast  # jaxlib's registry does not know Box: always xform's path
    # outputs on the hit path of array arguments: rebuilt by jaxlib's C++ treedef where it
    # knows every node (a namedtuple), by xform's where it does not (Box)
    P = collections.namedtuple("P", "u v")
    for out_fn, kind in ((lambda v: Box(v * 3.0), Box), (lambda v: P(v, {"b": v, "a": None}), P)):
        h = xform.jit(out_fn)
        outs = [h(jnp.ones(2)) for _ in range(3)]
        assert len(h._fast) == 1 and all(type(o) is kind for o in outs)
        assert len({str(xform.tree_util.tree_structure(o)) for o in outs}) == 1


def test_eager_ops_with_result_handlers_match_numpy():
    rng = np.random.RandomState(1)
    for dtype in DTYPES:
        x = _rand(rng, (2, 3), dtype)
        y = jnp.asarray(x)
        if dtype != np.bool_:
            np.testing.assert_array_equal(np.asarray(y + y), x + x)
        np.testing.assert_array_equal(np.asarray(jnp.transpose(y)), x.T)
    bf = jnp.ones(3, jnp.bfloat16) * 2
    assert bf.dtype == jnp.bfloat16 and np.asarray(bf, np.float32).tolist() == [2.0] * 3


def test_compile_counter_unchanged_by_cache_hits():
    g = xform.jit(lambda t: [t[0] @ t[1]])
    t = (jnp.ones((2, 3)), jnp.ones((3, 2)))
    g(t)
    before = dict(compiler.stats)
    for _ in range(5):
        g(t)
    assert compiler.stats["trace"] == before.get("trace", 0)
    assert compiler.stats["compile"] == before.get("compile", 0)


# ---- eager ops: the all-Array hot path vs the slow path (scalars, NumPy, tracers) ----

_EAGER_DTYPES = [np.float32, np.int32, np.float16, np.uint8]


@settings(max_examples=10)
@given(shape=st.lists(st.integers(1, 3), max_size=2).map(tuple),
       dtype=st.sampled_from(_EAGER_DTYPES), order=st.sampled_from(["fast", "slow"]),
       seed=st.integers(0, 2**16))
def test_eager_fast_path_matches_slow_path_and_jax(shape, dtype, order, seed):
    """The same op reached with all-Array arguments (hot path) and with a NumPy or a
    Python-scalar argument (slow path), in either order, gives JAX's value and type."""
    from xform import lax
    rng = np.random.RandomState(seed)
    xs, ys = _rand(rng, shape, dtype), _rand(rng, shape, dtype)
    x, y = jnp.asarray(xs), jnp.asarray(ys)
    xr, yr = jnp_ref.asarray(xs), jnp_ref.asarray(ys)
    calls = {"fast": [lambda: lax.add(x, y), lambda: jnp.maximum(x, y),
                      lambda: x * jnp.asarray(2).astype(dtype)],
             "slow": [lambda: lax.add(x, ys), lambda: jnp.maximum(xs, y), lambda: x * 2]}
    refs = [lambda: jax.lax.add(xr, yr), lambda: jnp_ref.maximum(xr, yr), lambda: xr * 2]
    second = "slow" if order == "fast" else "fast"
    for i, ref in enumerate(refs):
        want = ref()
        for path in (order, second, order):
            got = calls[path][i]()
            assert type(got) is ConcreteArray and got.dtype == want.dtype, (path, i)
            assert got.aval.weak_type == want.weak_type and got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_eager_multiple_results_unhashable_params_and_leaked_tracers():
    from xform import lax
    from xform.lax.shapes import transpose_p
    x = jnp.asarray(np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], np.float32))
    for _ in range(2):  # compile, then the hot path
        vals, idx = lax.top_k(x, 2)
        np.testing.assert_array_equal(vals, [[3.0, 2.0], [5.0, 4.0]])
        np.testing.assert_array_equal(idx, [[0, 2], [1, 2]])
        # an unhashable param (a list) cannot be a cache key: compiled, not cached
        np.testing.assert_array_equal(transpose_p.bind(x, permutation=[1, 0]),
                                      np.asarray(x).T)
    leaked = []
    xform.grad(lambda v: leaked.append(v) or v * 2.0)(1.0)
    jnp.sin(jnp.float32(1.0))  # the op is in the cache: the tracer must still be caught
    with pytest.raises(xform.errors.UnexpectedTracerError, match="unexpected tracer"):
        jnp.sin(leaked[0])
    with pytest.raises(xform.errors.UnexpectedTracerError, match="unexpected tracer"):
        lax.add(jnp.float32(1.0), leaked[0])


def test_eager_cache_evicts_in_insertion_order_and_recompiles_from_memory(monkeypatch):
    """The eager cache is bounded; an evicted op is rebuilt from the program cache."""
    from xform.interpreters import dispatch
    small = dispatch.LRUCache(2)
    monkeypatch.setattr(dispatch, "_prim_cache", small)
    x = jnp.arange(4.0)
    for f in (xform.lax.sin, xform.lax.cos, xform.lax.exp):  # (jnp.sin: a composite)
        f(x)
    assert len(small) == 2
    before = dict(compiler.stats)
    np.testing.assert_allclose(xform.lax.sin(x), np.sin(np.arange(4.0)), rtol=1e-6)
    assert compiler.stats["compile"] == before.get("compile", 0)
    assert compiler.stats["memory_hit"] == before.get("memory_hit", 0) + 1


def test_jit_of_a_callable_object_keeps_its_own_methods():
    """jit(jnp.add): a ufunc object's private attributes (its ``_call``) once replaced
    jit's own through ``update_wrapper``; its name and doc are still taken."""
    x = np.arange(3, dtype=np.float32)
    for name in ("add", "logaddexp", "multiply"):
        f = jnp.__dict__[name]
        g = xform.jit(f)
        np.testing.assert_allclose(g(1.0, x), jax.jit(getattr(jnp_ref, name))(1.0, x),
                                   rtol=1e-6)
        assert g.__name__ == name and g.__doc__ == f.__doc__
        np.testing.assert_allclose(xform.vmap(f)(x, x), getattr(np, name)(x, x), rtol=1e-6)
