"""Collectives' dtype rules (bool, ints, low floats, complex, weak types) under pmap,
vmap(axis_name=) and shard_map, against JAX: dtype, weak type and values."""
import jax
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import PartitionSpec as JP

import xform
from xform.sharding import PartitionSpec as P

N = 4
_rng = np.random.RandomState(0)
DATA = {  # one row per member
    "bool": _rng.rand(N, 3) > 0.5,
    "int8": (_rng.randn(N, 3) * 40).astype(np.int8),
    "int32": (_rng.randn(N, 3) * 9).astype(np.int32),
    "bfloat16": _rng.randn(N, 3).astype(ml_dtypes.bfloat16),
    "float32": _rng.randn(N, 3).astype(np.float32),
    "complex64": (_rng.randn(N, 3) + 1j * _rng.randn(N, 3)).astype(np.complex64),
}
RING = [(i, (i + 1) % N) for i in range(N)]


def _per_member(L, jnp, x, *, replicated):
    """Every collective on every dtype of ``x`` (a dict), as a dict of results.
    ``replicated``: pmap/shard_map (adds what JAX's vmap cannot do)."""
    out = {}
    weak = L.axis_index("i") * 1.5 + jnp.zeros(3, np.int32)   # a weak float32 operand
    x = dict(x, weak=weak)
    for k, v in x.items():
        for name, f in [("psum", L.psum), ("pmean", L.pmean), ("pmax", L.pmax),
                        ("pmin", L.pmin)]:
            if k == "complex64" and name in ("pmax", "pmin") and replicated:
                continue   # JAX fails in XLA (below: xform's pmap vs JAX's vmap)
            out[f"{name}_{k}"] = f(v, "i")
        out[f"all_gather_{k}"] = L.all_gather(v, "i")
        out[f"ppermute_{k}"] = L.ppermute(v, "i", RING)
        out[f"all_to_all_{k}"] = L.all_to_all(jnp.stack([v] * N), "i", 0, 0)
        if k != "bool":
            out[f"psum_scatter_{k}"] = L.psum_scatter(jnp.stack([v] * N), "i")
        if replicated:
            out[f"ppermute_partial_{k}"] = L.ppermute(v, "i", [(0, 2), (3, 1)])
            out[f"psum_groups_{k}"] = L.psum(v, "i", axis_index_groups=[[0, 2], [1, 3]])
            if k != "complex64":
                out[f"pmax_groups_{k}"] = L.pmax(v, "i", axis_index_groups=[[0, 1], [2, 3]])
    out["axis_index"] = L.axis_index("i")
    for c in (2, 2.5, True):   # constants: multiplied by the axis size, weak type kept
        out[f"psum_const_{c!r}"] = jnp.asarray(L.psum(c, "i"))
    out["pmean_const"] = jnp.asarray(L.pmean(3, "i"))
    out["pmax_const"] = L.pmax(3, "i")
    return out


def _run(lib, kind, x):
    # vmap under jit on both sides (eagerly it runs op by op: slow; the batching rules
    # are the same), JAX's shard_map under jit, xform's pmap and shard_map eagerly
    L, jnp = lib.lax, lib.numpy
    f = lambda v: _per_member(L, jnp, v, replicated=kind != "vmap")  # noqa: E731
    if kind == "pmap":
        return lib.pmap(f, "i")(x)
    if kind == "vmap":
        return lib.jit(lib.vmap(f, axis_name="i"))(x)
    block = lambda b: jax.tree.map(lambda o: jnp.asarray(o)[None],  # noqa: E731
                                   f(jax.tree.map(lambda a: a[0], b)))
    if lib is jax:
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:N]), ("i",))
        return jax.jit(jax.shard_map(block, mesh=mesh, in_specs=JP("i"), out_specs=JP("i"),
                                     check_vma=False))(x)
    mesh = xform.make_mesh((N,), ("i",), axis_types=(xform.sharding.AxisType.Auto,))
    return xform.shard_map(block, mesh=mesh, in_specs=P("i"), out_specs=P("i"),
                           check_vma=False)(x)


def _check(got, want, what):
    assert sorted(got) == sorted(want)
    for k in want:
        g, w = got[k], want[k]
        assert (g.dtype, g.weak_type) == (w.dtype, w.weak_type), (what, k)
        np.testing.assert_allclose(np.asarray(g, np.complex128), np.asarray(w, np.complex128),
                                   rtol=2e-2 if "bfloat16" in k else 1e-6,
                                   err_msg=f"{what} {k}")


@pytest.mark.parametrize("kind", ["vmap", "replicated"])
def test_collective_dtypes_and_weak_types_match_jax(kind):
    xs = {k: xform.numpy.asarray(v) for k, v in DATA.items()}
    js = {k: jax.numpy.asarray(v) for k, v in DATA.items()}
    if kind == "vmap":
        _check(_run(xform, "vmap", xs), _run(jax, "vmap", js), "vmap")
        return
    # JAX's pmap and shard_map give the same dtypes, weak types and values (one
    # replicated program): its shard_map is the reference for both of xform's
    want = _run(jax, "shard_map", js)
    _check(_run(xform, "pmap", xs), want, "pmap")
    _check(_run(xform, "shard_map", xs), want, "shard_map")


def test_bool_and_complex_edge_cases(x64):
    xb, xc = DATA["bool"], DATA["complex64"]
    # psum_scatter of bools: a TypeError in both (the sum is an add)
    for lib in (jax, xform):
        with pytest.raises(TypeError, match="bool"):
            lib.pmap(lambda v: lib.lax.psum_scatter(v, "i"), "i")(np.tile(xb[:, :1], (1, N)))
    # complex pmax/pmin: JAX's vmap order (XLA's all-reduce has none; JAX's pmap fails)
    groups = [[0, 3], [1, 2]]
    got = xform.pmap(lambda v: (xform.lax.pmax(v, "i"), xform.lax.pmin(
        v, "i", axis_index_groups=groups)), "i")(xc)
    jv = lambda op, a: np.asarray(jax.vmap(lambda v: op(v, "i"),  # noqa: E731
                                           axis_name="i")(jax.numpy.asarray(a)))
    want_min = np.empty_like(xc)
    for g in groups:   # (JAX's vmap has no axis_index_groups)
        want_min[g] = jv(jax.lax.pmin, xc[g])
    np.testing.assert_array_equal(np.asarray(got[0]), jv(jax.lax.pmax, xc))
    np.testing.assert_array_equal(np.asarray(got[1]), want_min)
    # x64: pmean divides in to_inexact_dtype (int32 -> float32, int64 -> float64)
    for v in (xb, np.arange(N, dtype=np.int32), np.arange(N, dtype=np.int64)):
        g = xform.vmap(lambda a: xform.lax.pmean(a, "i"), axis_name="i")(v)
        w = jax.vmap(lambda a: jax.lax.pmean(a, "i"), axis_name="i")(jax.numpy.asarray(v))
        assert g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w))
    # ppermute's zeros for members receiving nothing are zeros, not x * 0 (inf, nan)
    xi = np.array([np.inf, np.nan, -1.0, 2.0], np.float32)
    perm = [(0, 1), (1, 2)]
    got = xform.vmap(lambda v: xform.lax.ppermute(v, "i", perm), axis_name="i")(xi)
    want = jax.pmap(lambda v: jax.lax.ppermute(v, "i", perm), "i")(xi)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
