"""jit caching as new users write it: (a) ``jit(f)(x)`` written inline, a new jit wrapper
of the same function on every call (32x32 ``tanh(x @ x.T).sum()``); (b)
``jit(value_and_grad(loss))(params, x)`` built fresh inside a training loop (a new function
object each step: a re-trace at best, and it must never recompile); (c) for comparison,
the same value_and_grad step jitted once. Times are per call, blocked on the result."""
import numpy as np
from _common import parse_args, load, block, once, time_calls, med, spread, emit

args = parse_args(__doc__)
L = load(args)
xnp = L.np
REPS, INNER = (10, 5) if args.quick else (200, 5)
FRESH_REPS = 5 if args.quick else 40

x = L.asarray(np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32))


def f(x):
    return xnp.tanh(x @ x.T).sum()


rewrap = time_calls(lambda: block(L.jit(f)(x)), REPS, INNER, warmup=5)

rng = np.random.default_rng(1)
params = {"w1": L.asarray((rng.standard_normal((64, 128)) * 0.1).astype(np.float32)),
          "b1": L.asarray(np.zeros(128, np.float32)),
          "w2": L.asarray((rng.standard_normal((128, 10)) * 0.1).astype(np.float32))}
batch = L.asarray(rng.standard_normal((32, 64)).astype(np.float32))


def loss(p, x):
    h = xnp.tanh(x @ p["w1"] + p["b1"])
    return xnp.mean((h @ p["w2"]) ** 2)


first_s, out = once(lambda: block(L.jit(L.value_and_grad(loss))(params, batch)))
fresh = time_calls(lambda: block(L.jit(L.value_and_grad(loss))(params, batch)),
                   FRESH_REPS, 1, warmup=2)
step = L.jit(L.value_and_grad(loss))
once_jitted = time_calls(lambda: block(step(params, batch)), REPS, INNER, warmup=5)
res = dict(rewrap_us=med(rewrap, 1e6), rewrap_us_p10_p90=spread(rewrap, 1e6),
           fresh_vg_first_ms=round(first_s * 1e3, 2), fresh_vg_ms=med(fresh, 1e3),
           fresh_vg_ms_p10_p90=spread(fresh, 1e3), jitted_vg_us=med(once_jitted, 1e6),
           loss=round(float(L.to_numpy(out[0])), 6))
if L.name == "xform":  # xform counts its compiles: the fresh loop must add none
    from xform.interpreters import compiler
    before = compiler.stats["compile"]
    for _ in range(3):
        block(L.jit(L.value_and_grad(loss))(params, batch))
    res["fresh_vg_compiles"] = compiler.stats["compile"] - before
emit("jit_cache", L, res)
