"""shard_map over 1-D and 2-D meshes (8 host CPU devices), against jax.shard_map."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as JP

import xform
import xform.numpy as jnp
from xform import lax
from xform.sharding import Mesh, NamedSharding, PartitionSpec as P

X = np.arange(48.0, dtype=np.float32).reshape(8, 6) / 5.0 - 4.0
AUTO = (xform.sharding.AxisType.Auto,) * 2  # (as jax.sharding.Mesh; make_mesh: Explicit)
MESH2 = xform.make_mesh((4, 2), ("x", "y"), axis_types=AUTO)
JMESH2 = jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
MESH1 = xform.make_mesh((8,), ("i",), axis_types=AUTO[:1])
JMESH1 = jax.sharding.Mesh(np.array(jax.devices()), ("i",))


def _jspec(s):
    return JP(*s)


def _both(make, in_specs, out_specs, *args, mesh2=True, jit=False, check_vma=True):
    mesh, jmesh = (MESH2, JMESH2) if mesh2 else (MESH1, JMESH1)
    f = xform.shard_map(make(lax, jnp), mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                        check_vma=check_vma)
    jins = tuple(_jspec(s) for s in in_specs) if isinstance(in_specs, list) \
        else _jspec(in_specs)
    jf = jax.shard_map(make(jax.lax, jax.numpy), mesh=jmesh,
                       in_specs=jins, out_specs=_jspec(out_specs), check_vma=check_vma)
    if isinstance(in_specs, list):
        f = (lambda g: lambda *a: g(*a))(f)
    if jit:
        f, jf = xform.jit(f), jax.jit(jf)
    r, e = f(*args), jf(*args)
    assert r.shape == e.shape and r.dtype == e.dtype
    np.testing.assert_allclose(np.asarray(r), np.asarray(e), rtol=1e-5, atol=1e-5)


CASES = [
    ("psum_x", lambda L, np_: lambda b: L.psum(b, "x"), P("x", "y"), P(None, "y")),
    ("psum_xy", lambda L, np_: lambda b: L.psum(b, ("x", "y")), P("x", "y"), P()),
    ("axis_index", lambda L, np_: lambda b: b * L.axis_index("y") + L.axis_index("x"),
     P("x", "y"), P("x", "y")),
    ("all_gather_y", lambda L, np_: lambda b: L.all_gather(b, "y", axis=1, tiled=True),
     P("x", "y"), P("x")),
    ("ppermute_xy", lambda L, np_: lambda b: L.ppermute(b, "x", [(0, 1), (1, 2), (2, 3), (3, 0)]),
     P(("x", "y")), P(("x", "y"))),
    ("pmean_transposed", lambda L, np_: lambda b: L.pmean(b, "y").T, P("x", "y"), P("y", "x")),
    ("psum_scatter", lambda L, np_: lambda b: L.psum_scatter(b, "x", tiled=True),
     P(None, "y"), P("x", "y")),
    ("all_to_all", lambda L, np_: lambda b: L.all_to_all(b, "y", 0, 1, tiled=True),
     P("x", "y"), P("x", "y")),
]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name,make,ins,outs", CASES, ids=[c[0] for c in CASES])
def test_2d_mesh_vs_jax(name, make, ins, outs, jit):
    # (all_gather's result varies over 'y': P("x") is refused under check_vma, as in JAX)
    _both(make, ins, outs, X, jit=jit, check_vma=name != "all_gather_y")


def test_1d_mesh_several_args_and_grad():
    def make(L, np_):
        return lambda w, b: L.pmean(np_.sum(np_.tanh(b @ w) ** 2), "i")
    w = np.linspace(-1, 1, 12).astype(np.float32).reshape(6, 2)
    _both(make, [P(), P("i")], P(), w, X, mesh2=False)
    g = xform.grad(lambda w, x: xform.shard_map(make(lax, jnp), mesh=MESH1,
                                                in_specs=(P(), P("i")), out_specs=P())(w, x))
    jg = jax.grad(lambda w, x: jax.shard_map(make(jax.lax, jax.numpy), mesh=JMESH1,
                                             in_specs=(JP(), JP("i")), out_specs=JP(),
                                             check_vma=False)(w, x))
    np.testing.assert_allclose(g(w, X), jg(w, X), rtol=1e-5)
    np.testing.assert_allclose(xform.jit(g)(w, X), jg(w, X), rtol=1e-5)


def test_keyword_and_decorator_forms_and_mesh_api():
    @xform.shard_map(mesh=MESH1, in_specs=P("i"), out_specs=P("i"))
    def center(b):
        return b - lax.pmean(b.mean(), "i")
    np.testing.assert_allclose(center(X), X - X.mean(), rtol=1e-5, atol=1e-5)
    assert MESH2.shape == {"x": 4, "y": 2} and MESH2.size == 8
    m = Mesh(np.array(xform.devices()[:4]).reshape(2, 2), ("a", "b"))
    assert NamedSharding(m, P("a")).spec == P("a")
    assert P("x", None).partitions == ("x", None) and P("x", None) != ("x", None)


def test_errors():
    f = lambda b: b
    with pytest.raises(ValueError, match=r"dimension 0 of size 6 .* not divisible by the "
                                         r"total size 4 of mesh axes \('x',\)"):
        xform.shard_map(f, mesh=MESH2, in_specs=P("x"), out_specs=P("x"))(X.T)
    with pytest.raises(ValueError, match="names mesh axis 'z'"):
        xform.shard_map(f, mesh=MESH2, in_specs=P("z"), out_specs=P("x"))(X)
    with pytest.raises(ValueError, match="spec .* of length 3, but the value has rank 2"):
        xform.shard_map(f, mesh=MESH2, in_specs=P("x", None, None), out_specs=P())(X)
    with pytest.raises(NameError, match="unbound axis name: q"):
        xform.shard_map(lambda b: lax.psum(b, "q"), mesh=MESH2, in_specs=P("x"),
                        out_specs=P("x"))(X)
    with pytest.raises(ValueError, match=r"Number of devices 8 must be >= the product of mesh_shape \(4, 4\)"):
        xform.make_mesh((4, 4), ("a", "b"))
    with pytest.raises(ValueError, match=r"Resource axis: z of P\('z',\) is not found in mesh"):
        NamedSharding(MESH2, P("z"))


@pytest.mark.parametrize("name", ["xform.lax.collectives", "xform.lax.vma",
                                  "xform.transforms.pmap", "xform.transforms.shard_map",
                                  "xform.core.sharding", "xform.core.mesh",
                                  "xform.distributed",
                                  "xform.experimental.mesh_utils"])
def test_docstring_examples(name):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_device_put_with_shardings():
    s = xform.device_put(X, NamedSharding(MESH1, P("i")))
    np.testing.assert_array_equal(s, X)
    d = xform.devices()[3]
    one = xform.device_put(X, xform.sharding.SingleDeviceSharding(d))
    assert one.devices() == {d}
    np.testing.assert_allclose(
        xform.shard_map(lambda b: b * 2, mesh=MESH1, in_specs=P("i"), out_specs=P("i"))(s),
        X * 2)


def test_positional_form_and_context_mesh():
    f = xform.shard_map(lambda b: lax.psum(b, "i"), MESH1, P("i"), P())
    np.testing.assert_allclose(f(X), X.reshape(8, 1, 6).sum(0), rtol=1e-5)
    with MESH1:
        g = xform.shard_map(lambda b: b * lax.axis_index("i"), in_specs=P("i"),
                            out_specs=P("i"))
        np.testing.assert_allclose(g(X), X * np.arange(8)[:, None], rtol=1e-6)
    with pytest.raises(ValueError, match="requires a mesh"):
        xform.shard_map(lambda b: b, in_specs=P(), out_specs=P())


def _same_shards(r, e):
    assert r.sharding.spec == P(*e.sharding.spec)
    assert r.devices() == set(xform.devices())
    rs, es = r.addressable_shards, e.addressable_shards
    assert len(rs) == len(es) == 8
    for a, b in zip(rs, es):
        assert (a.index, a.replica_id) == (b.index, b.replica_id)
        assert next(iter(a.data.devices())) == a.device
        np.testing.assert_allclose(np.asarray(a.data), np.asarray(b.data), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_results_are_tiled_over_the_mesh_as_out_specs_say(jit):
    for ins, outs in [(P("x", "y"), P("x", "y")), (P("x", "y"), P(None, "y")),
                      (P(("x", "y")), P(("x", "y"))), (P("x", "y"), P("y", "x"))]:
        def make(L):
            if outs == P("y", "x"):
                return lambda b: L.pmean(b, "y").T
            return lambda b: L.psum(b, "x") * b
        f = xform.shard_map(make(lax), mesh=MESH2, in_specs=ins, out_specs=outs,
                            check_vma=False)
        jf = jax.shard_map(make(jax.lax), mesh=JMESH2, in_specs=_jspec(ins),
                           out_specs=_jspec(outs), check_vma=False)
        if jit:
            f, jf = xform.jit(f), jax.jit(jf)
        r, e = f(X), jf(X)
        if ins == outs:  # fed back, the tiles are used as they are (no host round trip)
            again = f(r)
            assert r._npy is None
            np.testing.assert_allclose(np.asarray(again), np.asarray(jf(e)), rtol=1e-5)
        _same_shards(r, e)


def test_shard_map_under_jit_with_jit_level_code_and_grad():
    make = lambda L, np_: lambda b: L.psum(np_.sin(b), "x") * b
    f = xform.shard_map(make(lax, jnp), mesh=MESH2, in_specs=P("x", "y"),
                        out_specs=P("x", "y"))
    jf = jax.shard_map(make(jax.lax, jax.numpy), mesh=JMESH2, in_specs=JP("x", "y"),
                       out_specs=JP("x", "y"))
    # whole values inside the program: the tiles are all-gathered there
    r = xform.jit(lambda x: f(x * 2.0).sum() + x[0, 0])(X)
    e = jax.jit(lambda x: jf(x * 2.0).sum() + x[0, 0])(X)
    assert np.asarray(r).shape == () and r.devices() == set(xform.devices())
    np.testing.assert_allclose(np.asarray(r), np.asarray(e), rtol=1e-5)
    g = xform.jit(xform.grad(lambda x: f(x).sum()))(X)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda x: jf(x).sum())(X)),
                               rtol=1e-4, atol=1e-5)
    assert g.devices() == set(xform.devices())


def test_create_device_mesh_vs_jax():
    from jax.experimental import mesh_utils as jmu
    from xform.experimental import mesh_utils
    for shape in [(2, 4), (8,)]:
        got, want = mesh_utils.create_device_mesh(shape), jmu.create_device_mesh(shape)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert [d.id for d in got.flat] == [d.id for d in want.flat]
    mesh = Mesh(mesh_utils.create_device_mesh((2, 4)), ("data", "model"))
    assert mesh.shape == {"data": 2, "model": 4}
    for bad in [(3,), ("a",)]:
        with pytest.raises(ValueError) as e:
            jmu.create_device_mesh(bad)
        with pytest.raises(ValueError, match=str(e.value).split()[0]):
            mesh_utils.create_device_mesh(bad)


def _smap_cases(L, np_, P, AT):
    """jax.smap (shard_map over one axis of the mesh in context) on a few forms."""
    out = {}
    with L.set_mesh(L.make_mesh((2, 4), ("x", "y"), axis_types=(AT.Auto,) * 2)):
        x = np_.arange(8.0).reshape(2, 4)
        out["auto"] = L.smap(lambda a: a * 2 + L.lax.axis_index("y"), in_axes=1,
                             out_axes=1, axis_name="y")(x)
        out["none"] = L.smap(lambda a, b: a + b, in_axes=(0, None), out_axes=0,
                             axis_name="x")(x, np_.float32(1.0))
        out["psum"] = L.smap(lambda a: L.lax.psum(a.sum(), "x"), in_axes=0, out_axes=None,
                             axis_name="x")(x)
    mesh = L.make_mesh((8,), ("i",), axis_types=(AT.Explicit,))
    with L.set_mesh(mesh):  # in_axes omitted: inferred from the argument's type
        v = L.device_put(np_.arange(8.0), L.NamedSharding(mesh, P("i")))
        out["infer"] = L.smap(lambda a: L.lax.psum(a.sum(), "i"), out_axes=None,
                              axis_name="i")(v)
    for bad in (dict(in_axes=[0], axis_name="x"), dict(in_axes=0, axis_name=("x",))):
        with pytest.raises(TypeError) as e:
            L.smap(lambda a: a, out_axes=0, **bad)
        out[str(bad)] = str(e.value)
    return out


def test_smap_matches_jax():
    ours = _smap_cases(xform, jnp, P, xform.sharding.AxisType)
    theirs = _smap_cases(jax, jax.numpy, JP, jax.sharding.AxisType)
    assert ours.keys() == theirs.keys()
    for k, want in theirs.items():
        if isinstance(want, str):
            assert ours[k] == want
        else:
            np.testing.assert_array_equal(ours[k], want, err_msg=k)
