"""jit's caches: per-function trace cache shared by wrappers, the program cache below
tracing (in memory and on disk, across processes), cache-miss explanations, compile
logging, donation, and the AOT introspection (cost/memory analysis, optimized HLO)."""
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp_ref
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform.interpreters import compiler, dispatch

REPO = Path(__file__).resolve().parents[1]


def counts(before):
    return {k: compiler.stats[k] - before.get(k, 0) for k in ("trace", "compile")}


def test_rewrapped_jit_traces_once_and_compiles_once():
    def f(x):
        return jnp.tanh(x @ x.T).sum()
    x = jnp.ones((4, 4))
    expected = float(f(x))
    before = dict(compiler.stats)
    outs = [float(xform.jit(f)(x)) for _ in range(4)]
    assert outs == [pytest.approx(expected)] * 4
    assert counts(before) == {"trace": 1, "compile": 1}


def test_global_changed_between_calls_behaves_as_in_jax():
    """JAX's "Common Gotchas": the traced value of a global is kept until a re-trace."""
    def run(jit, np_mod, ns):
        def impure_uses_globals(x):
            return x + ns["g"]
        ns["g"] = 0.0
        a = jit(impure_uses_globals)(4.0)
        ns["g"] = 10.0
        b = jit(impure_uses_globals)(5.0)  # a new wrapper, same function: cached trace
        c = jit(impure_uses_globals)(np_mod.array([4.0]))  # new type: re-traced
        return [np.asarray(v).tolist() for v in (a, b, c)]
    ours = run(xform.jit, jnp, {})
    assert ours == run(jax.jit, jnp_ref, {}) == [4.0, 5.0, [14.0]]


def test_fresh_value_and_grad_in_a_loop_compiles_once():
    def loss(p, x):
        return jnp.sum(jnp.tanh(x @ p["w"] + p["b"]) ** 2)

    def loss_ref(p, x):
        return jnp_ref.sum(jnp_ref.tanh(x @ p["w"] + p["b"]) ** 2)
    rng = np.random.RandomState(0)
    p = {"w": rng.randn(5, 3).astype(np.float32), "b": rng.randn(3).astype(np.float32)}
    x = rng.randn(2, 5).astype(np.float32)
    ref_v, ref_g = jax.value_and_grad(loss_ref)(p, x)
    p, x = xform.tree_util.tree_map(jnp.asarray, (p, x))
    xform.jit(xform.value_and_grad(loss))(p, x)  # warm (compiles)
    before = dict(compiler.stats)
    for _ in range(3):
        v, g = xform.jit(xform.value_and_grad(loss))(p, x)
    assert counts(before) == {"trace": 3, "compile": 0}
    np.testing.assert_allclose(v, ref_v, rtol=1e-5)
    for k in ("w", "b"):
        np.testing.assert_allclose(g[k], ref_g[k], rtol=1e-5)


def test_distinct_programs_are_not_confused_by_the_program_cache():
    fs = [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: x - 3.0]
    x = jnp.arange(3.0)
    for _ in range(2):
        outs = [np.asarray(xform.jit(f)(x)).tolist() for f in fs]
        assert outs == [[1.0, 2.0, 3.0], [0.0, 2.0, 4.0], [-3.0, -2.0, -1.0]]


# ---- jax_explain_cache_misses / jax_log_compiles ----

@pytest.fixture
def explain(caplog):
    xform.config.update("jax_explain_cache_misses", True)
    caplog.set_level(logging.WARNING, logger="xform")
    try:
        yield caplog
    finally:
        xform.config.update("jax_explain_cache_misses", False)


def _misses(caplog):
    out = [r.getMessage() for r in caplog.records if "TRACING CACHE MISS" in r.getMessage()]
    caplog.clear()
    return out


def test_explain_cache_miss_names_the_argument_and_the_change(explain):
    def f(x, params, n):
        return x * n + params["w"]
    g = xform.jit(f, static_argnums=2)
    w = {"w": jnp.ones(3)}
    g(jnp.ones(3), w, 1)
    (msg,) = _misses(explain)
    assert "never seen function" in msg and "test_jit_cache.py" in msg
    g(jnp.ones(3), w, 1)
    assert _misses(explain) == []
    g(jnp.ones(4), {"w": jnp.ones(4)}, 1)
    (msg,) = _misses(explain)
    assert "x: now f32[4], before f32[3]" in msg
    assert "params['w']: now f32[4], before f32[3]" in msg
    g(jnp.ones(3), w, 2)
    assert "static argument n: now 2 (int), before 1 (int)" in _misses(explain)[0]
    g(jnp.ones(3), w, True)
    assert "static argument n: now True (bool), before 1 (int)" in _misses(explain)[0]
    g(jnp.ones(3), {"w": jnp.ones(3), "b": jnp.ones(3)}, 1)
    msg = _misses(explain)[0]
    assert "params: different pytree structure" in msg and "'b'" in msg
    g(jnp.ones(3, jnp.int32), w, 1)
    assert "x: now i32[3], before f32[3]" in _misses(explain)[0]


def test_explain_cache_miss_weak_types_and_redefined_functions(explain):
    xform.jit(lambda x: x)(1.0)
    _misses(explain)
    for _ in range(2):
        xform.jit(lambda x: x + 1)(jnp.float32(1.0))
    msgs = _misses(explain)
    assert len(msgs) == 2 and "seen another function defined on the same line" in msgs[1]
    h = xform.jit(lambda x: x * 2)
    h(jnp.float32(1.0))
    _misses(explain)
    h(2.0)
    assert "x: now f32[]{weak_type=True}, before f32[]" in _misses(explain)[0]


def test_log_compiles(caplog):
    caplog.set_level(logging.WARNING, logger="xform")
    xform.config.update("jax_log_compiles", True)
    try:
        xform.jit(lambda x: x * 7.0 + 3.0)(jnp.ones((2, 5)))
    finally:
        xform.config.update("jax_log_compiles", False)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "Finished tracing + transforming <lambda> for pjit" in text
    assert "Compiling jit(<lambda>) with global shapes and types ['f32[2,5]']" in text
    assert "Finished XLA compilation of jit(<lambda>)" in text


# ---- the persistent compilation cache ----

_CHILD = textwrap.dedent("""
    import json, sys, time, warnings
    t0 = time.perf_counter()
    import xform, xform.numpy as jnp
    from xform.interpreters import compiler
    xform.config.update("jax_compilation_cache_dir", sys.argv[1])
    xform.config.update("jax_persistent_cache_min_compile_time_secs", 0)

    def model(w, x):
        for _ in range(3):
            x = jnp.tanh(x @ w + jnp.sin(x))
        return x.sum()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = xform.jit(xform.value_and_grad(model))(jnp.ones((16, 16)), jnp.ones((4, 16)))
        value, grad = float(out[0]), float(out[1].sum())
    print(json.dumps({"value": value, "grad": grad,
                      "disk_hit": compiler.stats["disk_hit"],
                      "disk_write": compiler.stats["disk_write"],
                      "warnings": [str(w.message) for w in caught]}))
""")


def _start_child(cache_dir):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(cache_dir)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc):
    import json
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def _child(cache_dir):
    return _result(_start_child(cache_dir))


def test_persistent_cache_shared_by_concurrent_processes(tmp_path):
    """Two processes filling one directory at once: both succeed, every entry is whole."""
    procs = [_start_child(tmp_path) for _ in range(2)]
    first, second = [_result(p) for p in procs]
    assert (first["value"], first["grad"]) == (second["value"], second["grad"])
    assert not first["warnings"] and not second["warnings"]
    third = _child(tmp_path)
    assert third["disk_hit"] >= 1 and third["disk_write"] == 0 and not third["warnings"]
    assert (third["value"], third["grad"]) == (first["value"], first["grad"])


def test_persistent_cache_across_processes_and_a_corrupt_entry(tmp_path):
    first = _child(tmp_path)
    assert first["disk_hit"] == 0 and first["disk_write"] >= 1 and not first["warnings"]
    entries = sorted(tmp_path.glob("*-cache"))
    assert len(entries) == first["disk_write"]
    second = _child(tmp_path)
    assert second["disk_hit"] == first["disk_write"] and second["disk_write"] == 0
    assert (second["value"], second["grad"]) == (first["value"], first["grad"])
    # Corrupt every entry: a warning each, recompiled, same numbers, entries rewritten.
    for e in entries:
        data = bytearray(e.read_bytes())
        data[-10] ^= 0xFF
        e.write_bytes(bytes(data))
    third = _child(tmp_path)
    assert third["disk_hit"] == 0 and third["disk_write"] == first["disk_write"]
    assert len(third["warnings"]) == len(entries)
    assert all("corrupt" in w for w in third["warnings"])
    assert (third["value"], third["grad"]) == (first["value"], first["grad"])
    assert not list(tmp_path.glob(".tmp-*"))  # no temporary files left behind


def test_persistent_cache_truncated_entry_in_process(tmp_path):
    x = jnp.ones(7)
    xform.config.update("jax_compilation_cache_dir", str(tmp_path))
    xform.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        xform.jit(lambda x: jnp.cos(x) * 3.0 + 0.25)(x)
        (entry,) = tmp_path.glob("*-cache")
        entry.write_bytes(entry.read_bytes()[:40])
        compiler.clear_caches()
        with pytest.warns(RuntimeWarning, match="persistent compilation cache entry"):
            out = xform.jit(lambda x: jnp.cos(x) * 3.0 + 0.25)(x)
        np.testing.assert_allclose(out, np.cos(1.0) * 3.0 + 0.25, rtol=1e-6)
    finally:
        xform.config.update("jax_compilation_cache_dir", None)
        xform.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def test_persistent_cache_unreadable_entry_warns_and_recompiles(tmp_path):
    """An entry that cannot be read (here a directory where the file should be) or
    written is a warning each, never an error: the program is compiled and runs."""
    f = lambda x: jnp.sin(x) * 5.0 - 0.5  # noqa: E731
    x = jnp.ones(6)
    xform.config.update("jax_compilation_cache_dir", str(tmp_path))
    xform.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        xform.jit(f)(x)
        (entry,) = tmp_path.glob("*-cache")
        entry.unlink()
        entry.mkdir()
        compiler.clear_caches()
        xform.jit(f).clear_cache()
        before = dict(compiler.stats)
        with pytest.warns(RuntimeWarning) as caught:
            out = xform.jit(f)(x)
        np.testing.assert_allclose(out, np.sin(1.0) * 5.0 - 0.5, rtol=1e-6)
        msgs = [str(w.message) for w in caught]
        assert any(m.startswith("Error reading persistent compilation cache entry") and
                   "IsADirectoryError" in m for m in msgs), msgs
        assert any(m.startswith("Error writing") for m in msgs), msgs
        assert counts(before)["compile"] == 1
        assert not list(tmp_path.glob(".tmp-*"))
    finally:
        xform.config.update("jax_compilation_cache_dir", None)
        xform.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def test_cache_key_covers_module_runtime_and_flags(monkeypatch):
    """The key changes with the program, and with what else decides XLA's output:
    XLA_FLAGS, the jaxlib version and the devices are in the hashed context."""
    import jaxlib
    from xform import backend
    a, b = b"module-a", b"module-b"
    assert compiler.cache_key(a) == compiler.cache_key(a) != compiler.cache_key(b)
    context = backend.compile_cache_context()
    assert jaxlib.__version__.encode() in context
    assert str(backend.devices()[0].id).encode() in context
    key = compiler.cache_key(a)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    assert compiler.cache_key(a) != key


def test_min_compile_time_keeps_cheap_programs_off_disk(tmp_path):
    xform.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        xform.jit(lambda x: x - 11.0)(jnp.ones(3))  # compiles in well under 1 s
    finally:
        xform.config.update("jax_compilation_cache_dir", None)
    assert not list(tmp_path.iterdir())


def test_min_entry_size_keeps_small_entries_off_disk(tmp_path):
    xform.config.update("jax_compilation_cache_dir", str(tmp_path))
    xform.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    xform.config.update("jax_persistent_cache_min_entry_size_bytes", 1 << 30)
    try:
        xform.jit(lambda x: x * 13.0)(jnp.ones(3))
        assert not list(tmp_path.glob("*-cache"))
        xform.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        xform.jit(lambda x: x * 17.0)(jnp.ones(3))
        assert len(list(tmp_path.glob("*-cache"))) == 1
    finally:
        xform.config.update("jax_compilation_cache_dir", None)
        xform.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        xform.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# ---- donation ----

def test_donate_argnums_aliases_and_deletes_the_input():
    f = xform.jit(lambda x, y: (x * 2.0 + y, y.sum()), donate_argnums=0)
    x, y = jnp.ones(4), jnp.arange(4.0)
    lowered = f.lower(x, y)
    assert "tf.aliasing_output = 0" in lowered.as_text()
    assert lowered.compile().memory_analysis().alias_size_in_bytes == 16
    out, s = f(x, y)
    np.testing.assert_array_equal(out, [2.0, 3.0, 4.0, 5.0])
    assert float(s) == 6.0
    assert x.is_deleted() and not y.is_deleted()
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=f32\[4\]: "
                                           r"x of jit\(<lambda>\) was donated"):
        f(x, y)
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        jnp.sin(x)
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        np.asarray(x)
    np.testing.assert_array_equal(y, [0.0, 1.0, 2.0, 3.0])  # not donated: intact


def test_donated_pytree_argument_is_named_by_path():
    step = xform.jit(lambda p, g: {k: p[k] - 0.1 * g[k] for k in p}, donate_argnums=(0,))
    p = {"b": jnp.ones(2), "w": jnp.ones((2, 2))}
    g = {"b": jnp.ones(2), "w": jnp.ones((2, 2))}
    new = step(p, g)
    np.testing.assert_allclose(new["w"], 0.9 * np.ones((2, 2)))
    with pytest.raises(RuntimeError, match=r"p\['b'\] of jit\(<lambda>\) was donated"):
        step(p, g)
    new2 = step(new, g)  # the new parameters are fine to donate in turn
    np.testing.assert_allclose(new2["b"], 0.8 * np.ones(2), rtol=1e-6)


def test_donated_host_values_are_private_copies():
    # A donated Python scalar or NumPy argument gets a buffer of its own: the cached
    # scalar buffer (shared by every later op with that value) and the NumPy memory (a
    # zero-copy transfer may alias it) stay intact, call after call, as in JAX.
    f = xform.jit(lambda s: s * 2.0 + 1.0, donate_argnums=0)
    n = np.arange(3, dtype=np.float32)
    for _ in range(3):
        assert float(f(0.5)) == 2.0
        np.testing.assert_array_equal(f(n), [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(n, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(jnp.ones(2) * 0.5, [0.5, 0.5])  # 0.5's buffer lives


def test_copies_and_fresh_scalars_survive_donating_the_original():
    # x.copy(), jnp.array(x), copy.copy shared x's buffer, and jnp.zeros(()),
    # jnp.array(0.5), ... handed out the eager ops' cached scalar: donating the original
    # deleted the copy, every later jnp.zeros(()), and (optax) a second tx.init's count
    import copy

    def run(lib, m):
        f = lib.jit(lambda a: a * 2, donate_argnums=0)
        makers = [(lambda: m.arange(3.0), lambda x: x.copy()), (lambda: m.arange(3.0), m.copy),
                  (lambda: m.arange(3.0), m.array), (lambda: m.arange(3.0), copy.copy),
                  (lambda: m.arange(3.0), copy.deepcopy),
                  (lambda: m.arange(3.0), lambda x: lib.device_put(x, may_alias=False)),
                  (lambda: m.arange(3.0), lambda x: x.astype(x.dtype, copy=True)),
                  (lambda: m.arange(3.0), lambda x: m.astype(x, x.dtype, copy=True)),
                  (lambda: m.arange(3.0), lambda x: m.asarray(x, copy=True))]
        makers += [(mk, lambda x, mk=mk: mk()) for mk in (
            lambda: m.array(0.5), lambda: m.asarray(7), lambda: m.zeros(()),
            lambda: m.zeros((), np.int32), lambda: m.full((), 2.0), lambda: m.ones_like(1.0))]
        out = []
        for make, cp in makers:
            x = make()
            y = cp(x)
            f(x)
            out.append((y.is_deleted(), np.asarray(cp(y) + 1).tolist()))
        return out

    assert run(xform, jnp) == run(jax, jnp_ref)
    assert str(xform.make_jaxpr(lambda x: jnp.array(x))(1.0)) == \
        "{ lambda ; a:f32[]. let b:f32[] = copy a in (b,) }"   # (as JAX's: copy_p)


def test_donate_argnames_and_no_matching_output():
    f = xform.jit(lambda x, *, y: (x + y).sum(), donate_argnames="y")
    assert "tf.aliasing_output" not in f.lower(jnp.ones(3), y=jnp.ones(3)).as_text()
    assert float(f(jnp.ones(3), y=jnp.ones(3))) == 6.0


# ---- AOT introspection ----

def test_cost_and_memory_analysis_and_optimized_hlo():
    f = xform.jit(lambda a, b: jnp.tanh(a @ b))
    a, b = jnp.ones((8, 16)), jnp.ones((16, 4))
    lowered = f.lower(a, b)
    ref = jax.jit(lambda a, b: jnp_ref.tanh(a @ b)).lower(
        np.asarray(a), np.asarray(b)).compile().cost_analysis()
    cost = lowered.cost_analysis()
    assert cost["flops"] == ref["flops"] == 2 * 8 * 16 * 4
    compiled = lowered.compile()
    assert compiled.cost_analysis()["flops"] == cost["flops"]
    mem = compiled.memory_analysis()
    assert mem.argument_size_in_bytes == (8 * 16 + 16 * 4) * 4
    assert mem.output_size_in_bytes == 8 * 4 * 4
    hlo = compiled.as_text()
    assert "HloModule" in hlo and "tanh" in hlo
    np.testing.assert_allclose(compiled(a, b), np.tanh(np.ones((8, 4)) * 16), rtol=1e-6)


def test_lowered_hlo_dialect_compiler_ir_and_unoptimized_cost_match_jax():
    # as_text("hlo") / compiler_ir(...) / runtime_executable() were missing, and
    # Lowered.cost_analysis() gave the optimized program's estimate (JAX: unoptimized HLO)
    fx, fj = (lib.jit(lambda a, b, m=lib.numpy: (m.sin(a) * 2.0, a @ b.T), donate_argnums=1)
              for lib in (xform, jax))
    a, b = np.ones((3, 4), np.float32), np.ones((3, 4), np.float32)
    lx, lj = fx.lower(a, b), fj.lower(a, b)
    assert lx.cost_analysis() == lj.cost_analysis()
    hx, hj = lx.as_text(dialect="hlo"), lj.as_text(dialect="hlo")
    assert hx.startswith("HloModule ") and hx.split("ENTRY")[1].count("=") == \
        hj.split("ENTRY")[1].count("=")
    assert lx.compiler_ir("hlo").as_hlo_text() == hx
    assert type(lx.compiler_ir()).__name__ == type(lj.compiler_ir()).__name__ == "Module"
    assert "stablehlo.sine" in str(lx.compiler_ir("stablehlo")) == lx.as_text(debug_info=True)
    assert lx.donate_argnums == lj.donate_argnums == (1,)
    cx, cj = lx.compile(), lj.compile()
    assert cx.donate_argnums == (1,)
    assert type(cx.runtime_executable()) is type(cj.runtime_executable())
    assert cx.as_text() == cx.runtime_executable().get_hlo_text()
    for lo in (lx, lj):
        with pytest.raises(ValueError, match="unknown dialect: mhlo"):
            lo.as_text(dialect="mhlo")


def test_small_closed_over_arrays_are_constants_large_ones_arguments():
    # JAX embeds closed-over arrays as constants (XLA folds them): xform does for small
    # ones, and passes large ones as arguments, so a new large array reuses the program
    small, x = np.arange(4, dtype=np.float32), jnp.ones(4)
    text = xform.jit(lambda x: x * small).lower(x).as_text()
    assert "func.func public @main(%arg0: tensor<4xf32>)" in text
    assert "dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]>" in text
    n = dispatch.EMBED_CONSTS_UP_TO + 1
    big, y = np.ones(n, np.float32), jnp.ones(n)
    text = xform.jit(lambda y: y * big).lower(y).as_text()
    assert f"@main(%arg0: tensor<{n}xf32>, %arg1: tensor<{n}xf32>)" in text
    before = dict(compiler.stats)
    for k in range(3):
        big = np.full(n, float(k), np.float32)
        np.testing.assert_array_equal(xform.jit(lambda y: y * big)(y), big)
    assert counts(before) == {"trace": 3, "compile": 1}


@pytest.mark.parametrize("shape", [(5,), (2, 5), (16,), (3, 1, 4)])
def test_bool_array_constants_keep_their_values(shape):
    # a constant of 2-8 bools was once emitted as packed bits, which MLIR read as a splat
    mask = np.random.RandomState(1).rand(*shape) > 0.5
    x = np.ones(shape, np.float32)
    want = np.where(mask, 1.0, -1.0)
    inner = xform.jit(lambda x: jnp.where(mask, x, -x))   # consts of a nested call
    np.testing.assert_array_equal(xform.jit(lambda x: inner(x) * 1.0)(x), want)
    np.testing.assert_array_equal(inner(x), want)          # embedded in the program
