"""Across processes with sharded arrays: two processes (2 CPU devices each) build a
global batch from process-local data on a (2 x 2) mesh and run one jitted data+model
parallel step as one SPMD program; compared with the same step in this process. Both
then save the result as a sharded checkpoint and restore it onto a 1-D mesh, and use
multihost_utils."""
import json
import sys

import numpy as np

import xform
from xform import launch
from test_distributed import HERE, _env


def test_two_process_global_arrays_sharded_jit_and_checkpoint(tmp_path):
    codes, outputs = launch.launch([str(HERE / "spmd_worker.py"), str(tmp_path)], 2, devices_per_process=2,
                                   timeout=120, env=_env(), capture=True)
    assert codes == [0, 0], "\n".join(o[-3000:] for o in outputs)
    results = sorted((json.loads(next(ln for ln in o.splitlines() if ln.startswith("{")))
                      for o in outputs), key=lambda r: r["pid"])
    sys.path.insert(0, str(HERE))
    try:
        import spmd_worker
    finally:
        sys.path.remove(str(HERE))
    params, xs, ys = spmd_worker.data()
    new, value = spmd_worker.step(params, xs, ys)  # one device, whole batch
    for pid, r in enumerate(results):
        assert r["x_shape"] == [8, 5] and r["w_shape"] == [5, 4]
        assert not r["x_addressable"] and not r["w_addressable"]
        assert "spans non-addressable" in r["fetch"], r["fetch"]
        assert r["repr"] == "Array(shape=(8, 5), dtype=float32)"
        assert "local_data has shape (3, 5)" in r["bad_local"], r["bad_local"]
        assert "block of shape (4, 5)" in r["bad_local"]
        assert len(r["x_shards"]) == 2  # this process's devices only
        for dev, start, block in r["x_shards"]:
            assert start[0] == 4 * pid and dev == pid  # rows of this process, on its devices
            np.testing.assert_array_equal(block, xs[4 * pid:4 * pid + 4])
        assert r["w_sharding"] == str(xform.sharding.PartitionSpec(None, "model"))
        for start, block in r["w_shards"]:
            want = np.asarray(new["w"])[:, start[1]:start[1] + 2]
            np.testing.assert_allclose(block, want, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(r["loss"], float(value), rtol=2e-5)
        P = xform.sharding.PartitionSpec
        for name, cols, want_spec in (("w", lambda a, i: a[:, i:i + 1], P(None, "x")),
                                      ("b", lambda a, i: a[i:i + 1], P("x"))):
            spec, addressable, shards = r["restored"][name]
            assert spec == str(want_spec) and not addressable and len(shards) == 2
            for start, block in shards:  # this process's columns: devices 2 pid, 2 pid + 1
                assert start[-1] in (2 * pid, 2 * pid + 1)
                want = cols(np.asarray(new[name]), start[-1])
                np.testing.assert_allclose(block, want, rtol=2e-5, atol=2e-6)
        u = r["utils"]
        np.testing.assert_allclose(u["summed"], xs.sum(0), rtol=1e-5)
        assert u["gathered"] == [[0, 10], [1, 11]] and u["bcast"] == 7.0
        assert u["live"] == [4, True, "RuntimeError"]
        assert u["global"] == [[8, 5], False] and u["local"][:2] == [[4, 5], True]
        np.testing.assert_array_equal(u["local"][2], xs[4 * pid:4 * pid + 4])
