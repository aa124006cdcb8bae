"""One process of the 2-process sharded checkpoint test (started by xform.launch): a
global array over both processes' devices, saved with each process writing only its own
shards, restored whole by each process (reading the other's file); prints one JSON line.
(spmd_worker.py restores onto a mesh spanning both processes.)"""
import json
import sys

import numpy as np

import xform
from xform import checkpoint
from xform.sharding import AxisType, NamedSharding, PartitionSpec as P

X = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)


def main():
    directory = sys.argv[1]
    xform.distributed.initialize(initialization_timeout=60)
    pid = xform.distributed.process_index()
    mesh = xform.make_mesh((4,), ("x",), axis_types=(AxisType.Auto,))
    x = xform.make_array_from_callback(X.shape, NamedSharding(mesh, P("x")), lambda i: X[i])
    step = xform.make_array_from_callback((), NamedSharding(mesh, P()), lambda i: np.int32(7))
    checkpoint.save_sharded(directory, {"x": x, "step": step, "lr": 0.5})
    with open(f"{directory}/index.json") as f:
        index = json.load(f)
    got = checkpoint.restore_sharded(directory)
    print(json.dumps({"pid": pid, "files": index["files"],
                      "x_shards_by_file": sorted(s["file"] for s in index["leaves"][2]["shards"]),
                      "step_shards": len(index["leaves"][1]["shards"]),
                      "fully_addressable": x.is_fully_addressable,
                      "restored": bool(np.array_equal(np.asarray(got["x"]), X)),
                      "step": int(got["step"]), "lr": got["lr"]}), flush=True)
    xform.distributed.shutdown()


if __name__ == "__main__":
    sys.exit(main())
