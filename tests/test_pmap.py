"""pmap, collectives and vmap(axis_name=) on 8 host CPU devices, against jax.pmap."""
import jax
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import lax

N = 8
X = np.arange(N * 6, dtype=np.float32).reshape(N, 6) / 7.0 - 3.0
XI = np.arange(N * 4, dtype=np.int32).reshape(N, 4) - 9
GROUPS = [[0, 1, 2, 3], [4, 5, 6, 7]]
RING = [(i, (i + 1) % N) for i in range(N)]


def _close(r, e, tol=1e-5):
    assert np.asarray(r).shape == np.asarray(e).shape
    assert np.asarray(r).dtype == np.asarray(e).dtype, (np.asarray(r).dtype, e.dtype)
    np.testing.assert_allclose(np.asarray(r), np.asarray(e), rtol=tol, atol=tol)


# (name, xform fn, jax fn, input); the functions take (lax module, x)
COLLECTIVES = [
    ("psum", lambda L, x: L.psum(x, "i"), X),
    ("psum_int", lambda L, x: L.psum(x, "i"), XI),
    ("pmax", lambda L, x: L.pmax(x, "i"), X),
    ("pmin_int", lambda L, x: L.pmin(x, "i"), XI),
    ("pmean", lambda L, x: L.pmean(x, "i"), X),
    ("pmean_int", lambda L, x: L.pmean(x, "i"), XI),
    ("psum_groups", lambda L, x: L.psum(x, "i", axis_index_groups=GROUPS), X),
    ("pmax_groups", lambda L, x: L.pmax(x, "i", axis_index_groups=GROUPS), X),
    ("pmean_groups", lambda L, x: L.pmean(x, "i", axis_index_groups=GROUPS), X),
    ("all_gather", lambda L, x: L.all_gather(x, "i"), X),
    ("all_gather_axis1", lambda L, x: L.all_gather(x, "i", axis=1), X),
    ("all_gather_tiled", lambda L, x: L.all_gather(x, "i", tiled=True), X),
    ("all_gather_groups", lambda L, x: L.all_gather(x, "i", axis_index_groups=GROUPS), X),
    ("ppermute", lambda L, x: L.ppermute(x, "i", RING), X),
    ("ppermute_partial", lambda L, x: L.ppermute(x, "i", [(0, 3), (5, 1)]), X),
    ("pshuffle", lambda L, x: L.pshuffle(x, "i", [3, 1, 2, 0, 7, 6, 5, 4]), X),
    ("all_to_all", lambda L, x: L.all_to_all(x.reshape(8, 3), "i", 0, 1),
     np.tile(X, (1, 4))),
    ("all_to_all_tiled", lambda L, x: L.all_to_all(x.reshape(16, 3), "i", 0, 1, tiled=True),
     np.tile(X, (1, 8))),
    ("psum_scatter", lambda L, x: L.psum_scatter(x.reshape(8, 6), "i"), np.tile(X, (1, 8))),
    ("psum_scatter_tiled", lambda L, x: L.psum_scatter(x.reshape(2, 24), "i",
                                                       scatter_dimension=1, tiled=True),
     np.tile(X, (1, 8))),
    ("axis_index", lambda L, x: L.axis_index("i") + 0 * x[0].astype(np.int32), XI),
    ("axis_size", lambda L, x: x * L.psum(1, "i"), X),
]


@pytest.mark.parametrize("name,fn,x", COLLECTIVES, ids=[c[0] for c in COLLECTIVES])
def test_collective_vs_jax_pmap(name, fn, x):
    r = xform.pmap(lambda v: fn(lax, v), "i")(x)
    e = jax.pmap(lambda v: fn(jax.lax, v), "i")(x)
    _close(r, e)


VMAPPABLE = [c for c in COLLECTIVES if "groups" not in c[0] and "partial" not in c[0]]


@pytest.mark.parametrize("name,fn,x", VMAPPABLE, ids=[c[0] for c in VMAPPABLE])
def test_vmap_axis_name_matches_pmap(name, fn, x):
    r = xform.vmap(lambda v: fn(lax, v), axis_name="i")(x)
    _close(r, xform.pmap(lambda v: fn(lax, v), "i")(x))
    _close(r, jax.vmap(lambda v: fn(jax.lax, v), axis_name="i")(x))


def test_collective_grads_vs_jax():
    def loss(L, pm):
        def f(w):
            def body(v):
                a = L.psum(v * v, "i")
                b = L.all_gather(jnp_or_np(L).sin(v), "i").sum()
                c = L.ppermute(v, "i", RING) * v
                d = L.psum_scatter(jnp_or_np(L).tile(v, 8), "i", tiled=True)
                e = L.all_to_all(v.reshape(8, 1), "i", 0, 1)
                return (a + c + d).sum() + b + e.sum() * 0.5
            return pm(body, "i")(w).sum()
        return f

    def jnp_or_np(L):
        return jnp if L is lax else jax.numpy
    x = np.tile(X, (1, 2))[:, :8]
    g = xform.grad(loss(lax, xform.pmap))(x)
    ge = jax.grad(loss(jax.lax, jax.pmap))(x)
    _close(g, ge, 1e-4)


def test_pmap_of_grad_and_data_parallel_step_matches_single_device():
    rng = np.random.RandomState(0)
    w = {"w": rng.randn(5, 3).astype(np.float32), "b": np.zeros(3, np.float32)}
    xs = rng.randn(N * 4, 5).astype(np.float32)
    ys = rng.randn(N * 4, 3).astype(np.float32)

    def loss(p, x, y):
        return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)

    def step(p, x, y):
        g = xform.grad(loss)(p, x, y)
        g = lax.pmean(g, "batch")
        return xform.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)

    pstep = xform.pmap(step, "batch", in_axes=(None, 0, 0), out_axes=None)
    new = pstep(w, xs.reshape(N, 4, 5), ys.reshape(N, 4, 3))
    g = xform.grad(loss)(w, xs, ys)
    single = xform.tree_util.tree_map(lambda a, b: a - 0.1 * b, w, g)
    for k in w:
        _close(new[k], single[k])
    # replicated parameters, three steps, fed back without a host round trip
    rep = xform.device_put_replicated(w, xform.devices())
    pstep2 = xform.pmap(step, "batch")
    for _ in range(3):
        rep = pstep2(rep, xs.reshape(N, 4, 5), ys.reshape(N, 4, 3))
        w = xform.tree_util.tree_map(lambda a, b: a - 0.1 * b, w,
                                     xform.grad(loss)(w, xs, ys))
    for k in w:
        _close(rep[k][3], w[k], 1e-5)


def test_jit_of_pmap_and_pmap_of_jit():
    f = lambda v: lax.psum(jnp.sin(v), "i") * v
    e = jax.pmap(lambda v: jax.lax.psum(jax.numpy.sin(v), "i") * v, "i")(X)
    _close(xform.jit(xform.pmap(f, "i"))(X), e)
    _close(xform.pmap(xform.jit(f), "i")(X), e)


def test_pmap_of_vmap_two_axis_names():
    x = X.reshape(N, 2, 3)

    def f(L, vmap):
        def inner(v):
            return (L.psum(v, ("i", "j")) + L.psum(v, "j") * L.axis_index("i")
                    + L.axis_index("j"))
        return vmap(inner, axis_name="j")
    r = xform.pmap(f(lax, xform.vmap), "i")(x)
    e = jax.pmap(f(jax.lax, jax.vmap), "i")(x)
    _close(r, e)
    # vmap over vmap resolves the same names to the right axes
    _close(xform.vmap(f(lax, xform.vmap), axis_name="i")(x), e)


def test_pmap_control_flow_and_custom_jvp():
    @xform.custom_jvp
    def sq(v):
        return v * v

    sq.defjvp(lambda p, t: (sq(p[0]), 3.0 * t[0]))

    def body(L, lax_mod, v):
        def step(c, a):
            return c + a, c * a
        c, ys = lax_mod.scan(step, 0.0, v)
        w = lax_mod.cond(c > 0, lambda u: u * 2.0, lambda u: -u, v)
        n = lax_mod.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 1.5),
                               (0, L.psum(c, "i")))[1]
        return ys + w + n

    r = xform.pmap(lambda v: body(lax, lax, v), "i")(X)
    e = jax.pmap(lambda v: body(jax.lax, jax.lax, v), "i")(X)
    _close(r, e, 1e-4)
    g = xform.grad(lambda x: xform.pmap(lambda v: lax.psum(sq(v), "i"), "i")(x).sum())(X)
    np.testing.assert_allclose(g, np.full_like(X, 3.0 * N))
    out, vjp = xform.vjp(xform.pmap(lambda v: lax.pmean(v * v, "i"), "i"), X)
    (ct,) = vjp(np.ones_like(X))
    _, jvjp = jax.vjp(jax.pmap(lambda v: jax.lax.pmean(v * v, "i"), "i"), X)
    _close(ct, jvjp(np.ones_like(X))[0])


def test_pytrees_axes_static_args():
    def make(L):
        def f(a, k, scale):
            return {"s": a["x"] * scale + a["y"], "t": L.psum(a["x"], "i")}, k
        return f

    tree = {"x": X, "y": np.float32(2.0)}
    axes = dict(in_axes=({"x": 0, "y": None}, 1, None), out_axes=({"s": 1, "t": 0}, 0),
                static_broadcasted_argnums=2)
    out = xform.pmap(make(lax), "i", **axes)(tree, X.T, 3)
    e = jax.pmap(make(jax.lax), "i", **axes)(tree, X.T, 3)
    _close(out[0]["s"], e[0]["s"])
    _close(out[0]["t"], e[0]["t"])
    _close(out[1], e[1])
    r = xform.pmap(lambda: lax.axis_index("i"), "i", axis_size=4)()
    _close(r, np.arange(4, dtype=np.int32))


def test_multi_device_arrays():
    f = xform.pmap(lambda v: v + 1.0, "i")
    r = f(X)
    again = f(r)  # same layout: the per-device buffers are used as they are
    assert r._npy is None and again._npy is None  # no host copy was made of either
    assert all(a is not b for a, b in zip(again._shards, r._shards))
    assert isinstance(r, xform.Array)
    assert r.devices() == set(xform.devices())
    assert r.sharding.spec == xform.sharding.PartitionSpec("i")
    assert r.is_fully_addressable
    shards = r.addressable_shards
    # as JAX 0.10.2's pmap (a shard_map): each shard keeps the mapped dim, size 1
    js = jax.pmap(lambda v: v + 1.0, "i")(X).addressable_shards
    assert [(s.index, s.data.shape) for s in shards] == [(s.index, s.data.shape) for s in js]
    assert len(shards) == N and shards[2].index[0] == slice(2, 3)
    np.testing.assert_array_equal(shards[2].data, X[2:3] + 1)
    assert r.addressable_data(2).devices() == {xform.devices()[2]}
    assert next(iter(shards[2].data.devices())) == xform.devices()[2]
    np.testing.assert_array_equal(r[2], X[2] + 1)
    np.testing.assert_array_equal(np.asarray(r), X + 1)
    np.testing.assert_array_equal(r * 2, (X + 1) * 2)
    np.testing.assert_array_equal(again, X + 2)
    with pytest.raises(ValueError, match="lives on 8 devices"):
        r.device
    plain = jnp.ones(3)
    assert plain.sharding == xform.sharding.SingleDeviceSharding(xform.devices()[0])
    assert plain.devices() == {xform.devices()[0]} and plain.is_fully_addressable
    assert len(plain.addressable_shards) == 1


def test_replicated_results_span_the_mesh_as_jax():
    # pmap's out_axes=None and an eager shard_map's P() output: one copy per device
    # (NamedSharding P(), committed), not device 0's alone; ops follow device 0's copy
    def run(L, P, devs):
        f = L.pmap(lambda v: (v, L.lax.psum(v, "i")), "i", out_axes=(0, None),
                   devices=devs[2:6])
        mesh = L.sharding.Mesh(np.array(devs).reshape(4, 2), ("x", "y"))
        g = L.shard_map(lambda b: L.lax.psum(b.sum(), ("x", "y")), mesh=mesh,
                        in_specs=P("x", "y"), out_specs=P())
        _, s = f(X[:4])
        return [s, g(X), s - 1]
    (xs, xg, xo), (js, jg, jo) = (run(xform, xform.sharding.PartitionSpec, xform.devices()),
                                  run(jax, jax.sharding.PartitionSpec, jax.devices()))
    for x, j in ((xs, js), (xg, jg)):
        _close(x, j)
        assert tuple(x.sharding.spec) == tuple(j.sharding.spec) and x.committed and j.committed
        assert [(s.device.id, s.replica_id) for s in x.addressable_shards] == \
            [(s.device.id, s.replica_id) for s in j.addressable_shards]
    _close(xo, jo)  # (JAX runs it on the 4 devices, xform on device 2's copy)
    assert xo.committed and xo.devices() == {xform.devices()[2]}


def test_pmap_lower_compiles_and_runs():
    # JAX's pmap has .lower (NB xform's lowers the one-device program of jit of pmap)
    f = xform.pmap(lambda b, n: lax.psum(b, "i") * n, "i", static_broadcasted_argnums=1)
    lowered = f.lower(X, 3)
    assert "func" in lowered.as_text()
    _close(lowered.compile()(X), jax.pmap(lambda b, n: jax.lax.psum(b, "i") * n, "i",
                                          static_broadcasted_argnums=1)(X, 3))


def test_device_put_sharded_replicated_and_counts():
    assert xform.local_device_count() == N == len(xform.local_devices())
    s = xform.device_put_sharded([X[i] for i in range(4)], xform.devices()[:4])
    assert s.shape == (4, 6)
    np.testing.assert_array_equal(s, X[:4])
    r = xform.pmap(lambda v: lax.psum(v, "i"), "i", devices=xform.devices()[:4])(s)
    _close(r, jax.pmap(lambda v: jax.lax.psum(v, "i"), "i",
                       devices=jax.devices()[:4])(X[:4]))
    rep = xform.device_put_replicated({"a": np.ones(2, np.float32)}, xform.devices()[:3])
    np.testing.assert_array_equal(rep["a"], np.ones((3, 2)))
    with pytest.raises(ValueError, match="2 shards for 3 devices"):
        xform.device_put_sharded([X[0], X[1]], xform.devices()[:3])


def test_errors():
    with pytest.raises(ValueError, match="requires 9 devices .* only 8 devices"):
        xform.pmap(lambda v: v)(np.zeros((9, 2)))
    with pytest.raises(ValueError, match=r"(?s)inconsistent sizes.*args\[0\] has size 8.*"
                                         r"args\[1\] has size 4"):
        xform.pmap(lambda a, b: a)(X, np.zeros((4, 2)))
    with pytest.raises(NameError, match="unbound axis name: j"):
        xform.pmap(lambda v: lax.psum(v, "j"), "i")(X)
    with pytest.raises(NameError, match="unbound axis name: k"):
        xform.vmap(lambda v: lax.all_gather(v, "k"), axis_name="i")(X)
    with pytest.raises(ValueError, match=r"argument args\[0\] along axis 2.*rank 2"):
        xform.pmap(lambda v: v, in_axes=2)(X)
    with pytest.raises(ValueError, match="sources and destinations must be unique"):
        xform.pmap(lambda v: lax.ppermute(v, "i", [(0, 1), (0, 2)]), "i")(X)
    with pytest.raises(ValueError, match="axis_index_groups must cover every index"):
        xform.pmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1]]), "i")(X)
    with pytest.raises(ValueError, match="in_axes must be an int, None, or a tuple"):
        xform.pmap(lambda a, b: a, in_axes=(0,))(X, X)


def test_collectives_inside_jit_and_scan_under_vmap_and_jit_of_grad_of_pmap():
    def f(L, lax_mod, jit):
        def body(v):
            s = jit(lambda u: L.psum(u, "i"))(v)
            c, _ = lax_mod.scan(lambda c, a: (c + L.pmax(a, "i"), None), 0.0, v)
            return s * 2.0 + c
        return body
    r = xform.vmap(f(lax, lax, xform.jit), axis_name="i")(X)
    e = jax.vmap(f(jax.lax, jax.lax, jax.jit), axis_name="i")(X)
    _close(r, e, 1e-4)

    def loss(pm, L):
        return lambda v: pm(lambda u: L.psum(u * u, "i"), "i")(v).sum()
    _close(xform.jit(xform.grad(loss(xform.pmap, lax)))(X),
           jax.jit(jax.grad(loss(jax.pmap, jax.lax)))(X))


def test_vmap_of_pmap():
    x = X[:, :3].T.copy()  # (3, 8): vmap over axis 1 of the transposed copy below
    for vax, arg in [(0, x), (1, x.T.copy())]:
        r = xform.vmap(xform.pmap(lambda v: lax.psum(v, "i") * v, "i"), in_axes=vax)(arg)
        e = jax.vmap(jax.pmap(lambda v: jax.lax.psum(v, "i") * v, "i"), in_axes=vax)(arg)
        _close(r, e)
    y = X.reshape(8, 3, 2)
    w = np.ones((2, 3), np.float32)

    def f(L, pm):
        return pm(lambda v, u: (L.psum(v, "i") + u, u * 2.0), "i", in_axes=(0, None),
                  out_axes=(1, None))
    r = xform.vmap(f(lax, xform.pmap), in_axes=(2, 0))(y, w)
    e = jax.vmap(f(jax.lax, jax.pmap), in_axes=(2, 0))(y, w)
    _close(r[0], e[0])
    _close(r[1], e[1])


def test_pmax_pmin_grads_against_finite_differences():
    # NB: JAX has no differentiation rule for pmax/pmin; ours sends the tangent of the
    # maximizing member (averaged over ties), like reduce_max.
    from xform.test_util import check_grads
    x = (np.arange(16, dtype=np.float64).reshape(8, 2) * 0.37) % 1.3
    with _x64():
        for red in (lax.pmax, lax.pmin):
            f = xform.pmap(lambda v: jnp.sin(red(v * v, "i")) * v, "i")
            check_grads(f, (x,), order=1, modes=("fwd", "rev"))


class _x64:
    def __enter__(self):
        self.old = xform.config.jax_enable_x64
        xform.config.update("jax_enable_x64", True)

    def __exit__(self, *exc):
        xform.config.update("jax_enable_x64", self.old)


def test_custom_vjp_inside_pmap_under_grad():
    def make(cv, L):
        @cv
        def clip_grad(v):
            return v

        clip_grad.defvjp(lambda v: (v, None), lambda _, g: (L.pmean(g, "i") * 0.5,))
        return lambda x: L.psum(clip_grad(x) ** 2, "i").sum()

    g = xform.grad(lambda x: xform.pmap(make(xform.custom_vjp, lax), "i")(x).sum())(X)
    e = jax.grad(lambda x: jax.pmap(make(jax.custom_vjp, jax.lax), "i")(x).sum())(X)
    _close(g, e)


def test_jit_batched_under_different_axis_names_is_not_confused():
    # Regression: pjit's derived (batched) jaxprs were memoized without the vmapped
    # axis name, so the second call reused the body batched under 'i' for axis 'j'.
    def run(vmap, jit, L):
        g = jit(lambda v: L.psum(v, "i"))
        a = vmap(g, axis_name="i")(X[:2, 0])
        b = vmap(vmap(g, axis_name="j"), axis_name="i")(X[:3, :2])
        return a, b
    for r, e in zip(run(xform.vmap, xform.jit, lax), run(jax.vmap, jax.jit, jax.lax)):
        _close(r, e)


def _jf(L, np_):
    return lambda v: L.psum(np_.sin(v), "i") * v


def test_jit_of_pmap_runs_on_every_device():
    e = jax.pmap(_jf(jax.lax, jax.numpy), "i")(X)
    r = xform.jit(xform.pmap(_jf(lax, jnp), "i"))(X)
    # fed back in, its buffers are used as they are (no host round trip)
    again = xform.jit(xform.pmap(_jf(lax, jnp), "i"))(r)
    assert r._npy is None
    _close(again, jax.pmap(_jf(jax.lax, jax.numpy), "i")(e))
    _close(r, e)
    # the pmap's output comes back sharded over the 8 devices, one row each
    assert isinstance(r, xform.core.array.ShardedArray)
    assert r.sharding.spec == xform.sharding.PartitionSpec("i")
    shards = r.addressable_shards
    assert [next(iter(s.data.devices())) for s in shards] == xform.devices()
    for k, s in enumerate(shards):
        np.testing.assert_allclose(np.asarray(s.data), e[k:k + 1], rtol=1e-5)
    # jit-level code around the pmap runs replicated on every device
    def around(pm, L, np_):
        return lambda x, w: pm(_jf(L, np_), "i")(x * w).sum(0) + w
    r = xform.jit(around(xform.pmap, lax, jnp))(X, np.float32(2.0))
    _close(r, jax.jit(around(jax.pmap, jax.lax, jax.numpy))(X, np.float32(2.0)))
    assert r.devices() == set(xform.devices())
    assert r.sharding.spec == xform.sharding.PartitionSpec()
    assert len(r.addressable_shards) == N
    _close(r * 2.0, np.asarray(r) * 2.0)  # eager ops use device 0's copy
    s = xform.jit(lambda x: xform.pmap(_jf(lax, jnp), "i")(x).sum())(X)
    assert np.asarray(s).shape == () and len(s.addressable_shards) == N
    _close(s, np.asarray(e).sum(), 1e-4)


def test_jit_of_pmap_composes_with_grad_vmap_and_a_device_subset():
    def loss(jit, pm, L, np_):
        return lambda x: jit(pm(_jf(L, np_), "i"))(x).sum()
    ge = jax.grad(loss(jax.jit, jax.pmap, jax.lax, jax.numpy))(X)
    _close(xform.grad(loss(xform.jit, xform.pmap, lax, jnp))(X), ge, 1e-4)
    g = xform.jit(xform.grad(lambda x: xform.pmap(_jf(lax, jnp), "i")(x).sum()))(X)
    _close(g, ge, 1e-4)
    assert g.sharding.spec == xform.sharding.PartitionSpec("i")
    v = xform.vmap(xform.jit(xform.pmap(_jf(lax, jnp), "i")), in_axes=1)(X.reshape(8, 2, 3))
    _close(v, jax.vmap(jax.pmap(_jf(jax.lax, jax.numpy), "i"), in_axes=1)(
        X.reshape(8, 2, 3)))
    devs = xform.devices()[4:]
    r = xform.jit(xform.pmap(_jf(lax, jnp), "i", devices=devs))(X[:4])
    _close(r, jax.pmap(_jf(jax.lax, jax.numpy), "i")(X[:4]))
    assert r.devices() == set(devs)
    # two different meshes in one program: compiled for one device (same values)
    two = xform.jit(lambda x: xform.pmap(_jf(lax, jnp), "i")(x)[:4]
                    + xform.pmap(_jf(lax, jnp), "i")(x[:4]))(X)
    e = jax.pmap(_jf(jax.lax, jax.numpy), "i")
    _close(two, np.asarray(e(X))[:4] + np.asarray(e(X[:4])))


def test_donate_argnums_reuses_buffers_and_rejects_reuse():
    x = xform.pmap(lambda v: v + 1.0, "i")(X)
    ptrs = [b.unsafe_buffer_pointer() for b in x._shards]
    step = xform.pmap(lambda v, w: v * 2.0 + w, "i", in_axes=(0, None), donate_argnums=0)
    y = step(x, np.float32(1.0))
    _close(y, (X + 1.0) * 2.0 + 1.0)
    # the output was written in place of the donated input, on every device
    assert [b.unsafe_buffer_pointer() for b in y._shards] == ptrs
    with pytest.raises(RuntimeError, match=r"deleted.*argument 0 of pmap.*donate_argnums"):
        step(x, np.float32(1.0))
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(x)
    with pytest.raises(RuntimeError, match=r"deleted.*donate_argnums"):
        xform.pmap(lambda v: v, "i")(x)  # a pmap that donates nothing, too
    # jit(pmap) donates through jit's donate_argnums, into the replicated program
    z = xform.jit(xform.pmap(lambda v: v * 3.0, "i"), donate_argnums=0)(y)
    _close(z, ((X + 1.0) * 2.0 + 1.0) * 3.0)
    with pytest.raises(RuntimeError, match="deleted"):
        xform.jit(xform.pmap(lambda v: v * 3.0, "i"), donate_argnums=0)(y)
    # under grad donation is ignored (as in JAX: nothing of the caller's is deleted)
    xs = xform.pmap(lambda v: v, "i")(X)
    g = xform.grad(lambda a: step(a, np.float32(0.0)).sum())(xs)
    _close(g, np.full_like(X, 2.0))
    _close(xs, X)


def test_more_bad_input_errors():
    mesh = xform.make_mesh((8,), ("x",), axis_types=(xform.sharding.AxisType.Auto,))
    P = xform.sharding.PartitionSpec
    cases = [
        (lambda: xform.pmap(lambda v: v, devices=xform.devices()[:3])(X), ValueError,
         "3 devices for a mapped axis of size 8"),
        (lambda: xform.jit(xform.pmap(lambda v: v))(np.zeros((9, 2))), ValueError,
         "requires 9 devices .* only 8 devices"),
        (lambda: xform.pmap(lambda v: v, out_axes=3)(X), ValueError,
         "out_axes specification 3 is out of bounds for an output of rank 2"),
        (lambda: xform.pmap(lambda v: v, in_axes=-3)(X), ValueError,
         r"args\[0\] along axis -3.*rank 2 \(shape \(8, 6\)\)"),
        (lambda: xform.pmap(lambda a: a, in_axes=({"a": 0, "b": 0},))({"a": X}), ValueError,
         "in_axes specification must be a tree prefix"),
        (lambda: xform.pmap(lambda v, s: v, static_broadcasted_argnums=3)(X, 1), ValueError,
         "static_broadcasted_argnums 3 is out of range"),
        (lambda: xform.pmap(lambda v: v, axis_size=4)(X), ValueError,
         "axis_size=4 but the mapped axes have size 8"),
        (lambda: xform.pmap(lambda v: v, in_axes=None)(X), ValueError,
         "at least one argument with a mapped axis"),
        (lambda: lax.psum(np.ones(2), "i"), NameError, r"unbound axis name: i.*\[\]"),
        (lambda: xform.jit(lambda x: xform.pmap(lambda v: lax.psum(v, "j"), "i")(x))(X),
         NameError, r"unbound axis name: j.*\['i'\]"),
        (lambda: xform.shard_map(lambda b: lax.psum(b, "z"), mesh=mesh, in_specs=P("x"),
                                 out_specs=P())(X), NameError,
         r"unbound axis name: z.*\['x'\]"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn()


def test_jit_with_pmap_inside_scan_and_cond_runs_on_every_device():
    def prog(jit, pmap, L, np_):
        def f(xs):
            def step(c, x):
                y = pmap(lambda v: L.psum(np_.sin(v), "i") * v, "i")(x + c)
                return c + y.sum() * 0.01, y
            c, ys = L.scan(step, 0.0, xs)
            z = L.cond(c > 0, lambda: pmap(lambda v: v * 2, "i")(xs[0]), lambda: xs[1])
            return c, ys, z
        return jit(f)
    xs = np.stack([X, X * 0.5, -X])
    r = prog(xform.jit, xform.pmap, lax, jnp)(xs)
    e = prog(jax.jit, jax.pmap, jax.lax, jax.numpy)(xs)
    for a, b in zip(r, e):
        _close(a, np.asarray(b))
        assert a.devices() == set(xform.devices())


def test_jit_traced_under_one_axis_size_is_not_reused_for_another():
    # Regression: jit's trace cache was keyed without the bound axes, so a body reading
    # the axis size (axis_size, all_gather) kept the first size it was traced with.
    g = xform.jit(lambda v: v * lax.axis_size("i"))
    h = xform.jit(lambda v: lax.all_gather(v, "i", tiled=True))
    for n in (2, 4):
        _close(xform.vmap(g, axis_name="i")(np.ones(n, np.float32)),
               np.full(n, n, np.float32))
        _close(xform.pmap(h, "i")(X[:n, :1]), np.tile(X[:n, 0], (n, 1)))


def test_pmap_over_typed_keys_matches_jax():
    # typed keys are arrays of an extended dtype: sharded by their key dimensions
    import jax.random as jr
    import xform.random as random
    keys, jkeys = random.split(random.key(3), N), jr.split(jr.key(3), N)
    _close(xform.pmap(lambda k: random.normal(k, (2,)))(keys),
           jax.pmap(lambda k: jr.normal(k, (2,)))(jkeys))
    out = xform.pmap(lambda k: random.split(k)[0])(keys)
    assert out.shape == (N,) and str(out.dtype) == "key<fry>"
    np.testing.assert_array_equal(random.key_data(out),
                                  jr.key_data(jax.pmap(lambda k: jr.split(k)[0])(jkeys)))
    with pytest.raises(TypeError, match="cannot be converted to a NumPy array"):
        np.asarray(out)


def test_pmap_and_shard_map_closing_over_outer_tracers_match_jax():
    # Regression: a body closing over a tracer of grad/jvp, vmap or jit embedded it as a
    # constant (TracerArrayConversionError); it is now a replicated operand.
    from jax.sharding import PartitionSpec as JP
    from xform.sharding import PartitionSpec as P
    xs = X[:4, :2]

    def run(lib, smap):
        L, np_ = lib.lax, lib.numpy

        def f(w):
            body = lambda x: np_.sin(x * w[0]) + L.psum(x * w[1], "i")  # noqa: E731
            return lib.pmap(body, "i")(xs * w[1]).sum() + smap(lambda b: b * w[0])(xs).sum()
        w = np_.array([0.7, -1.3])
        return (lib.grad(f)(w), lib.jvp(f, (w,), (np_.ones(2),)), lib.jit(f)(w),
                lib.vmap(f)(np_.stack([w, w * 2])), lib.jit(lib.hessian(f))(w))

    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("i",))
    jsmap = lambda g: jax.shard_map(g, mesh=jmesh, in_specs=JP("i"),  # noqa: E731
                                    out_specs=JP("i"), check_vma=False)
    xsmap = lambda g: xform.shard_map(g, mesh=xform.make_mesh(  # noqa: E731
                                          (4,), ("i",), axis_types=(xform.sharding.AxisType.Auto,)),
                                      in_specs=P("i"), out_specs=P("i"))
    got, want = run(xform, xsmap), run(jax, jsmap)
    for r, e in zip(xform.tree_util.tree_leaves(got), jax.tree.leaves(want)):
        _close(r, e, tol=1e-4)
