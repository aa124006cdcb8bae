"""Chain of 100 small elementwise ops (add, mul, tanh repeating) on float32[1000]:
eager (one dispatch per op) vs jitted (one fused call).  dispatch_tax = eager / jit."""
import numpy as np
from _common import parse_args, load, block, time_calls, med, spread, emit

args = parse_args(__doc__)
L = load(args)
xnp = L.np
N_OPS = 100
(E_REPS, E_INNER), (J_REPS, J_INNER) = ((5, 2), (20, 5)) if args.quick else ((100, 3), (500, 20))


def chain(x):
    for i in range(N_OPS):
        if i % 3 == 0:
            x = x + 0.5
        elif i % 3 == 1:
            x = x * 0.9
        else:
            x = xnp.tanh(x)
    return x


x = L.asarray(np.linspace(-2, 2, 1000, dtype=np.float32))
eager = time_calls(lambda: block(chain(x)), E_REPS, E_INNER, warmup=5)
res = dict(eager_ms=med(eager, 1e3), eager_ms_p10_p90=spread(eager, 1e3),
           eager_per_op_us=round(med(eager, 1e6) / N_OPS, 3),
           checksum=float(L.to_numpy(chain(x)).astype(np.float64).sum()))
if L.compiled:
    f = L.jit(chain)
    jit = time_calls(lambda: block(f(x)), J_REPS, J_INNER, warmup=20)
    res.update(jit_us=med(jit, 1e6), jit_us_p10_p90=spread(jit, 1e6),
               dispatch_tax=round(med(eager, 1e6) / med(jit, 1e6), 1),
               jit_checksum=float(L.to_numpy(f(x)).astype(np.float64).sum()))
emit("eager_chain", L, res, n_ops=N_OPS, size=1000)
