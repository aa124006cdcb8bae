"""``ShapeDtypeStruct(..., sharding=...)`` against JAX side by side: the struct itself
(repr, eq/hash, update, PartitionSpec over the context mesh, like), AOT lowering and
compiling partitioned as for arrays of that sharding (Shardy annotations, compiled
in/out shardings, a run on real sharded arrays), ``eval_shape``'s output shardings,
export's recorded shardings, and JAX's errors for shardings that do not fit. Also
shardings' memory kinds on CPU (device / pinned_host / unpinned_host)."""
import doctest
import re

import jax
import numpy as np
import pytest

import xform
import xform.numpy as xnp

F32 = np.float32
X = np.arange(32, dtype=F32).reshape(8, 4)


def _libs(axis_type="Explicit"):
    """Per library: (lib, mesh over 4x2 devices, NamedSharding, P)."""
    out = []
    for lib in (xform, jax):
        t = getattr(lib.sharding.AxisType, axis_type)
        mesh = lib.make_mesh((4, 2), ("x", "y"), axis_types=(t, t))
        out.append((lib, mesh, lib.sharding.NamedSharding, lib.sharding.PartitionSpec))
    return out


def _spec(s):
    """A sharding's comparable part: its spec and mesh axes (None, or the one device)."""
    if s is None:
        return None
    if hasattr(s, "spec"):
        return (tuple(s.spec), type(s.mesh).__name__, tuple(s.mesh.axis_names),
                tuple(t.name for t in s.mesh.axis_types))
    return ("device", next(iter(s.device_set)).id)


def _repr(r):  # (libraries name their Mesh/AbstractMesh/device classes alike)
    return re.sub(r"device_kind=\w+, num_cores=None, platform=\w+", "", r)


def test_struct_as_jax():
    got = []
    for lib, mesh, NS, P in _libs():
        s = NS(mesh, P("x", "y"))
        a = lib.ShapeDtypeStruct((8, 4), F32, sharding=s)
        plain = lib.ShapeDtypeStruct((8, 4), F32)
        other = lib.ShapeDtypeStruct((8, 4), F32, sharding=NS(mesh, P("x")))
        with lib.set_mesh(mesh):
            from_spec = lib.ShapeDtypeStruct((8, 4), F32, sharding=P("y"))
            spec_sharding = _spec(from_spec.sharding)
        put = lib.device_put(X, s)
        got.append((_repr(repr(a)), a == a.update(sharding=s), hash(a) == hash(a.update()),
                    a == plain, a == other, a.update(sharding=None) == plain,
                    spec_sharding, _spec(lib.ShapeDtypeStruct.like(put).sharding),
                    lib.ShapeDtypeStruct.like(lib.numpy.ones(3)).sharding,
                    a.ndim, a.size, len(a)))
    assert got[0] == got[1]


def test_lower_compile_and_run_as_jax():
    got, texts = [], []
    for lib, mesh, NS, P in _libs("Auto"):
        f = lib.jit(lambda a, b: (a * 2 + b.sum(), a.T))
        lowered = f.lower(lib.ShapeDtypeStruct((8, 4), F32, sharding=NS(mesh, P("x", "y"))),
                          lib.ShapeDtypeStruct((), F32))
        texts.append(lowered.as_text())
        c = lowered.compile()
        ins = jax.tree_util.tree_leaves(c.input_shardings)
        x = lib.device_put(X, NS(mesh, P("x", "y")))
        out = c(x, np.float32(1.5))
        got.append(([_spec(s) for s in ins], [_spec(s) for s in c.output_shardings],
                    [_spec(o.sharding) for o in out], [np.asarray(o) for o in out]))
    (xs_in, xs_out, x_put, x_val), (j_in, j_out, j_put, j_val) = got
    assert xs_in == j_in and xs_out == j_out and x_put == j_put
    for a, b in zip(x_val, j_val):
        np.testing.assert_allclose(a, b)
    for piece in ("mhlo.num_partitions = 8", 'sdy.mesh @mesh = <["x"=4, "y"=2]>',
                  '%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, '
                  '[{"x"}, {"y"}]>}'):
        assert piece in texts[0] and piece in texts[1], piece


def test_trace_in_explicit_mode_as_jax():
    """Over Explicit axes the sharding is part of the argument's type."""
    got = []
    for lib, mesh, NS, P in _libs():
        sds = lib.ShapeDtypeStruct((8, 4), F32, sharding=NS(mesh, P("x", "y")))
        traced = lib.jit(lambda a: (a * 2).T).trace(sds)
        got.append((str(traced.jaxpr.in_avals[0]), _spec(traced.out_info.sharding)))
    assert got[0] == got[1]


def test_eval_shape_shardings_as_jax():
    got = []
    for lib, mesh, NS, P in _libs():
        sds = lib.ShapeDtypeStruct((8, 4), F32, sharding=NS(mesh, P("x", "y")))
        plain = lib.ShapeDtypeStruct((8, 4), F32)
        pinned = lib.jit(lambda a: a * 2, out_shardings=NS(mesh, P("y")))
        with lib.set_mesh(mesh):
            by_spec = lib.eval_shape(lib.jit(lambda a: a + 1, out_shardings=P("x")), plain)
        outs = [lib.eval_shape(lambda a: (a * 2, a.T), sds), lib.eval_shape(pinned, sds),
                lib.eval_shape(pinned, plain), lib.eval_shape(lib.jit(lambda a: a.T), sds),
                lib.eval_shape(lambda a: a * 2, plain), lib.eval_shape(lambda a: a, 1.0),
                by_spec, pinned.eval_shape(sds)]
        got.append([(o.shape, o.weak_type, _spec(o.sharding))
                    for o in jax.tree_util.tree_leaves(outs)])
    auto = []
    for lib, mesh, NS, P in _libs("Auto"):  # (Auto axes: the compiler's, so unknown)
        sds = lib.ShapeDtypeStruct((8, 4), F32, sharding=NS(mesh, P("x")))
        auto.append(lib.eval_shape(lambda a: a * 2, sds).sharding)
    assert got[0] == got[1]
    assert auto == [None, None]


def test_export_records_shardings_as_jax():
    got = []
    for lib, mesh, NS, P in _libs("Auto"):
        sds = lib.ShapeDtypeStruct((8, 4), F32, sharding=NS(mesh, P("x")))
        e = lib.export.export(lib.jit(lambda a, b: a * 2 + b))(
            sds, lib.ShapeDtypeStruct((8, 4), F32))
        got.append((e.nr_devices, e.in_shardings_hlo, e.out_shardings_hlo,
                    [_spec(s) for s in e.in_shardings_jax(mesh)],
                    [_spec(s) for s in e.out_shardings_jax(mesh)]))
    assert got[0] == got[1]


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type and message are what we compare)
        return type(e).__name__, _repr(str(e))
    return None


@pytest.mark.parametrize("axis_type", ["Auto", "Explicit"])
def test_bad_shardings_raise_as_jax(axis_type):
    got = []
    for lib, mesh, NS, P in _libs(axis_type):
        f = lib.jit(lambda a: a * 2)
        errs = [
            _error(lambda: lib.ShapeDtypeStruct((8,), F32, sharding=NS(mesh, P("x", "y")))),
            _error(lambda: lib.ShapeDtypeStruct((), F32, sharding=P("x"))),
            _error(lambda: lib.ShapeDtypeStruct((8,), F32, sharding="x")),
            _error(lambda: lib.ShapeDtypeStruct((8,), F32, sharding=P("x")).sharding),
            _error(lambda: lib.ShapeDtypeStruct((8,), None)),
            _error(lambda: lib.ShapeDtypeStruct((8,), F32, manual_axis_type="x")),
            _error(lambda: f.lower(lib.ShapeDtypeStruct((3, 4), F32,
                                                        sharding=NS(mesh, P("x"))))),
        ]
        got.append(errs)
    assert all(e is not None for e in got[0])
    assert got[0] == got[1]


def test_mismatched_in_shardings_raise_as_jax():
    errs = []
    for lib, mesh, NS, P in _libs("Auto"):
        sds = lib.ShapeDtypeStruct((8, 4), F32, sharding=NS(mesh, P("x")))
        errs.append(_error(lambda: lib.jit(lambda a: a, in_shardings=NS(mesh, P("y"))).lower(sds)))
    assert errs[0][0] == errs[1][0] == "ValueError"
    assert errs[0][1].startswith(errs[1][1])  # (xform names the argument too)


def test_sharded_struct_jit_runs_xform():
    """A program compiled from structs runs on arrays given the same sharding (and its
    values are the jitted function's)."""
    mesh = xform.make_mesh((4, 2), ("x", "y"), axis_types=(xform.sharding.AxisType.Auto,) * 2)
    s = xform.sharding.NamedSharding(mesh, xform.sharding.PartitionSpec("x"))
    f = xform.jit(lambda a: xnp.sin(a) @ a.T)
    c = f.lower(xform.ShapeDtypeStruct(X.shape, F32, sharding=s)).compile()
    x = xform.device_put(X, s)
    np.testing.assert_allclose(c(x), f(x), rtol=1e-6)


def test_single_device_struct_pins_program_as_jax():
    got = []
    for lib in (xform, jax):
        d = lib.devices()
        sds = lib.ShapeDtypeStruct((8, 4), F32, sharding=lib.sharding.SingleDeviceSharding(d[1]))
        c = lib.jit(lambda a, b: a * 2 + b).lower(sds, lib.ShapeDtypeStruct((), F32)).compile()
        out = c(X, np.float32(1))
        err = _error(lambda: c(lib.device_put(X, d[0]), np.float32(1)))
        got.append(([_spec(s) for s in jax.tree_util.tree_leaves(c.input_shardings)],
                    _spec(c.output_shardings), _spec(out.sharding), out.committed,
                    np.asarray(out).tolist(), err[0], err[1].split("\n")[-2:],
                    _spec(lib.eval_shape(lambda a: a, sds).sharding)))
    assert got[0] == got[1]


def test_memory_kinds_as_jax():
    got = []
    for lib in (xform, jax):
        NS, P, SDS = (lib.sharding.NamedSharding, lib.sharding.PartitionSpec,
                      lib.sharding.SingleDeviceSharding)
        d = lib.devices()[0]
        mesh = lib.make_mesh((4, 2), ("x", "y"))
        s = NS(mesh, P("x"))
        pinned = s.with_memory_kind("pinned_host")
        one = SDS(d, memory_kind="pinned_host")
        x = lib.device_put(X, pinned)
        u = lib.device_put(X, one)
        back = lib.device_put(u, SDS(d))
        got.append((
            [m.kind for m in d.addressable_memories()], d.default_memory().kind,
            s.memory_kind, pinned.memory_kind, repr(pinned), repr(one),
            s == s.with_memory_kind("device"), s == pinned, hash(s) == hash(NS(mesh, P("x"))),
            one == SDS(d), one.with_memory_kind("unpinned_host").memory_kind,
            NS(mesh.abstract_mesh, P("x")).memory_kind, SDS(d).memory_kind,
            repr(x.sharding), [sh.data.sharding.memory_kind for sh in x.addressable_shards],
            lib.device_put(x, s).sharding.memory_kind, repr(u.sharding), u.committed,
            repr(back.sharding), lib.numpy.ones(3).sharding.memory_kind,
            np.asarray(u).tolist(), np.asarray(x).tolist(),
            _error(lambda: NS(mesh, P("x"), memory_kind="hbm")),
            _error(lambda: SDS(d, memory_kind="hbm"))))
    assert got[0] == got[1]


def test_docstring_example():
    from xform.core import shape_dtype_struct
    result = doctest.testmod(shape_dtype_struct)
    assert result.attempted > 0 and result.failed == 0
