"""Exports of sharded programs against the installed jax.export: nr_devices, the
shardings fields, the module's Shardy annotations, bytes each library reads and calls
on its own mesh, and JAX's error for a call with the wrong number of devices."""
import jax
import numpy as np
import pytest

import xform
from xform import export
from xform.sharding import NamedSharding, PartitionSpec as P

F32 = np.float32
SPECS = ((P("x", "y"), P(None, "y")), (P("x"), None))


def _fn(np_):
    return lambda a, b: (a * 2 + b, np_.sum(a, axis=0))


def _jitted(lib, mesh):
    named = lambda s: None if s is None else lib.NamedSharding(  # noqa: E731
        mesh, s if lib is xform else _jax_spec(s))
    ins, outs = SPECS
    return lib.jit(_fn(lib.numpy), in_shardings=tuple(map(named, ins)),
                   out_shardings=tuple(map(named, outs)))


def _jax_spec(s):
    return None if s is None else jax.P(*s)


@pytest.fixture(scope="module")
def meshes():
    # Auto axes, so that JAX's call reaches its device-count check
    return (xform.make_mesh((4, 2), ("x", "y"), axis_types=(xform.sharding.AxisType.Auto,) * 2),
            jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2))


@pytest.fixture(scope="module")
def exports(meshes):
    xm, jm = meshes
    return (export.export(_jitted(xform, xm))(*[xform.ShapeDtypeStruct((8, 4), F32)] * 2),
            jax.export.export(_jitted(jax, jm))(*[jax.ShapeDtypeStruct((8, 4), F32)] * 2))


def _args():
    return np.arange(32, dtype=F32).reshape(8, 4), np.linspace(0, 1, 32, dtype=F32).reshape(8, 4)


def test_fields_and_module_as_jax(exports, meshes):
    xe, je = exports
    xm, jm = meshes
    assert xe.nr_devices == je.nr_devices == 8
    assert xe.in_shardings_hlo == je.in_shardings_hlo  # JAX 0.10 keeps them None
    for mine, theirs in ((xe.in_shardings_jax(xm), je.in_shardings_jax(jm)),
                         (xe.out_shardings_jax(xm), je.out_shardings_jax(jm))):
        assert [s and tuple(s.spec) for s in mine] == [s and tuple(s.spec) for s in theirs]
        assert all(s is None or s.mesh is xm for s in mine)
    text, jtext = xe.mlir_module(), je.mlir_module()
    for piece in ("mhlo.num_partitions = 8", 'sdy.mesh @mesh = <["x"=4, "y"=2]>',
                  '%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}',
                  'jax.result_info = "result[0]", sdy.sharding = #sdy.sharding<@mesh, '
                  '[{"x"}, {}]>}'):
        assert piece in text and piece in jtext
    with pytest.raises(ValueError, match="does not match the mesh used for export"):
        xe.in_shardings_jax(xform.make_mesh((2, 4), ("x", "y")))


def test_xform_bytes_called_by_jax(exports, meshes):
    xe, _ = exports
    _, jm = meshes
    je = jax.export.deserialize(xe.serialize())
    assert je.nr_devices == 8
    assert [s and s.spec for s in je.in_shardings_jax(jm)] == [
        _jax_spec(s) for s in SPECS[0]]
    args = [jax.device_put(x, s) for x, s in zip(_args(), je.in_shardings_jax(jm))]
    got, want = je.call(*args), _jitted(jax, jm)(*args)
    assert got[0].sharding.spec == want[0].sharding.spec
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_jax_bytes_called_by_xform(exports, meshes):
    _, je = exports
    xm, jm = meshes
    xe = export.deserialize(je.serialize())
    assert xe.nr_devices == 8
    assert [s and s.spec for s in xe.out_shardings_jax(xm)] == [
        s and P(*s.spec) for s in je.out_shardings_jax(jm)]
    want = _jitted(jax, jm)(*_args())
    args = [xform.device_put(x, s) for x, s in zip(_args(), xe.in_shardings_jax(xm))]
    got = xe.call(*args)
    assert got[0].sharding.spec == P(*want[0].sharding.spec)
    inner = xform.jit(lambda a, b: xe.call(a, b)[0] * 3)(*args)
    for g, w in zip(got + (inner,), want + (want[0] * 3,)):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    # a second round trip keeps the shardings
    again = export.deserialize(xe.serialize())
    assert again._in_named_shardings == xe._in_named_shardings


def test_wrong_number_of_devices_is_jax_error(exports):
    xe, je = exports
    with pytest.raises(ValueError) as theirs:
        je.call(*_args())
    with pytest.raises(ValueError) as mine:
        xe.call(*_args())
    assert str(mine.value) == str(theirs.value)
    assert "exported for 8 devices and is called in a context with 1 devices" in str(
        mine.value)
    other = xform.make_mesh((8,), ("z",), axis_types=(xform.sharding.AxisType.Auto,))
    z = xform.device_put(_args()[0], NamedSharding(other, P("z")))
    with pytest.raises(ValueError, match="exported for the mesh .* called on the mesh"):
        xe.call(z, z)
