"""Memory kinds through computations, against JAX side by side: arrays in
``pinned_host`` memory keep it through eager ops, jit, vmap and jvp (the kind is part
of the type, ``f32<host>[8]``), mixing memories raises JAX's error, jit's
out_shardings with a memory kind leave the results' buffers there (one device and
over a mesh, with donation), in_shardings check the arguments' kinds, ``device_put``
to another memory inside jit, ``jax.memory.Space``, and the lowered module's
annotations. Kinds are read from the result buffers (``addressable_shards``)."""
import jax
import numpy as np
import pytest

import xform

X = np.arange(8, dtype=np.float32)
M = np.arange(16, dtype=np.float32).reshape(8, 2)


def _show(lib, fn):
    """What ``fn()`` gives: per result leaf its sharding's kind, its buffers' kinds
    and values; or the error's type and first line."""
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001  (the type and message are what we compare)
        return type(e).__name__, str(e).split("\n")[0].replace("xform", "jax")
    if isinstance(out, str):
        return out
    return [(x.sharding.memory_kind,
             sorted({s.data.sharding.memory_kind for s in x.addressable_shards}),
             np.asarray(x).tolist()) for x in lib.tree_util.tree_leaves(out)]


def _cases(lib):
    S = lib.sharding
    d = lib.devices()[0]
    one = lambda kind=None: S.SingleDeviceSharding(d, memory_kind=kind)  # noqa: E731
    n = len(lib.devices())   # (8 CPU devices here; a GPU machine may have one)
    mesh = lib.make_mesh((4, 2) if n >= 8 else (n, 1), ("x", "y"))
    named = lambda kind=None: S.NamedSharding(mesh, S.PartitionSpec("x"), memory_kind=kind)  # noqa: E731
    kinds = [m.kind for m in d.addressable_memories()]   # (a GPU has no unpinned_host)
    unpinned = "unpinned_host" if "unpinned_host" in kinds else "pinned_host"
    h = lib.device_put(X, one("pinned_host"))
    u = lib.device_put(X, one(unpinned))
    dev = lib.device_put(X, one())
    hm = lib.device_put(M, named("pinned_host"))
    jit, double = lib.jit, (lambda a: a * 2)
    annotations = lambda lowered: [  # noqa: E731
        ln.strip().split(" = ")[0] for ln in lowered.as_text().splitlines()
        if "annotate_device_placement" in ln] + [
        ln.count('memory_kind = "pinned_host"') for ln in lowered.as_text().splitlines()
        if "@main" in ln]
    return {
        "eager": lambda: (h + 1, lib.numpy.sin(h), h.sum(), h[2:4], u * 2, hm + 1, hm.T),
        "mixed": lambda: h + dev,
        "types": lambda: f"{lib.typeof(h)} {lib.typeof(u)} {lib.make_jaxpr(double)(h)}",
        "jit": lambda: (jit(double)(h), jit(lambda a, b: (a * 2, b + 1))(h, dev),
                        jit(double)(hm), jit(lambda a: a)(h), jit(double)(u)),
        "jit mixed": lambda: jit(lambda a: lib.device_put(a, one("pinned_host")) + a)(X),
        "out_shardings": lambda: (
            jit(double, out_shardings=one("pinned_host"))(X),
            jit(double, out_shardings=one(unpinned))(X),
            jit(double, out_shardings=one())(h),
            jit(double, out_shardings=named("pinned_host"))(M),
            jit(lambda a: (a, a + 1), out_shardings=(one("pinned_host"), one()))(X),
            jit(double, out_shardings=one("pinned_host"), donate_argnums=0)(
                lib.device_put(X, one()))),
        "in_shardings": lambda: (jit(double, in_shardings=one("pinned_host"))(h),
                                 jit(double, in_shardings=named("pinned_host"))(M)),
        "in_shardings kind": lambda: jit(double, in_shardings=one())(h),
        "pmap kind": lambda: lib.pmap(double)(lib.device_put(M.T, one("pinned_host"))),
        "put inside": lambda: (
            jit(lambda a: lib.device_put(a * 2, one("pinned_host")) + 1)(X),
            jit(lambda a: lib.device_put(a, one()) * 2)(h),
            jit(lambda a: lib.device_put(a, named("pinned_host")))(M),
            lib.vmap(lambda a: lib.device_put(a, one("pinned_host")))(M)),
        "transforms": lambda: (lib.vmap(double)(h), lib.jvp(double, (h,), (h,)),
                               lib.lax.cond(True, double, lambda a: a, h)),
        "grad": lambda: lib.grad(lambda x: lib.device_put(x, one("pinned_host")).sum())(X),
        "memory.Space": lambda: (lib.device_put(X, lib.memory.Space.Host),
                                 lib.device_put(h, lib.memory.Space.Device)),
        "lowered": lambda: str((
            annotations(jit(double).lower(h)),
            annotations(jit(double, out_shardings=one("pinned_host")).lower(X)),
            jit(double, out_shardings=one(unpinned)).lower(X).compile()
            .output_shardings)),
    }


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")  # (JAX's, as ours)
def test_memory_kinds_through_computations_as_jax():
    mine, theirs = _cases(xform), _cases(jax)
    for name in mine:
        assert _show(xform, mine[name]) == _show(jax, theirs[name]), name


def test_like_functions_keep_a_host_arrays_memory_kind():
    # JAX's *_like give the result x's sharding, memory kind included (its eager
    # broadcast on CPU then fails to build a pinned_host buffer, "Memory kind mismatch";
    # its jit with that sharding as out_shardings is the reference)
    likes = lambda lib, a: (lib.numpy.zeros_like(a), lib.numpy.ones_like(a),  # noqa: E731
                            lib.numpy.full_like(a, 2.0), lib.lax.full_like(a, 3.0, shape=(2,)))
    mine = []
    for lib in (xform, jax):
        kind = lib.sharding.SingleDeviceSharding(lib.devices()[0], memory_kind="pinned_host")
        h = lib.device_put(X, kind)
        mine.append(_show(lib, lambda: likes(xform, h)) if lib is xform else
                    _show(lib, lambda: lib.jit(lambda: likes(jax, X), out_shardings=kind)()))
    assert mine[0] == mine[1]
