"""Sharded checkpoints (``checkpoint.save_sharded``/``restore_sharded``): each process
writes only its replica-0 shards, an index ties them together, restore reads per device
only the saved shards overlapping its piece (checked against JAX's device -> index maps
for other meshes and specs), saves are atomic, and bad or mismatched data gives
CheckpointError naming the leaf."""
import collections
import json
import os

import numpy as np
import pytest

import jax
import ml_dtypes

import xform
import xform.numpy as jnp
import xform.optim as optax
from xform import _sharded_checkpoint as sc
from xform import checkpoint
from xform.checkpoint import CheckpointError
from xform.sharding import PartitionSpec as P

X = np.arange(48, dtype=np.float32).reshape(8, 6)


def _index(d):
    with open(os.path.join(d, "index.json")) as f:
        return json.load(f)


def _sharded(spec):
    """X as a ShardedArray split over a (4, 2) mesh as ``spec`` says (shard_map's output)."""
    mesh = xform.make_mesh((4, 2), ("x", "y"), axis_types=(xform.sharding.AxisType.Auto,) * 2)
    return xform.shard_map(lambda a: a, mesh=mesh, in_specs=spec, out_specs=spec)(X)


def test_roundtrip_mixed_tree_with_and_without_target(tmp_path):
    Pair = collections.namedtuple("Pair", "a b")
    params = {"w": jnp.ones((2, 3)), "b": jnp.zeros(3, jnp.bfloat16)}
    tree = {"params": params, "opt": optax.adam(0.1).init(params), "step": 3,
            "rate": 0.5, "flag": True, "n": np.arange(3, dtype=np.float64),
            "key": xform.random.key(1), "p": Pair(jnp.arange(2), None)}
    checkpoint.save_sharded(tmp_path, tree)
    got = checkpoint.restore_sharded(tmp_path, target=tree)
    assert xform.tree_util.tree_structure(got) == xform.tree_util.tree_structure(tree)
    for (path, a), b in zip(xform.tree_util.tree_leaves_with_path(got),
                            xform.tree_util.tree_leaves(tree)):
        if hasattr(b, "dtype") and xform.dtypes.issubdtype(b.dtype, xform.dtypes.prng_key):
            a, b = xform.random.key_data(a), xform.random.key_data(b)
        assert type(a) is type(b) or isinstance(b, xform.Array), path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype
    plain = checkpoint.restore_sharded(tmp_path)
    assert plain["p"] == Pair(plain["p"].a, None) and plain["step"] == 3
    assert plain["params"]["b"].dtype == ml_dtypes.bfloat16


def test_each_shard_is_written_once_never_gathered(tmp_path):
    tiles, rows = _sharded(P("x", "y")), _sharded(P("x"))   # rows: replicated along y
    checkpoint.save_sharded(tmp_path, {"tiles": tiles, "rows": rows})
    leaves = _index(tmp_path)["leaves"]
    by_name = dict(zip(["rows", "tiles"], leaves))
    for name, arr in (("tiles", tiles), ("rows", rows)):
        saved = by_name[name]["shards"]
        want = [s for s in arr.addressable_shards if s.replica_id == 0]
        assert len(saved) == len(want) == (8 if name == "tiles" else 4)
        assert sorted(tuple(map(tuple, s["index"])) for s in saved) == sorted(
            tuple(tuple(i.indices(n)[:2]) for i, n in zip(s.index, X.shape)) for s in want)
        assert all(s["shape"] == list(arr.addressable_shards[0].data.shape) for s in saved)
    out = checkpoint.restore_sharded(tmp_path)
    np.testing.assert_array_equal(out["tiles"], X)
    np.testing.assert_array_equal(out["rows"], X)


@pytest.mark.parametrize("shape, spec", [((2, 4), ("b", "a")), ((3,), (None, "a")),
                                         ((2, 2), ("a",)), ((1,), ())])
def test_resharded_pieces_match_jax_indices(tmp_path, shape, spec):
    """Each device's piece for another mesh and spec (JAX's devices_indices_map) is
    X at that index, read from only the saved shards that overlap it."""
    checkpoint.save_sharded(tmp_path, {"x": _sharded(P("x", "y"))})
    rec = _index(tmp_path)["leaves"][0]
    names = ("a", "b")[:len(shape)]
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:int(np.prod(shape))]).reshape(shape),
                             names)
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
    for index in sharding.devices_indices_map(X.shape).values():
        reader = sc._Reader(str(tmp_path))
        want = sc._norm_index(index, X.shape)
        np.testing.assert_array_equal(sc._piece(rec, reader, want), X[index])
        overlapping = [s for s in rec["shards"] if all(
            max(a, c) < min(b, d) for (a, b), (c, d) in zip(want, s["index"]))]
        assert len(reader.cache) == len(overlapping)


def test_overwrite_is_atomic_and_cleans_old_generations(tmp_path, monkeypatch):
    checkpoint.save_sharded(tmp_path, {"w": jnp.ones(2)})
    real = sc._write_atomic

    def crash_on_index(path, data):
        if path.endswith("index.json"):
            raise OSError("disk full")
        real(path, data)
    monkeypatch.setattr(sc, "_write_atomic", crash_on_index)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save_sharded(tmp_path, {"w": jnp.zeros(2)})
    monkeypatch.undo()
    np.testing.assert_array_equal(checkpoint.restore_sharded(tmp_path)["w"], np.ones(2))
    checkpoint.save_sharded(tmp_path, {"w": jnp.full(2, 7.0)})
    # (the crashed save's file was generation 2 too: replaced, then the old one removed)
    assert sorted(os.listdir(tmp_path)) == ["g2-p0-of-1.safetensors", "index.json"]
    np.testing.assert_array_equal(checkpoint.restore_sharded(tmp_path)["w"], [7.0, 7.0])
    with pytest.raises(FileExistsError, match="overwrite=True"):
        checkpoint.save_sharded(tmp_path, {"w": 1}, overwrite=False)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds other files"):
        checkpoint.save_sharded(other, {"w": 1})


def test_bad_data_and_mismatches_raise_clear_errors(tmp_path):
    d = str(tmp_path / "c")
    checkpoint.save_sharded(d, {"x": _sharded(P("x", "y")), "s": 2})
    target = {"x": jnp.zeros((8, 6)), "s": 0}
    with pytest.raises(CheckpointError, match=r"\['x'\] has shape \(8, 6\) dtype float32 "
                                              r"in the checkpoint but shape \(6, 8\)"):
        checkpoint.restore_sharded(d, target={"x": jnp.zeros((6, 8)), "s": 0})
    with pytest.raises(CheckpointError, match="structure differs"):
        checkpoint.restore_sharded(d, target={"y": jnp.zeros((8, 6)), "s": 0})
    with pytest.raises(CheckpointError, match="shardings has 1 leaves"):
        checkpoint.restore_sharded(d, shardings=[None])
    with pytest.raises(FileNotFoundError, match="has no index.json"):
        checkpoint.restore_sharded(tmp_path)
    index_path = os.path.join(d, "index.json")
    good = open(index_path).read()
    index = json.loads(good)
    fname = index["leaves"][1]["shards"][0]["file"]
    index["leaves"][1]["shards"].pop()
    with open(index_path, "w") as f:
        json.dump(index, f)
    with pytest.raises(CheckpointError, match=r"incomplete: the saved shards of \['x'\] "
                                              r"hold 42 of its 48"):
        checkpoint.restore_sharded(d, target=target)
    open(index_path, "w").write(good)
    path = os.path.join(d, fname)
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with pytest.raises(CheckpointError, match="SHA-256"):
        checkpoint.restore_sharded(d)
    os.unlink(path)
    with pytest.raises(CheckpointError, match="missing"):
        checkpoint.restore_sharded(d)
    with pytest.raises(TypeError, match=r"leaf at \['s'\] is a str"):
        checkpoint.save_sharded(str(tmp_path / "f"), {"s": "text"})


def _layout(a):
    return tuple(a.sharding.spec), sorted((s.device.id, str(s.index), s.data.shape)
                                          for s in a.addressable_shards)


def test_restore_onto_another_mesh_and_spec_matches_jax_layout(tmp_path):
    """Saved from device_put onto a (4, 2) mesh, restored onto a (2, 4) mesh with another
    spec, into a target's shardings, and onto one device: values as saved; the
    per-device layout as JAX's device_put gives for that sharding."""
    auto = (xform.sharding.AxisType.Auto,) * 2
    mesh = xform.make_mesh((4, 2), ("data", "model"), axis_types=auto)
    x = xform.device_put(X, xform.sharding.NamedSharding(mesh, P("data", "model")))
    tree = {"x": x, "b": xform.device_put(X[0], xform.sharding.NamedSharding(mesh, P()))}
    checkpoint.save_sharded(tmp_path, tree)
    assert len(_index(tmp_path)["leaves"][0]["shards"]) == 1   # replicated: written once
    mesh2 = xform.make_mesh((2, 4), ("a", "b"), axis_types=auto)
    jmesh2 = jax.make_mesh((2, 4), ("a", "b"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    for spec in [(None, "a"), (("b", "a"),), ("b", "a")]:
        want = jax.device_put(X, jax.sharding.NamedSharding(jmesh2, jax.P(*spec)))
        got = checkpoint.restore_sharded(tmp_path, shardings={
            "x": xform.sharding.NamedSharding(mesh2, P(*spec)), "b": None})
        assert _layout(got["x"]) == _layout(want), spec
        np.testing.assert_array_equal(np.asarray(got["x"]), X)
        np.testing.assert_array_equal(np.asarray(got["b"]), X[0])
    same = checkpoint.restore_sharded(tmp_path, target=tree)
    assert same["x"].sharding == x.sharding and _layout(same["x"]) == _layout(x)
    one = checkpoint.restore_sharded(tmp_path, shardings=xform.sharding.SingleDeviceSharding(
        xform.devices()[3]))
    assert one["x"].devices() == {xform.devices()[3]}
    with pytest.raises(CheckpointError, match=r"leaf \['x'\] \(shape \(8, 6\)\) cannot be "
                                              r"placed.*evenly divide"):
        checkpoint.restore_sharded(tmp_path, shardings={
            "x": xform.sharding.NamedSharding(xform.make_mesh((8,), ("a",)), P(None, "a")),
            "b": None})


def test_doctests():
    import doctest
    r = doctest.testmod(sc, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert r.attempted and not r.failed


def test_two_processes_each_write_their_own_shards(tmp_path):
    """Two processes (2 CPU devices each) save an array split over all 4 devices: each
    writes the 2 shards it holds to its own file, the replicated scalar is written once,
    and each restores the whole array reading both files."""
    from pathlib import Path
    from xform import launch
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo) + os.pathsep + os.environ.get(
        "PYTHONPATH", "")}
    env.pop("XLA_FLAGS", None)
    codes, outs = launch.launch([str(repo / "tests" / "multiprocess" / "ckpt_worker.py"),
                                 str(tmp_path)], 2, devices_per_process=2, timeout=150,
                                env=env, capture=True)
    assert codes == [0, 0], "\n".join(o[-3000:] for o in outs)
    results = [json.loads(next(ln for ln in o.splitlines() if ln.startswith("{")))
               for o in outs]
    files = ["g1-p0-of-2.safetensors", "g1-p1-of-2.safetensors"]
    for r in results:
        assert r["files"] == files and not r["fully_addressable"]
        assert r["x_shards_by_file"] == [files[0]] * 2 + [files[1]] * 2
        assert r["step_shards"] == 1 and r["restored"] and r["step"] == 7 and r["lr"] == 0.5
    assert sorted(os.listdir(tmp_path)) == files + ["index.json"]


def test_manager_keeps_sharded_steps(tmp_path):
    mesh = xform.make_mesh((4, 2), ("x", "y"), axis_types=(xform.sharding.AxisType.Auto,) * 2)
    spec = xform.sharding.NamedSharding(mesh, P("x"))
    mgr = checkpoint.CheckpointManager(tmp_path, max_to_keep=2, sharded=True)
    for step in range(1, 4):
        assert mgr.save(step, {"w": xform.device_put(X + step, spec), "step": step})
    (tmp_path / "ckpt_9").mkdir()          # a save that never committed its index
    assert mgr.all_steps() == [2, 3] and sorted(os.listdir(tmp_path)) == [
        "ckpt_2", "ckpt_3", "ckpt_9"]
    other = xform.sharding.NamedSharding(mesh, P(None, "y"))
    got = mgr.restore(shardings={"w": other, "step": None})
    assert got["step"] == 3 and got["w"].sharding == other
    np.testing.assert_array_equal(np.asarray(got["w"]), X + 3)
    with pytest.raises(ValueError, match="needs sharded=True"):
        checkpoint.CheckpointManager(tmp_path / "plain").restore(shardings=other)
