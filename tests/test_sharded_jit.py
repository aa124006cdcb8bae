"""jit partitioned by XLA over a mesh, against JAX side by side: values AND layout of
the outputs for in/out_shardings, already-sharded arguments, sharding constraints
and transforms inside; one SPMD module with Shardy annotations; the cache; errors."""
import jax
import jax.numpy as jnp
import numpy as np

import xform
import xform.numpy as xnp
from xform.sharding import NamedSharding, PartitionSpec as P
from test_sharding_arrays import JMESH, X, XMESH, _raises, both, check

W = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)


def _args(L, m, NS, P_):
    return (L.device_put(X, NS(m, P_("x", None))), L.device_put(W, NS(m, P_(None, "y"))))


def test_sharded_arguments_propagate():
    def run(L, np_, m, NS, P_):
        x, w = _args(L, m, NS, P_)
        return [L.jit(lambda a: np_.sin(a) @ a.T)(x), L.jit(lambda a: a.sum(0))(x),
                L.jit(lambda a: a.T)(x), L.jit(lambda a: a.reshape(32))(x),
                L.jit(lambda a, b: a @ b)(x, w), L.jit(lambda a, b: a.sum() + b)(x, w),
                L.jit(lambda a, b: a + b)(x, np.ones(4, np.float32))]
    for x, j in zip(*both(run)):
        check(x, j)


def test_in_and_out_shardings():
    def run(L, np_, m, NS, P_):
        f = L.jit(lambda a: (a * 2, a.sum(1)),
                  in_shardings=NS(m, P_("x", "y")),
                  out_shardings=(NS(m, P_(None, "y")), NS(m, P_())))
        g = L.jit(lambda d: d["a"] @ d["b"],
                  in_shardings=({"a": NS(m, P_("x")), "b": None},))
        return list(f(X)) + [g({"a": X, "b": W})]
    for x, j in zip(*both(run)):
        check(x, j)


def test_one_spmd_module_with_shardy_annotations():
    f = xform.jit(lambda a: a * 2, in_shardings=NamedSharding(XMESH, P("x", "y")),
                  out_shardings=NamedSharding(XMESH, P(None, "y")))
    from xform.interpreters import spmd
    y = f(X)
    entry = next(e for e in f._cache.entries.values()
                 if isinstance(e.compiled, spmd.PartitionedJaxpr))
    text = str(entry.compiled.module) if isinstance(entry.compiled.module, str) else ""
    jtext = jax.jit(lambda a: a * 2,
                    in_shardings=jax.sharding.NamedSharding(JMESH, jax.P("x", "y")),
                    out_shardings=jax.sharding.NamedSharding(JMESH, jax.P(None, "y"))
                    ).lower(X).as_text()
    for piece in ["mhlo.num_partitions = 8", 'sdy.mesh @mesh = <["x"=4, "y"=2]>',
                  'sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>',
                  'sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>']:
        assert piece in jtext and piece in text, piece
    assert y.sharding.spec == P(None, "y")


def test_constraints_and_transforms_inside():
    def run(L, np_, m, NS, P_):
        x, w = _args(L, m, NS, P_)
        loss = lambda w, x: np_.sum(np_.tanh(x @ w))  # noqa: E731
        scan = lambda x: L.lax.scan(lambda c, r: (c + r, c * r), np_.zeros(4), x)[0]  # noqa: E731
        wsc = lambda x: L.lax.with_sharding_constraint(x * 2, NS(m, P_(None, "x"))) + 1  # noqa: E731
        with L.set_mesh(m):
            bare = L.jit(lambda x: L.lax.with_sharding_constraint(x, P_("y")) * 3)(X)
        return [L.jit(L.grad(loss))(w, x), L.jit(L.vmap(lambda r: r * 2))(x),
                L.jit(scan)(x), L.jit(wsc)(x), bare,
                L.lax.with_sharding_constraint(X, NS(m, P_("x")))]
    for x, j in zip(*both(run)):
        check(x, j)


def test_cache_keys_on_shardings():
    from xform.interpreters import compiler
    f = xform.jit(lambda a: a + 1)
    a = xform.device_put(X, NamedSharding(XMESH, P("x")))
    b = xform.device_put(X, NamedSharding(XMESH, P("y")))
    ya, yb = f(a), f(b)
    assert ya.sharding.spec != yb.sharding.spec
    n = compiler.stats["trace"]
    f(a), f(b)
    assert compiler.stats["trace"] == n
    assert len([k for k in f._cache.entries]) == 2


def test_cached_call_builds_no_messages(monkeypatch):
    """A repeated sharded call derives no placement (no argument names formatted), yet
    an argument laid out differently afterwards still gets JAX's mismatch error."""
    from xform.transforms import jit_explain
    s = NamedSharding(XMESH, P("x"))
    f = xform.jit(lambda d: d["a"] * 2 + d["b"], in_shardings=s, out_shardings=s)
    d = {"a": xform.device_put(X, s), "b": xform.device_put(X, s)}
    f(d)
    calls = []
    monkeypatch.setattr(jit_explain, "leaf_name", lambda *a: calls.append(a) or "arg")
    f(d)
    out = f(d)
    np.testing.assert_array_equal(np.asarray(out), X * 3)
    assert calls == [] and out.sharding == s
    bad = {"a": xform.device_put(X, NamedSharding(XMESH, P("y"))), "b": d["b"]}
    JS, JP = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    jbad = {"a": jax.device_put(X, JS(JMESH, JP("y"))), "b": X}
    j = _raises(lambda: jax.jit(lambda d: d["a"] + d["b"],
                                in_shardings=JS(JMESH, JP("x")))(jbad))
    monkeypatch.undo()
    x = _raises(lambda: f(bad))
    assert x[0] == j[0] and "does not match the sharding" in x[1], (x, j)
    assert "d['a']" in x[1]  # (xform also names the argument)


def test_errors_match_jax():
    def committed_mismatch(L, np_, m, NS, P_):
        x = L.device_put(np.zeros(8, np.float32), NS(m, P_("x")))
        return L.jit(lambda a: a, in_shardings=NS(m, P_("y")))(x)

    def mixed_meshes(L, np_, m, NS, P_):
        m2 = L.sharding.Mesh(np.array(L.devices()[:4]), ("x",))
        x = L.device_put(np.zeros(8, np.float32), NS(m, P_("x")))
        z = L.device_put(np.zeros(8, np.float32), NS(m2, P_("x")))
        return L.jit(lambda a, b: a + b)(x, z)

    def aot_mismatch(L, np_, m, NS, P_):  # (a committed argument laid out otherwise)
        c = L.jit(lambda a: a * 2, in_shardings=NS(m, P_("x"))).lower(X).compile()
        c(L.device_put(X, NS(m, P_("x", None))))  # (equivalent: accepted)
        c(X)  # (uncommitted: put there)
        return c(L.device_put(X, NS(m, P_("y"))))

    def aot_one_device(L, np_, m, NS, P_):
        return L.jit(lambda a: a * 2, in_shardings=NS(m, P_("x"))).lower(X).compile()(
            L.device_put(X, L.devices()[3]))

    def bare_spec(L, np_, m, NS, P_):
        return L.lax.with_sharding_constraint(np.zeros(8), P_("x"))
    cases = [
        (lambda L, np_, m, NS, P_: L.jit(lambda a: a, in_shardings=NS(m, P_("x", "y")))(
            np.zeros(8)), "only valid for values of rank at least 2"),
        (lambda L, np_, m, NS, P_: L.jit(lambda a: a, out_shardings=NS(m, P_("x")))(
            np.zeros(6)), "implies that array axis 0 is partitioned 4 times"),
        (committed_mismatch, "Sharding passed to jit does not match the sharding on the "
                             "respective arg"),
        (mixed_meshes, "Received incompatible devices for jitted computation"),
        (bare_spec, "requires a non-empty mesh in context"),
        (aot_mismatch, "Computation was compiled for input shardings that disagree"),
        (aot_one_device, "Passed sharding: SingleDeviceSharding"),
        (lambda L, np_, m, NS, P_: L.jit(lambda a: L.lax.with_sharding_constraint(a, None))(
            np.zeros(8)), "got sharding None which is not allowed"),
    ]
    for case, words in cases:
        x = _raises(lambda: case(xform, xnp, XMESH, NamedSharding, P))
        j = _raises(lambda: case(jax, jnp, JMESH, jax.sharding.NamedSharding,
                                 jax.sharding.PartitionSpec))
        assert x is not None and j is not None and x[0] == j[0], (x, j)
        assert words in x[1] and words in j[1], (x, j)


def test_donated_sharded_argument():
    f = xform.jit(lambda a: a * 2, donate_argnums=0)
    x = xform.device_put(X, NamedSharding(XMESH, P("x")))
    y = f(x)
    assert x.is_deleted() and y.sharding == NamedSharding(XMESH, P("x"))
    np.testing.assert_array_equal(np.asarray(y), X * 2)
    try:
        f(x)
    except RuntimeError as e:
        assert "Array has been deleted" in str(e) and "donated" in str(e)
    else:
        raise AssertionError("a donated argument was used again")


def test_donation_pairs_per_device_blocks_as_jax():
    # an output sharded otherwise has blocks of another shape: JAX leaves the input
    # alone (XLA failed to alias f32[2,4] to f32[4,4] here); XLA decides where it places
    # the output; same-sized blocks of another shape are offered to XLA
    import warnings

    def run(L, np_, m, NS, P_):
        out = []
        for sp, kw, f in [("x", dict(out_shardings=NS(m, P_("y"))), lambda a: a * 2),
                          ("x", {}, lambda a: a.T),
                          ("x", dict(out_shardings=NS(m, P_("x"))), lambda a: a.reshape(4, 8)),
                          ((), dict(out_shardings=NS(m, P_("x"))), lambda a: a * 2),
                          ("x", dict(out_shardings=(NS(m, P_()), NS(m, P_("x")))),
                           lambda a: (a.sum(), a * 2))]:
            a = L.device_put(X, NS(m, P_(*sp)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (JAX's "donated buffers were not usable")
                out.append((L.jit(f, donate_argnums=0, **kw)(a), a.is_deleted()))
        return out
    for (x, xd), (j, jd) in zip(*both(run)):
        assert xd == jd
        for a, b in zip(jax.tree.leaves(x), jax.tree.leaves(j)):
            check(a, b)


def test_shard_map_inside_partitioned_jit_is_a_manual_computation():
    def run(L, np_, m, NS, P_):
        x, _ = _args(L, m, NS, P_)
        sm = L.shard_map(lambda b: L.lax.psum(b, "x") * L.lax.axis_index("y"), mesh=m,
                         in_specs=P_("x"), out_specs=P_("x", "y"))
        pp = L.shard_map(lambda b: L.lax.ppermute(b, "x", [(0, 1), (1, 2), (2, 3), (3, 0)]),
                         mesh=m, in_specs=P_("x"), out_specs=P_("x"), check_vma=False)
        ag = L.shard_map(lambda b: L.lax.all_gather(b, "y", tiled=True), mesh=m,
                         in_specs=P_("x", "y"), out_specs=P_("x"), check_vma=False)
        f = L.jit(lambda a: sm(a * 2) + 1)
        return [f(x), L.jit(lambda a: pp(a) - 1)(x), L.jit(lambda a: ag(a).sum(1))(x)], f
    (xs, xf), (js, _) = both(run)
    for x, j in zip(xs, js):
        check(x, j)
    text = xf.lower(xform.device_put(X, NamedSharding(XMESH, P("x")))).as_text()
    assert "sdy.manual_computation" in text and "partition_id" in text


def test_partially_manual_shard_map():
    """``axis_names={'x'}``: manual over 'x' only, 'y' left to the partitioner (one
    sdy.manual_computation over "x"; axis_index in a nested one over "y"); eager, in
    jit (of sharded and of NumPy arguments), under grad and vmap; JAX's spec error."""
    def run(L, np_, m, NS, P_):
        x = L.device_put(X, NS(m, P_("x", "y")))
        red = L.shard_map(lambda a: L.lax.psum(a, "x") * 2, mesh=m, in_specs=P_("x"),
                          out_specs=P_(), axis_names={"x"})
        ew = L.shard_map(lambda a: np_.sin(a) @ a.T + L.lax.axis_index("x"), mesh=m,
                         in_specs=P_("x"), out_specs=P_("x"), axis_names={"x"})
        f = L.jit(lambda a: ew(a) + 1)
        return [red(x), L.jit(red)(x), f(x), L.jit(red)(X),
                L.jit(L.grad(lambda a: ew(a).sum()))(x),
                L.jit(L.vmap(red, in_axes=1, out_axes=1))(x)], f
    (xs, xf), (js, _) = both(run)
    for x, j in zip(xs, js):
        check(x, j)
    text = xf.lower(xform.device_put(X, NamedSharding(XMESH, P("x", "y")))).as_text()
    assert 'manual_axes={"x"}' in text, text

    def wrong(L, np_, m, NS, P_):
        return L.shard_map(lambda a: a, mesh=m, in_specs=P_("y"), out_specs=P_(),
                           axis_names={"x"})(X)
    x = _raises(lambda: wrong(xform, xnp, XMESH, NamedSharding, P))
    j = _raises(lambda: wrong(jax, jnp, JMESH, jax.sharding.NamedSharding,
                              jax.sharding.PartitionSpec))
    assert x == j, (x, j)


def test_out_sharding_auto_axes_reshard_on_an_explicit_mesh():
    """``out_sharding=`` on dot/matmul/einsum, ``auto_axes`` and ``reshard``, eager and
    in jit, on a mesh of Explicit axes: JAX's values, shards and (typed) specs."""
    b_val = np.linspace(0, 2, 32, dtype=np.float32).reshape(4, 8)

    def run(L, np_, m, NS, P_):
        mesh = L.make_mesh((4, 2), ("x", "y"),
                           axis_types=(L.sharding.AxisType.Explicit,) * 2)
        a = L.device_put(X, NS(mesh, P_("x", "y")))
        b = L.device_put(b_val, NS(mesh, P_("y", None)))
        with L.set_mesh(mesh):
            return [np_.dot(a, b, out_sharding=P_("x", None)),
                    L.jit(lambda a, b: np_.matmul(a, b, out_sharding=P_(None, "x")))(a, b),
                    np_.einsum("ij,jk->ik", a, b, out_sharding=P_("x")),
                    L.jit(lambda a, b: np_.einsum("ij,jk->ki", a, b,
                                                  out_sharding=P_(None, "x")))(a, b),
                    L.jit(L.sharding.auto_axes(lambda x: x * 2,
                                               out_sharding=P_(None, "x")))(a),
                    L.sharding.reshard(a, P_(None, "x")),
                    L.jit(lambda a: L.sharding.reshard(a * 3, P_("y", None)))(a)]

    from test_sharding_arrays import layout
    for x, j in zip(*both(run)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(j), rtol=1e-5)
        assert layout(x) == layout(j), (layout(x), layout(j))
