"""Memory kinds through export, against the installed jax.export: a jit's out_shardings
with ``memory_kind`` lower to ``annotate_device_placement`` and ``mhlo.memory_kind``,
are recorded in the Exported's named shardings, survive serialization both ways, and
a deserialized export's results land in that memory as JAX's do."""
import re

import jax
import numpy as np
import pytest

import xform
from xform import export

F32 = np.float32


def _exported(lib, kind, mesh=None):
    if mesh is None:
        d = lib.devices()[0]
        sh = (lib.sharding.SingleDeviceSharding(d, memory_kind=kind), None)
        shape = (4, 3)
    else:
        spec = lib.sharding.PartitionSpec("x")
        sh = (lib.sharding.NamedSharding(mesh, spec, memory_kind=kind), None)
        shape = (8, 3)
    f = lib.jit(lambda x: (x * 2, x.sum()), out_shardings=sh)
    return lib.export.export(f)(lib.ShapeDtypeStruct(shape, F32))


def _fields(e):
    main = re.search(r"func.func public @main.*", e.mlir_module()).group(0)
    return ([(str(s[0]) if isinstance(s, tuple) else str(s.mesh), tuple(s[1] if isinstance(
        s, tuple) else s.spec), s[2] if isinstance(s, tuple) else s.memory_kind)
             if s is not None else None for s in e._out_named_shardings],
            [str(a) for a in e.out_avals], e.in_shardings_hlo,
            re.findall(r'mhlo.memory_kind = "\w+"', main),
            e.mlir_module().count("@annotate_device_placement("))


def _kinds(results):
    return [r.sharding.memory_kind for r in results]


@pytest.mark.parametrize("kind", ["pinned_host", "unpinned_host"])
def test_memory_kind_export_fields_and_calls_match_jax(kind):
    ours, theirs = _exported(xform, kind), _exported(jax, kind)
    assert _fields(ours) == _fields(theirs)
    x = np.arange(12, dtype=F32).reshape(4, 3)
    assert _kinds(ours.call(x)) == _kinds(theirs.call(x))
    for mine, jaxs in ((export.deserialize(ours.serialize()), jax.export.deserialize(
            ours.serialize())), (export.deserialize(bytearray(theirs.serialize())),
                                 jax.export.deserialize(theirs.serialize()))):
        assert _fields(mine)[:2] == _fields(jaxs)[:2]
        got, want = mine.call(x), jaxs.call(x)
        assert _kinds(got) == _kinds(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w))


def test_sharded_memory_kind_matches_jax():
    xm = xform.make_mesh((8,), ("x",), axis_types=(xform.sharding.AxisType.Auto,))
    jm = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    ours, theirs = _exported(xform, "pinned_host", xm), _exported(jax, "pinned_host", jm)
    assert _fields(ours)[1:] == _fields(theirs)[1:]
    assert [s and s[2] for s in ours._out_named_shardings] == [
        s and s.memory_kind for s in theirs._out_named_shardings]
    again = export.deserialize(ours.serialize())
    assert again._out_named_shardings == ours._out_named_shardings
    x = np.arange(24, dtype=F32).reshape(8, 3)
    xx = xform.device_put(x, xform.sharding.NamedSharding(xm, xform.sharding.PartitionSpec("x")))
    jx = jax.device_put(x, jax.sharding.NamedSharding(jm, jax.P("x")))
    want = _kinds(theirs.call(jx))
    assert want[0] == "pinned_host"
    assert _kinds(jax.export.deserialize(ours.serialize()).call(jx)) == want
    assert _kinds(export.deserialize(bytearray(theirs.serialize())).call(xx)) == want
