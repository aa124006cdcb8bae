"""One process of the 2-process test (started by xform.launch): psum across processes
and three data-parallel SGD steps; prints one JSON line with the results."""
import json
import sys

import numpy as np

import xform
import xform.numpy as jnp
from xform import lax


def loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)


def step(p, x, y):
    g = lax.pmean(xform.grad(loss)(p, x, y), "batch")
    return xform.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)


def data():
    rng = np.random.RandomState(0)
    params = {"w": rng.randn(5, 3).astype(np.float32), "b": np.zeros(3, np.float32)}
    return params, rng.randn(16, 5).astype(np.float32), rng.randn(16, 3).astype(np.float32)


def main():
    xform.distributed.initialize(initialization_timeout=60)
    pid, nproc = xform.distributed.process_index(), xform.distributed.process_count()
    nlocal = xform.local_device_count()
    ndev = len(xform.devices())
    # psum over all processes' devices: global device k contributes k
    ids = np.arange(nlocal, dtype=np.float32) + pid * nlocal
    total = xform.pmap(lambda v: lax.psum(v, "i"), "i")(ids)
    index = xform.pmap(lambda v: lax.axis_index("i") + 0 * v.astype(np.int32), "i")(ids)
    params, xs, ys = data()
    per = xs.shape[0] // ndev  # this process's slice of the global batch
    lo = pid * nlocal * per
    xl = xs[lo:lo + nlocal * per].reshape(nlocal, per, 5)
    yl = ys[lo:lo + nlocal * per].reshape(nlocal, per, 3)
    p = xform.device_put_replicated(params, xform.local_devices())
    pstep = xform.pmap(step, "batch")
    for _ in range(3):
        p = pstep(p, xl, yl)
    try:  # jit of pmap across processes: a clear error, not a shape mismatch
        xform.jit(xform.pmap(lambda v: lax.psum(v, "i"), "i"))(ids)
        jit_pmap = "no error"
    except NotImplementedError as e:
        jit_pmap = str(e)
    print(json.dumps({"pid": pid, "jit_pmap": jit_pmap, "nproc": nproc, "nlocal": nlocal, "ndev": ndev,
                      "psum": np.asarray(total).tolist(),
                      "axis_index": np.asarray(index).tolist(),
                      "w": np.asarray(p["w"][0]).tolist(),
                      "b": np.asarray(p["b"][0]).tolist()}), flush=True)
    xform.distributed.shutdown()


if __name__ == "__main__":
    sys.exit(main())
