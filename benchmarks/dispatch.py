"""Dispatch latency: (a) jitted f(x)=x+1 on float32[8], (b) eager xnp.sin, x+1 and a+b
on float32[8], (c) eager/jit ratio, (d) a jitted function of a dict of 10 float32[8]
arrays returning a dict (the pytree path), (e) jitted f(x, s) with a Python float ``s``
and f(n) with a NumPy float32[8] ``n`` (host arguments, transferred per call), (f) jitted
f(x, 3, "mul") with two static arguments.  Each call is blocked on (latency, not
throughput); jit_async_us additionally shows the cost per call when only the last of a
batch is blocked on."""
import numpy as np
from _common import parse_args, load, block, time_calls, med, spread, emit

args = parse_args(__doc__)
L = load(args)
xnp = L.np
REPS, INNER = (50, 10) if args.quick else (1000, 20)
US = 1e6

x = L.asarray(np.arange(8, dtype=np.float32))
res = {}

eager_sin = time_calls(lambda: block(xnp.sin(x)), REPS, INNER, warmup=200)
eager_add = time_calls(lambda: block(x + 1), REPS, INNER, warmup=200)
y = L.asarray(np.ones(8, dtype=np.float32))
eager_ab = time_calls(lambda: block(x + y), REPS, INNER, warmup=200)
res.update(eager_sin_us=med(eager_sin, US), eager_sin_us_p10_p90=spread(eager_sin, US),
           eager_add_us=med(eager_add, US), eager_add_ab_us=med(eager_ab, US))

if L.compiled:
    f = L.jit(lambda x: x + 1)
    jit = time_calls(lambda: block(f(x)), REPS, INNER, warmup=200)

    def async_batch():  # INNER calls, block only on the last result
        for _ in range(INNER - 1):
            f(x)
        block(f(x))
    jit_async = time_calls(async_batch, REPS // 4, 1, warmup=20)
    res.update(jit_us=med(jit, US), jit_us_p10_p90=spread(jit, US),
               jit_async_us=round(med(jit_async, US) / INNER, 3),
               eager_over_jit=round(res["eager_sin_us"] / med(jit, US), 3))
    d10 = {f"a{i}": L.asarray(np.full(8, i, dtype=np.float32)) for i in range(10)}
    g = L.jit(lambda d: {k: v * 2.0 for k, v in d.items()})
    jit_dict = time_calls(lambda: block(g(d10)), REPS, INNER, warmup=200)
    res.update(jit_dict10_us=med(jit_dict, US), jit_dict10_us_p10_p90=spread(jit_dict, US))
    fs = L.jit(lambda x, s: x * s)
    jit_scalar = time_calls(lambda: block(fs(x, 0.5)), REPS, INNER, warmup=200)
    n = np.arange(8, dtype=np.float32)
    jit_numpy = time_calls(lambda: block(f(n)), REPS, INNER, warmup=200)
    res.update(jit_scalar_arg_us=med(jit_scalar, US), jit_numpy_arg_us=med(jit_numpy, US))
    fst = L.jit(lambda x, n, op: x * n if op == "mul" else x + n, static_argnums=(1, 2))
    jit_static = time_calls(lambda: block(fst(x, 3, "mul")), REPS, INNER, warmup=200)
    res.update(jit_static_args_us=med(jit_static, US))

emit("dispatch", L, res)
