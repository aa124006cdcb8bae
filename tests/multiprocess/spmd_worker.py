"""One process of the 2-process SPMD test (started by xform.launch): a global batch
from process-local data on a (2 processes x 2 devices) mesh and one jitted data+model
parallel SGD step; then the new parameters saved as a sharded checkpoint by both
and restored by both onto another mesh; then multihost_utils (gather, broadcast,
barrier, host-local <-> global). Prints one JSON line with what it sees."""
import json
import sys

import numpy as np

import xform
import xform.numpy as jnp
from xform import checkpoint
from xform.experimental import multihost_utils as mh
from xform.sharding import NamedSharding, PartitionSpec as P


def loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)


def step(p, x, y):
    value, g = xform.value_and_grad(loss)(p, x, y)
    return xform.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), value


def data():
    rng = np.random.RandomState(0)
    params = {"w": rng.randn(5, 4).astype(np.float32), "b": np.zeros(4, np.float32)}
    return params, rng.randn(8, 5).astype(np.float32), rng.randn(8, 4).astype(np.float32)


def main():
    xform.distributed.initialize(initialization_timeout=60)
    pid = xform.distributed.process_index()
    mesh = xform.make_mesh((2, 2), ("data", "model"))  # rows: one process each
    params, xs, ys = data()
    batch = NamedSharding(mesh, P("data"))
    lo = pid * 4  # this process's half of the global batch
    x = xform.make_array_from_process_local_data(batch, xs[lo:lo + 4], (8, 5))
    y = xform.make_array_from_process_local_data(batch, ys[lo:lo + 4])
    p = {"w": xform.device_put(params["w"], NamedSharding(mesh, P(None, "model"))),
         "b": xform.device_put(params["b"], NamedSharding(mesh, P("model")))}
    try:
        np.asarray(x)
        fetch = "no error"
    except RuntimeError as e:
        fetch = str(e)
    try:
        xform.make_array_from_process_local_data(batch, xs[:3], (8, 5))
        bad_local = "no error"
    except ValueError as e:
        bad_local = str(e)
    new, value = xform.jit(step)(p, x, y)
    w = new["w"]
    line = xform.make_mesh((4,), ("x",))  # the same devices as one axis
    checkpoint.save_sharded(sys.argv[1], new)
    back = checkpoint.restore_sharded(sys.argv[1], shardings={
        "w": NamedSharding(line, P(None, "x")), "b": NamedSharding(line, P("x"))})
    gx = mh.host_local_array_to_global_array(xs[lo:lo + 4], mesh, P("data"))
    hx = mh.global_array_to_host_local_array(gx, mesh, P("data"))
    mh.sync_global_devices("after checkpoint")
    summed = xform.shard_map(lambda b: xform.lax.psum(b.sum(0), "data"), mesh=mesh,
                             in_specs=P("data"), out_specs=P())(x)  # (eager: jitted)
    with mh.live_devices(xform.devices()) as alive:  # (every process: all 4 devices)
        live = [len(alive), alive == sorted(xform.devices(), key=lambda d: d.id)]
    try:
        mh.reached_preemption_sync_point(1)
    except RuntimeError as e:  # (xform starts no preemption sync manager)
        live.append(type(e).__name__)
    utils = {"live": live, "summed": np.asarray(summed).tolist(), "gathered": mh.process_allgather(np.array([pid, 10 + pid])).tolist(),
             "bcast": float(mh.broadcast_one_to_all(np.float32(7 + pid))),
             "global": [list(gx.shape), gx.is_fully_addressable],
             "local": [list(hx.shape), hx.is_fully_addressable, np.asarray(hx).tolist()]}
    print(json.dumps({"utils": utils,
        "pid": pid, "x_shape": list(x.shape), "fetch": fetch, "repr": repr(x),
        "bad_local": bad_local,
        "x_addressable": x.is_fully_addressable, "w_addressable": w.is_fully_addressable,
        "x_shards": [[s.device.process_index, [sl.start for sl in s.index], s.data.tolist()]
                     for s in x.addressable_shards],
        "w_sharding": str(w.sharding.spec), "w_shape": list(w.shape),
        "w_shards": [[[sl.start or 0 for sl in s.index], np.asarray(s.data).tolist()]
                     for s in w.addressable_shards],
        "loss": float(value),
        "restored": {k: [str(v.sharding.spec), v.is_fully_addressable,
                         [[[sl.start or 0 for sl in s.index], np.asarray(s.data).tolist()]
                          for s in v.addressable_shards]] for k, v in back.items()}}),
        flush=True)
    xform.distributed.shutdown()


if __name__ == "__main__":
    sys.exit(main())
