"""Per-example gradients: vmap(grad(loss), in_axes=(None, 0, 0)) over a batch of 256 for a
small MLP 64-128-10.  Jitted,
plus eager for reference."""
import numpy as np
from _common import (parse_args, load, block, once, time_calls, med, spread, emit,
                    mlp_apply, softmax_xent, mlp_init)

args = parse_args(__doc__)
L = load(args)
xnp = L.np
SIZES, BATCH = [64, 128, 10], 256
REPS = 10 if args.quick else 300

rng = np.random.default_rng(0)
p = {k: L.asarray(v) for k, v in mlp_init(rng, SIZES).items()}
x = L.asarray(rng.standard_normal((BATCH, 64)).astype(np.float32))
y = L.asarray(np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)])


def loss(p, x1, y1):  # one example: x1 [64], y1 [10]
    return softmax_xent(xnp, mlp_apply(xnp, p, x1, 2), y1)


pe_grads = L.vmap(L.grad(loss), in_axes=(None, 0, 0))
res = {}
eager = time_calls(lambda: block(pe_grads(p, x, y)), REPS // 3, 1, warmup=3)
res.update(eager_ms=med(eager, 1e3), eager_ms_p10_p90=spread(eager, 1e3),
           eager_faults_per_call=eager.faults_per_call)
# checksum: sum over examples of |dL/dw0| -- comparable across libraries
res["checksum"] = round(float(np.abs(L.to_numpy(pe_grads(p, x, y)["w0"])).sum()), 4)
if L.compiled:
    f = L.jit(pe_grads)
    first_s, _ = once(lambda: block(f(p, x, y)))
    jit = time_calls(lambda: block(f(p, x, y)), REPS, 1, warmup=10)
    res.update(jit_first_call_ms=round(first_s * 1e3, 1), jit_ms=med(jit, 1e3),
               jit_ms_p10_p90=spread(jit, 1e3), jit_faults_per_call=jit.faults_per_call)
emit("per_example_grads", L, res, sizes=SIZES, batch=BATCH)
