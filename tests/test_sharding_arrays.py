"""Arrays that span devices, against JAX side by side: values AND layout (each
shard's device, index, replica id and shape, and the ``.sharding`` spec) for
device_put, callback-built arrays and eager ops; the Sharding API; the errors."""
import io
import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xform
import xform.numpy as xnp
from xform.sharding import Mesh, NamedSharding, PartitionSpec as P

X = np.arange(32, dtype=np.float32).reshape(8, 4)


def meshes(lib):
    devs = np.array(lib.devices())
    return lib.sharding.Mesh(devs.reshape(4, 2), ("x", "y"))


XMESH, JMESH = meshes(xform), meshes(jax)


def _idx(index):
    return tuple((s.start, s.stop) if isinstance(s, slice) else s for s in index)


def layout(a):
    """Everything about where an Array's pieces live, comparable across libraries."""
    shards = sorted((s.device.id, _idx(s.index), s.replica_id, s.data.shape)
                    for s in a.addressable_shards)
    return tuple(a.sharding.spec), a.sharding.is_fully_replicated, shards


def both(fn):
    """``fn(lib, numpy, mesh, NamedSharding, P)`` run on xform and on JAX."""
    x = fn(xform, xnp, XMESH, NamedSharding, P)
    j = fn(jax, jnp, JMESH, jax.sharding.NamedSharding, jax.sharding.PartitionSpec)
    return x, j


def check(x, j):
    np.testing.assert_allclose(np.asarray(x), np.asarray(j), rtol=1e-6)
    assert layout(x) == layout(j)


@pytest.mark.parametrize("spec", [("x", None), ("x", "y"), (None, "y"), (("x", "y"),),
                                  (("y", "x"), None), ("y",), ()])
def test_device_put_layout(spec):
    x, j = both(lambda L, np_, m, NS, P_: L.device_put(X, NS(m, P_(*spec))))
    check(x, j)
    assert x.sharding == NamedSharding(XMESH, P(*spec))
    assert x.devices() == set(xform.devices())
    # each device holds only its block (1/N of the data, not a full copy)
    assert all(s.data.shape == x.sharding.shard_shape(X.shape) for s in x.addressable_shards)


def test_device_put_pytree_of_shardings_and_bare_spec():
    tree = {"a": X, "b": X[:, :2]}
    x, j = both(lambda L, np_, m, NS, P_: L.device_put(
        tree, {"a": NS(m, P_("x")), "b": NS(m, P_(None, "y"))}))
    for k in tree:
        check(x[k], j[k])
    with xform.set_mesh(XMESH):
        y = xform.device_put(X, P("y"))
    with jax.set_mesh(JMESH):
        z = jax.device_put(X, jax.P("y"))
    check(y, z)


def test_sharding_api_matches_jax():
    for spec in [P("x", None), P(("x", "y")), P(None, "y"), P()]:
        xs, js = NamedSharding(XMESH, spec), jax.sharding.NamedSharding(
            JMESH, jax.sharding.PartitionSpec(*spec))
        assert xs.shard_shape(X.shape) == js.shard_shape(X.shape)
        xm = {d.id: _idx(i) for d, i in xs.devices_indices_map(X.shape).items()}
        jm = {d.id: _idx(i) for d, i in js.devices_indices_map(X.shape).items()}
        assert xm == jm
        assert len(xs.addressable_devices_indices_map(X.shape)) == 8
        assert xs.is_fully_replicated == js.is_fully_replicated
        assert repr(xs) == repr(js)
    assert NamedSharding(XMESH, P("x")) == NamedSharding(XMESH, P("x"))
    assert hash(NamedSharding(XMESH, P("x"))) == hash(NamedSharding(XMESH, P("x")))
    assert NamedSharding(XMESH, P("x", None)) != NamedSharding(XMESH, P("x"))
    assert repr(P("x", None)) == repr(jax.P("x", None)) and P(("x",)) == P("x")
    assert repr(P("x", P.UNCONSTRAINED)) == repr(jax.P("x", jax.P.UNCONSTRAINED))
    assert repr(XMESH) == repr(JMESH) and str(XMESH) == str(JMESH)
    assert repr(xform.make_mesh((2, 4), ("a", "b"))) == repr(jax.make_mesh((2, 4), ("a", "b")))
    am = xform.sharding.AbstractMesh((2, 4), ("a", "b"))
    assert repr(am) == repr(jax.sharding.AbstractMesh((2, 4), ("a", "b")))
    assert xform.sharding.get_abstract_mesh().empty
    with xform.sharding.use_mesh(XMESH):
        assert xform.sharding.get_abstract_mesh() == XMESH.abstract_mesh
    d = xform.devices()[0]
    assert repr(xform.sharding.SingleDeviceSharding(d)).startswith("SingleDeviceSharding(")


def test_array_properties_and_printing():
    x, j = both(lambda L, np_, m, NS, P_: L.device_put(X, NS(m, P_("x", "y"))))
    assert repr(x) == repr(j) and str(x) == str(j)
    assert x.is_fully_addressable and not x.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(x.addressable_data(3)),
                                  np.asarray(j.addressable_data(3)))
    assert len(x.addressable_shards) == 8
    one = xnp.ones(3)
    assert one.sharding == xform.sharding.SingleDeviceSharding(xform.devices()[0])
    assert one.is_fully_replicated and one.addressable_data(0) is one


def test_shards_rows_and_sharding_helpers_as_jax():
    def run(L, np_, m, NS, P_):
        x, r = L.device_put(X, NS(m, P_("x"))), L.device_put(X, NS(m, P_()))
        one = NS(L.sharding.Mesh(np.array(L.devices()[:1]).reshape(1, 1), ("x", "y")), P_("x"))
        sd = L.sharding.SingleDeviceSharding(L.devices()[0])
        return (x, list(r), [(s.device.id, _idx(s.index), s.replica_id)
                             for s in x.global_shards],
                x.on_device_size_in_bytes(), r.on_device_size_in_bytes(),
                sd.is_equivalent_to(one, 2), one.is_equivalent_to(sd, 2),
                repr(NS(m, P_("x")).update(spec=("y",))),
                repr(NS(m, P_("x")).update(memory_kind="pinned_host")))
    x, j = both(run)
    check(x[0], j[0])
    for a, b in zip(x[1], j[1]):  # rows of a replicated array stay replicated
        check(a, b)
        assert a.committed and b.committed
    assert x[2:] == j[2:]


def test_eager_ops_on_sharded_arrays():
    def ops(L, np_, m, NS, P_):
        x = L.device_put(X, NS(m, P_("x", None)))
        return [x + 1, np_.sin(x) * x, x.sum(), x[2:6], x.T, x @ x.T]
    xs, js = both(ops)
    for x, j in zip(xs, js):
        check(x, j)


def test_make_array_from_callback_and_single_device_arrays():
    def build(L, np_, m, NS, P_):
        s = NS(m, P_("x", "y"))
        a = L.make_array_from_callback(X.shape, s, lambda i: X[i])
        parts = [L.device_put(X[i], d) for d, i in s.addressable_devices_indices_map(
            X.shape).items()]
        b = L.make_array_from_single_device_arrays(X.shape, s, parts)
        c = L.make_array_from_process_local_data(NS(m, P_("y")), X)
        return a, b, c
    for x, j in zip(*both(build)):
        check(x, j)


def test_visualize_array_sharding_prints_jax_table():
    pytest.importorskip("rich")

    def show(L, np_, m, NS, P_):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for spec, shape in [(("x", "y"), (8, 4)), ((("x", "y"),), (16,)), ((), (8,))]:
                L.debug.visualize_array_sharding(
                    L.device_put(np.zeros(shape, np.float32), NS(m, P_(*spec))))
        return out.getvalue()
    x, j = both(show)
    assert x == j and "CPU 0,1,2,3,4,5,6,7" in x
    seen = []
    xform.debug.inspect_array_sharding({"a": xform.device_put(X, NamedSharding(
        XMESH, P("x")))}, callback=seen.append)
    assert seen == [NamedSharding(XMESH, P("x"))]


def _raises(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e).split("\n----")[0]
    return None


def test_errors_match_jax():
    cases = [
        lambda L, np_, m, NS, P_: NS(m, P_("z")),
        lambda L, np_, m, NS, P_: NS(m, P_("x", "x")),
        lambda L, np_, m, NS, P_: NS(m, P_(("x", "y"), "x")),
        lambda L, np_, m, NS, P_: L.device_put(np.zeros(8), NS(m, P_("x", "y"))),
        lambda L, np_, m, NS, P_: L.device_put(np.zeros(6), NS(m, P_("x"))),
        lambda L, np_, m, NS, P_: L.device_put(np.zeros(8), P_("x")),
        lambda L, np_, m, NS, P_: L.make_array_from_callback(
            (6,), NS(m, P_("x")), lambda i: np.zeros(2)),
        lambda L, np_, m, NS, P_: L.make_mesh((16,), ("x",)),
        lambda L, np_, m, NS, P_: L.sharding.Mesh(np.array(L.devices()).reshape(4, 2), ("x",)),
    ]
    for case in cases:
        x = _raises(lambda: case(xform, xnp, XMESH, NamedSharding, P))
        j = _raises(lambda: case(jax, jnp, JMESH, jax.sharding.NamedSharding,
                                 jax.sharding.PartitionSpec))
        assert x is not None and j is not None
        assert x[0] == j[0] and x[1].replace("xform", "jax") == j[1], (x, j)


def test_gather_to_one_device_and_sharded_keys():
    def run(L, np_, m, NS, P_):
        x = L.device_put(X, NS(m, P_("x", None)))
        one = L.device_put(x, L.devices()[3])
        keys = L.device_put(L.random.split(L.random.key(0), 8), NS(m, P_("x")))
        u = L.jit(L.vmap(lambda k: L.random.uniform(k, (3,))))(keys)
        return one, u, L.random.key_data(keys)
    (x1, xu, xk), (j1, ju, jk) = both(run)
    assert x1.devices() == {xform.devices()[3]}
    np.testing.assert_array_equal(np.asarray(x1), np.asarray(j1))
    check(xu, ju)
    np.testing.assert_array_equal(np.asarray(xk), np.asarray(jk))


def test_like_functions_place_results_on_a_one_device_arrays_device():
    # As JAX's for a committed Array: jnp's *_like and lax.full_like give a result on
    # its device, unless the result is weakly typed or filled from an array.
    def run(L, np_, *_):
        d = L.devices()[3]
        x, w = L.device_put(np.ones(3, np.float32), d), L.device_put(np_.asarray(2.0), d)
        outs = [np_.zeros_like(x), np_.ones_like(x, dtype=np_.int32), np_.empty_like(x),
                np_.full_like(x, 2, shape=(2, 2)), np_.full_like(x, np.arange(3.0)),
                np_.zeros_like(w), L.lax.full_like(x, 1), L.lax.full_like(w, 1, shape=(2,)),
                np_.zeros_like(np_.ones(3)), np_.ones_like(x + 1)]
        return [sorted(dv.id for dv in o.devices()) for o in outs]
    x, j = both(run)
    assert x == j


def test_full_on_a_device_is_not_weak_eagerly():
    # JAX's eager full/full_like with device= build the array per shard (not weak, so
    # bf16 + it promotes to float32); under jit the result stays weak
    def run(L, np_, m, NS, P_):
        d, w = L.devices()[1], np_.asarray(2.0)
        outs = [np_.full((2,), 3.0, device=d), np_.full((8,), 3.0, device=NS(m, P_("x"))),
                np_.full_like(w, 3.0, device=d), np_.full((2,), 3.0),
                L.jit(lambda: np_.full((2,), 3.0, device=d))()]
        return [(o.weak_type, str(o.dtype)) for o in outs]
    x, j = both(run)
    assert x == j


def test_astype_and_to_device_onto_a_sharding():
    def run(L, np_, m, NS, P_):
        s = NS(m, P_("x"))
        return [np_.astype(X, np.int32, device=s), np_.asarray(X).to_device(s),
                np_.asarray(X).to_device(L.devices()[2])]
    for x, j in zip(*both(run)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(j))
        assert sorted(d.id for d in x.devices()) == sorted(d.id for d in j.devices())
        assert type(x.sharding).__name__ == type(j.sharding).__name__ and x.committed
