"""Lazy eager mode (xform.lazy): values vs eager, barriers, caching, cuts, donation,
composition with transformations, errors at the op, and the dispatch report."""
import functools
import random

import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import lax

L = xform.lazy


def pending(x):
    return L.is_pending(x)


@pytest.fixture(autouse=True)
def _fresh():
    from xform.interpreters import lazy_run
    opts = L.configure()
    lazy_run.clear_cache()  # compile counts below must not depend on test order
    L.reset_metrics()
    yield
    L.configure(**opts)


def m(key):
    return L.metrics()[key]


def barriers(reason):
    return L.metrics()["barriers"].get(reason, 0)


# ---- values vs eager: a randomized mix of ops ----

def _program(seed, x, y, s, idx):
    """A random straight-line program (fixed by ``seed``) with host control flow on
    Python values; run the same way eagerly and lazily."""
    rng = random.Random(seed)
    vals = [x, y, s]
    errors = []
    for step in range(40):
        a = vals[rng.randrange(len(vals))]
        b = vals[rng.randrange(len(vals))]
        op = rng.randrange(14)
        try:
            r = _op(op, a, b, idx, step)
        except (TypeError, ValueError) as e:  # shape errors: raised at the op, both ways
            errors.append((step, str(e)))
            continue
        vals.append(r)
    return vals[3:], errors


def _op(op, a, b, idx, step):
    if True:
        if op == 0:
            r = a + b
        elif op == 1:
            r = a * b - 0.5
        elif op == 2:
            r = jnp.tanh(a) / (1.0 + jnp.abs(b))
        elif op == 3:
            r = jnp.where(a > b, a, b * 2)
        elif op == 4:
            r = jnp.sum(a, axis=-1, keepdims=True) if a.ndim else a * 3.0
        elif op == 5:
            r = jnp.maximum(a, 0.25) ** 2
        elif op == 6:
            r = a[idx] if a.ndim == 2 else a + 1
        elif op == 7:
            r = jnp.exp(-jnp.square(a))
        elif op == 8:
            r = (a.T if a.ndim == 2 else a) * 0.5
        elif op == 9:
            r = jnp.mean(a) + b
        elif op == 10:
            r = a.astype(jnp.int32).astype(jnp.float32) + b
        elif op == 11:
            r = jnp.cumsum(a, axis=0) if a.ndim else -a
        elif op == 12:
            r = a @ b.T if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[1] else a - b
        else:
            r = jnp.sqrt(jnp.abs(a) + 1.0) * (step % 3 + 1)   # host control flow
    return r


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_match_eager(seed):
    rng = np.random.RandomState(seed)
    x = jnp.asarray(rng.randn(4, 5).astype(np.float32))
    y = jnp.asarray(rng.randn(5).astype(np.float32))
    s = jnp.asarray(np.float32(rng.randn()))
    idx = (slice(1, 3), slice(None, None, 2))
    want, want_errors = _program(seed, x, y, s, idx)
    with L():
        got, got_errors = _program(seed, x, y, s, idx)
        assert m("programs_executed") == 0 and any(pending(g) for g in got)
        assert got_errors == want_errors
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
    assert not any(pending(g) for g in got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6)
    compiled, hits = m("graphs_compiled"), m("cache_hits")
    x2, y2, s2 = x + 1.0, y * 2.0, s - 1.0
    with L():  # the same program again, on other buffers: the cached executable
        again, _ = _program(seed, x2, y2, s2, idx)
    assert m("graphs_compiled") == compiled and m("cache_hits") == hits + 1


def test_dtypes_ints_bools_and_weak_types():
    a = jnp.arange(6, dtype=jnp.int32).reshape(2, 3)
    with L():
        b = a * 3 + 1
        c = (b % 4 == 1) | (b > 10)
        d = jnp.argmax(b, axis=1)
        e = b.astype(jnp.float16) * 0.5
        f = jnp.asarray(2.0) * 3  # weak scalars stay weak
    np.testing.assert_array_equal(b, np.arange(6).reshape(2, 3) * 3 + 1)
    np.testing.assert_array_equal(c, (np.asarray(b) % 4 == 1) | (np.asarray(b) > 10))
    np.testing.assert_array_equal(d, [2, 2])
    assert e.dtype == jnp.float16 and f.weak_type == (jnp.asarray(2.0) * 3).weak_type


def test_lax_control_flow_is_recorded():
    x = jnp.arange(4.0)
    want = lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x)
    with L():
        got = lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x + 0.0)
        assert pending(got)
    np.testing.assert_allclose(got, want)


# ---- barriers ----

@pytest.mark.parametrize("use,reason", [
    (np.asarray, "asarray"), (lambda a: float(a[0]), "float"),
    (lambda a: int(a[0]), "int"), (lambda a: bool(a[0] > 0), "bool"),
    (lambda a: a.item(1), "item"), (lambda a: a.tolist(), "tolist"),
    (repr, "repr"), (str, "repr"), (lambda a: f"{a[0]:.2f}", "repr"),
    (lambda a: a.block_until_ready(), "block_until_ready"),
    (lambda a: xform.jit(lambda t: t * 2)(a), "jit"),
    (lambda a: xform.pure_callback(lambda t: np.asarray(t) * 2,
                                   xform.ShapeDtypeStruct((3,), jnp.float32), a),
     "host_callback"),
])
def test_each_implicit_barrier(use, reason):
    x = jnp.asarray([1.0, 2.0, 3.0])
    with L():
        a = x * 2.0 + 1.0
        before = m("programs_executed")
        use(a)
        assert barriers(reason) == 1
        assert m("programs_executed") == before + 1
        assert not pending(a)
        np.testing.assert_allclose(a, [3.0, 5.0, 7.0])


def test_print_and_repr_text(capsys):
    with L():
        a = jnp.arange(3.0) + 1.0
        print(a)
        assert repr(a) == "Array([1., 2., 3.], dtype=float32)"
    assert capsys.readouterr().out == "[1. 2. 3.]\n"


def test_leaving_the_block_and_mark_step():
    x = jnp.ones(3)
    with L():
        a = x + 1.0
        L.mark_step()
        assert barriers("mark_step") == 1 and not pending(a)
        b = a * 4.0
        assert pending(b)
    assert barriers("exit") == 1 and not pending(b)
    np.testing.assert_allclose(b, [8.0] * 3)
    assert xform.mark_step is L.mark_step


def test_debug_print_is_a_barrier_and_prints(capsys):
    x = jnp.arange(3.0)
    with L():
        y = x * 2.0
        xform.debug.print("y={y}", y=y)
        assert barriers("host_callback") == 1
        z = y + 1.0
    assert capsys.readouterr().out == "y=[0. 2. 4.]\n"
    np.testing.assert_allclose(z, [1.0, 3.0, 5.0])


def test_global_flag():
    x = jnp.ones(2)
    xform.config.update("xform_lazy", True)
    try:
        a = x + 1.0
        assert pending(a)
    finally:
        xform.config.update("xform_lazy", False)
    assert not pending(a) and barriers("exit") == 1
    np.testing.assert_allclose(a, [2.0, 2.0])
    assert not pending(x + 1.0)


# ---- consistency, liveness ----

def test_interdependent_live_arrays_one_program():
    x = jnp.arange(4.0)
    with L():
        a = x + 1.0
        b = a * 2.0
        c = b - a
        np.asarray(c)
        assert m("programs_executed") == 1
        assert not pending(a) and not pending(b)
        np.testing.assert_allclose(a, np.arange(4.0) + 1)
        np.testing.assert_allclose(b, (np.arange(4.0) + 1) * 2)
        assert m("programs_executed") == 1  # reading a and b ran nothing more


def test_dead_arrays_are_not_computed():
    x = jnp.ones(3)
    with L():
        a = x + 1.0
        del a
    assert m("programs_executed") == 0 and m("ops_recorded") == 1


# ---- cache ----

def _step(w, lr):
    return w - lr * jnp.sin(w)


def test_cache_hits_and_misses():
    w1, w2 = jnp.ones(5), jnp.zeros(5)
    with L():
        np.asarray(_step(w1, 0.1))
        np.asarray(_step(w2, 0.1))          # other buffers, same graph: hit
        np.asarray(_step(jnp.ones(6), 0.1))  # other shape: miss
        np.asarray(jnp.cos(w1))             # other op: miss
    assert m("graphs_compiled") == 3 and m("cache_hits") == 1


def test_scalars_are_inputs_one_compile():
    with L():
        w = jnp.ones(10) * 2.0
        L.mark_step()
        L.reset_metrics()
        want = np.full(10, 2.0, np.float32)
        for i in range(20):
            lr = 0.1 + 0.01 * i
            w = w - lr * w
            want = want - np.float32(lr) * want
            L.mark_step()
    assert m("graphs_compiled") == 1 and m("cache_hits") >= 19
    np.testing.assert_allclose(w, want, rtol=1e-5)


def test_zero_and_one_are_baked_negative_zero_is_not():
    x = jnp.asarray([1.0, -2.0])
    with L():
        a = x * 1.0 + 0.0
        b = x * -0.0
    np.testing.assert_array_equal(a, [1.0, -2.0])
    assert list(np.signbit(np.asarray(b))) == [True, False]


def test_composites_are_recorded_from_their_recipes(monkeypatch):
    # A jnp composite in lazy mode appends its traced equations at once: the function's
    # Python runs once per operand avals (the trace), then no primitive is bound.
    from xform.interpreters import lazy as lazy_interp
    from xform.interpreters.compiler import stats
    x = jnp.asarray(np.linspace(-2, 2, 13, dtype=np.float32))  # (avals no other test uses)
    i8 = jnp.asarray(np.arange(-3, 4, dtype=np.int8))

    def prog(x, i8):
        return [jnp.std(x), jnp.linalg.norm(x), x + 2.5, 2.5 * x, x * 3, x - True,
                i8 + 3, i8 * 300, x * -0.0, x + float("nan"), jnp.tanh(x) * x,
                jnp.maximum(x, 0.25), jnp.std(x * 2.0), jnp.sum(x, axis=0, keepdims=True),
                jnp.std(x, ddof=1), jnp.clip(x, -1.0, 1.5), jnp.stack([x, x]),
                jnp.where(x > 0, x, 0.5), jnp.cumsum(i8, axis=0)]

    bound = []
    record = lazy_interp.LazyTrace.process_primitive
    monkeypatch.setattr(lazy_interp.LazyTrace, "process_primitive",
                        lambda self, p, a, k: bound.append(p) or record(self, p, a, k))
    want = prog(x, i8)
    for first in (True, False):
        with L():
            traces = stats["composite_trace"]
            got = prog(x, i8)
            assert (stats["composite_trace"] > traces) == first  # traced once, then cached
            del bound[:]
            again = prog(x, i8)
            assert not bound
            keys = lazy_interp._tls.graph.keys
            n = len(keys)
            jnp.std(got[2])  # (f32[13]) its equations, as make_jaxpr traces them
            assert [k[0] for k in keys[n:]] == [
                e.primitive for e in xform.make_jaxpr(jnp.std)(x).jaxpr.eqns]
            nz = jnp.where(x > 0)  # no recipe (needs values): runs as it is
            with pytest.raises(ValueError, match="axis 5 is out of bounds"):
                jnp.sum(x, axis=5)  # no recipe either: the function's own error, each time
        # std(ddof=1)'s recipe holds a NaN constant: its graphs still key one program
        counts = []
        for _ in range(3):
            with L():
                np.asarray(jnp.std(x, ddof=1))
            counts.append(xform.lazy.metrics()["graphs_compiled"])
        assert counts[1] == counts[2]
        # (bit for bit on the CPU; a GPU's fused program may round an ulp differently)
        same = np.testing.assert_array_equal if xform.default_backend() == "cpu" else \
            functools.partial(np.testing.assert_allclose, rtol=1e-6, atol=1e-6)
        for g, a, w in zip(got, again, want):
            assert g.dtype == w.dtype and g.shape == w.shape and g.weak_type == w.weak_type
            same(np.asarray(g), np.asarray(w))
            same(np.asarray(a), np.asarray(w))
            assert list(np.signbit(np.asarray(g)).ravel()) == \
                list(np.signbit(np.asarray(w)).ravel())
        np.testing.assert_array_equal(nz[0], np.arange(7, 13))


# ---- how each primitive runs: the attribute its registrar sets ----

def test_primitives_declare_their_lazy_kind():
    from xform.core.trace import Primitive
    from xform.interpreters import callback, custom, pjit, pxla
    from xform.random import _keys
    assert lax.sin_p.lazy_kind == lax.add_p.lazy_kind == "record"      # unop / naryop
    assert lax.slice_p.lazy_kind == "record"      # eager shortcut: lazy records slice
    assert lax.reduce_p.lazy_kind == "structural"
    assert custom.custom_jvp_call_p.lazy_kind == "inline"
    assert (pjit.pjit_p.lazy_kind, callback.io_callback_p.lazy_kind,
            pxla.xla_pmap_p.lazy_kind) == ("jit", "host_callback", "pmap")
    assert _keys.random_wrap_p.lazy_kind == "eager"  # its own impl replaced the lowering's
    p = Primitive("lazy_kind_probe")
    try:
        p.def_impl(lambda x: x, lazy_kind="record")
        assert p.lazy_kind == "record"
        p.def_impl(lambda x: x)                       # a new impl: the claim is reset
        assert p.lazy_kind == "eager"
    finally:
        Primitive.registry.remove(p)
    with L():
        y = jnp.sin(jnp.ones(3, jnp.uint32).astype(jnp.float32))
        assert pending(y) and barriers("eager") == 0
        k = xform.random.wrap_key_data(jnp.zeros(2, jnp.uint32) + 1)
        assert barriers("eager") == 1 and not pending(y)  # the barrier computed y
    np.testing.assert_array_equal(xform.random.key_data(k), [1, 1])


# ---- cut and repeated blocks ----

def test_graph_cut_and_repeated_block():
    L.configure(max_graph_size=300, block_size=32)
    x = jnp.linspace(0.0, 1.0, 8)
    want = x
    for _ in range(500):
        want = want * 0.99 + 0.01
    with L():
        y = x
        for _ in range(500):
            y = y * 0.99 + 0.01
    np.testing.assert_allclose(y, want, rtol=1e-5)
    assert barriers("size_limit") >= 3
    assert m("repeated_blocks") >= 10
    assert m("graphs_compiled") <= 8  # not one compile per cut


def test_graphs_compile_through_the_program_cache(tmp_path):
    """One compile path: a lazy graph is keyed, compiled and stored on disk like jit's
    programs, and a fresh lookup (in-memory caches dropped) loads it from there."""
    from xform.interpreters import compiler, lazy_run
    xform.config.update("jax_compilation_cache_dir", str(tmp_path))
    xform.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        def run():
            with L():
                return np.asarray(jnp.cos(jnp.arange(4.0)) * 3.0 - 0.125)
        first = run()
        assert len(list(tmp_path.glob("*-cache"))) >= 1
        lazy_run.clear_cache()
        compiler.clear_caches()
        before = dict(compiler.stats)
        np.testing.assert_array_equal(run(), first)
        assert compiler.stats["disk_hit"] > before.get("disk_hit", 0)
        assert compiler.stats["compile"] == before.get("compile", 0)
    finally:
        xform.config.update("jax_compilation_cache_dir", None)
        xform.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def test_small_array_graphs_compile_unsplit():
    """A graph of small arrays compiles ``inline``: XLA does not split its fused loop
    into thread-pool tasks (the same chain jitted is split where there are cores)."""
    import os
    from xform.interpreters import dispatch, lazy_run

    def chain(v):
        for _ in range(40):
            v = jnp.tanh(v) * 0.9
        return v
    x = jnp.ones(1000)
    with L():
        got = np.asarray(chain(x))
    assert "outer_dimension_partitions" not in list(lazy_run._cache.values())[-1] \
        .executable.hlo_text()
    jitted = dispatch.CompiledJaxpr(xform.make_jaxpr(chain)(x))
    if xform.default_backend() == "cpu" and (os.cpu_count() or 1) > 1:  # (XLA CPU's)
        assert "outer_dimension_partitions" in jitted.executable.hlo_text()
    np.testing.assert_allclose(got, np.asarray(jitted([x])[0]), rtol=1e-6)


def test_size_limit_set_mid_graph_applies_to_it():
    with L():
        y = jnp.arange(3.0) + 1.0
        L.configure(max_graph_size=2)
        assert pending(y) and barriers("size_limit") == 0
        y = y * 2.0                     # reaches the new limit: cut and run now
        assert barriers("size_limit") == 1 and not pending(y)
    np.testing.assert_array_equal(y, [2.0, 4.0, 6.0])


def test_find_period():
    from xform.interpreters.lazy_segments import find_period
    assert find_period(list("xyzabcabcabc")) == (3, 3)
    assert find_period(list("abcdefg")) is None


# ---- donation and the paper's aliasing hazards ----

def test_donation_in_a_loop():
    with L():
        w = jnp.ones(100) * 1.0
        L.mark_step()
        for _ in range(5):
            w = w * 2.0
            L.mark_step()
    assert m("donated_buffers") >= 4
    np.testing.assert_allclose(w, 32.0)


def test_hazard_print_twice():
    with L():
        a = jnp.zeros(3) + 1.0
        L.mark_step()
        a += 1
        assert str(a) == "[2. 2. 2.]"
        assert str(a) == "[2. 2. 2.]"
        assert m("programs_executed") == 2
        a += 1
        L.mark_step()
    np.testing.assert_allclose(a, 3.0)


def test_hazard_b_then_inplace():
    with L():
        a = jnp.zeros(3) + 1.0
        L.mark_step()
        b = a + 2
        a += 1
    np.testing.assert_allclose(b, 3.0)
    np.testing.assert_allclose(a, 2.0)


def test_no_donation_of_referenced_or_fetched_buffers():
    with L():
        a = jnp.zeros(3) + 1.0
        L.mark_step()
        keep = a
        a = a + 1          # old a still referenced: not donated
        L.mark_step()
        host = np.asarray(a)
        a = a * 10         # a was fetched to the host: not donated
        L.mark_step()
    assert m("donated_buffers") == 0
    np.testing.assert_allclose(keep, 1.0)
    np.testing.assert_allclose(host, 2.0)
    np.testing.assert_allclose(a, 20.0)


# ---- composition with transformations ----

def _loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


def test_grad_vmap_jit_jvp_compose():
    w = jnp.asarray(np.random.RandomState(0).randn(3, 2).astype(np.float32))
    x = jnp.arange(6.0).reshape(2, 3) / 6
    g_want = xform.grad(_loss)(w, x)
    t_want = xform.jvp(lambda v: jnp.sin(v) * v, (x,), (jnp.ones_like(x),))
    with L():
        wl = w + 0.0
        g = xform.grad(_loss)(wl, x)
        assert pending(g)
        v = xform.vmap(lambda r: jnp.cos(r) * r.sum())(x * 1.0)
        t = xform.jvp(lambda v: jnp.sin(v) * v, (x * 1.0,), (jnp.ones_like(x),))
        closed = xform.jit(lambda q: q @ wl)(x)  # closes over nothing lazy; arg is lazy
        captured = xform.jit(lambda q: q @ wl)  # closes over a lazy array
        c2 = captured(x)
    np.testing.assert_allclose(g, g_want, rtol=2e-5, atol=1e-7)  # fused: XLA reorders
    np.testing.assert_allclose(v, np.stack([np.cos(r) * r.sum() for r in np.asarray(x)]),
                               rtol=1e-6)
    np.testing.assert_allclose(t[0], t_want[0])
    np.testing.assert_allclose(t[1], t_want[1])
    np.testing.assert_allclose(closed, np.asarray(x) @ np.asarray(w), rtol=1e-6)
    np.testing.assert_allclose(c2, closed)


def test_training_loop_matches_jit():
    w0 = jnp.asarray(np.random.RandomState(1).randn(3, 2).astype(np.float32))
    x = jnp.arange(6.0).reshape(2, 3) / 6

    def step(w):
        return w - 0.1 * xform.grad(_loss)(w, x)
    jstep = xform.jit(step)
    want = w0
    for _ in range(5):
        want = jstep(want)
    with L():
        w = w0
        for _ in range(5):
            w = step(w)
            L.mark_step()
    np.testing.assert_allclose(w, want, rtol=1e-6, atol=1e-7)
    assert m("graphs_compiled") <= 2


def test_debug_nans_names_the_primitive(debug_nans):
    x = jnp.asarray([1.0, -1.0])
    with pytest.raises(FloatingPointError, match="invalid value \\(nan\\) encountered in log"):
        with L():
            y = jnp.log(x) + 1.0
            np.asarray(y)


# ---- errors at the op ----

def test_shape_error_raised_at_the_op():
    a, b = jnp.ones(3), jnp.ones(4)
    with L():
        c = a * 2.0
        with pytest.raises(ValueError, match=r"add: Incompatible shapes for broadcasting: "
                                             r"shapes=\[\(3,\), \(4,\)\]") as info:
            c + b  # the line the error points at
        assert any(str(e.statement).strip().startswith("c + b") for e in info.traceback
                   if str(e.path) == __file__)
        with pytest.raises(TypeError, match=r"add got incompatible shapes for "
                                            r"broadcasting: \(3,\), \(4,\)"):
            lax.add(c, b)  # lax's abstract evaluation raises at the op too
        assert m("programs_executed") == 0 and pending(c)
    np.testing.assert_allclose(c, 2.0)


def test_configure_validates():
    with pytest.raises(ValueError, match="max_graph_size must be a positive int, got 0"):
        L.configure(max_graph_size=0)


# ---- the dispatch report ----

def test_dispatch_report():
    def f(x):
        for _ in range(10):
            x = jnp.sin(x) * 1.5
        return x
    xform.jit(f)(jnp.ones(16))  # compiled before: the report must still pay XLA
    r = xform.dispatch_report(f, jnp.ones(16), number=3)
    d = vars(r)
    for k in ("n_ops", "trace_ms", "lower_ms", "compile_ms", "eager_ms", "lazy_ms",
              "jit_ms", "dispatch_share", "breakeven_calls", "recommendation"):
        assert k in d
    assert r.n_ops == 20
    assert 0.0 <= r.dispatch_share <= 1.0
    if r.eager_ms > r.jit_ms:
        want = (r.trace_ms + r.lower_ms + r.compile_ms) / (r.eager_ms - r.jit_ms)
        assert r.breakeven_calls == pytest.approx(want)
    text = str(r)
    assert text.startswith("dispatch report for f") and "break-even calls" in text
    # Every one-time cost is measured for real even when f was compiled before (the
    # program cache would otherwise make compile_ms ~0 and the break-even wrong).
    assert r.trace_ms > 0 and r.lower_ms > 0 and r.compile_ms > 5.0
    with pytest.raises(TypeError, match="expected a callable"):
        xform.dispatch_report(3, jnp.ones(2))


def test_docstring_examples():
    import doctest
    import sys
    result = doctest.testmod(sys.modules["xform.lazy"], optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8 and result.failed == 0


def test_callback_inside_scan_runs_in_program_order(capsys):
    def body(c, x):
        xform.debug.print("c={c}", c=c)
        return c + x, c * x
    with L():
        lax.scan(body, 0.0, jnp.arange(3.0))  # results unused: run for its effect
        assert capsys.readouterr().out == "c=0.0\nc=0.0\nc=1.0\n"
        assert barriers("host_callback") == 1


def test_record_jit_option_keeps_jitted_calls_lazy():
    L.configure(record_jit=True)
    x = jnp.linspace(-1.0, 1.0, 5)
    f = xform.jit(lambda t: jnp.tanh(t) * 2.0)
    want = f(x) + xform.nn.relu(x)
    with L():
        a = x * 1.0
        b = f(a) + xform.nn.relu(a)   # both jitted: call equations, no barrier
        assert pending(b) and barriers("jit") == 0
    np.testing.assert_allclose(b, want, rtol=1e-6)
    assert m("programs_executed") == 1
