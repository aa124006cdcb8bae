"""Second-process startup with the persistent compilation cache: a fresh process runs the
first jitted value_and_grad step of an 8-block residual MLP (width 256, layer norm, gelu;
a program whose XLA compile takes most of a second) with ``jax_compilation_cache_dir`` set to an empty folder
(cold), then a second fresh process does the same with the folder the first one filled
(warm). Reports for each: the time until the step is ready to run (trace, lower, and
compile or load: ``jit(...).lower(...).compile()``), the first call (ready + the first
run, which on XLA:CPU costs much more than later runs), the whole process, and the
cold/warm speedups.
Both libraries use ``jax_persistent_cache_min_compile_time_secs = 0``.

The same for a small jitted model (``small_*``: ``jit(value_and_grad)`` of a 32-64-10
tanh MLP, batch 16): ``small_first_speedup`` is the cold/warm ratio of the time to its
first result (trace, lower, compile or load, first run, the value on the host; import
and data creation excluded), ``small_first_speedup_min_max`` its spread over rounds.
For xform the warm process also says where that time goes (``small_warm_*_ms``: trace,
lower, ``compile_or_load`` = key + read + deserialize, ``first_run``)."""
import json
import os
import subprocess
import sys
import tempfile
import time

from _common import parse_args, emit
from types import SimpleNamespace

CHILD = r"""
import json, sys, time
import numpy as np
lib = __import__(sys.argv[1])
import importlib
xnp = importlib.import_module(sys.argv[1] + ".numpy")
lib.config.update("jax_compilation_cache_dir", sys.argv[2])
lib.config.update("jax_persistent_cache_min_compile_time_secs", 0)
rng = np.random.default_rng(0)
if sys.argv[3] == "small":
    p = {"w1": xnp.asarray((rng.standard_normal((32, 64)) / 6).astype(np.float32)),
         "b1": xnp.zeros(64), "b2": xnp.zeros(10),
         "w2": xnp.asarray((rng.standard_normal((64, 10)) / 8).astype(np.float32))}
    x = xnp.asarray(rng.standard_normal((16, 32)).astype(np.float32))
    y = xnp.asarray(rng.standard_normal((16, 10)).astype(np.float32))
    def loss(p, x):
        h = xnp.tanh(x @ p["w1"] + p["b1"])
        return xnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)
else:
    D, BLOCKS = 256, 8
    p = [{"w1": xnp.asarray((rng.standard_normal((D, 2 * D)) / np.sqrt(D)).astype(np.float32)),
          "w2": xnp.asarray((rng.standard_normal((2 * D, D)) / np.sqrt(2 * D)).astype(np.float32)),
          "g": xnp.ones(D), "b": xnp.zeros(D)} for _ in range(BLOCKS)]
    x = xnp.asarray(rng.standard_normal((64, D)).astype(np.float32))
    def block(h, q):
        mu = xnp.mean(h, axis=-1, keepdims=True)
        var = xnp.mean((h - mu) ** 2, axis=-1, keepdims=True)
        z = (h - mu) / xnp.sqrt(var + 1e-5) * q["g"] + q["b"]
        z = z @ q["w1"]
        z = 0.5 * z * (1.0 + xnp.tanh(0.7978845608 * (z + 0.044715 * z ** 3)))
        return h + z @ q["w2"]
    def loss(p, x):
        for q in p:
            x = block(x, q)
        return xnp.mean(x ** 2)
phases = {}
if sys.argv[1] == "xform":  # where the time goes (xform only)
    from xform.interpreters import compiler, mlir, partial_eval
    def timed(mod, name, label):
        f = getattr(mod, name)
        def w(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                phases[label] = phases.get(label, 0.0) + time.perf_counter() - t
        setattr(mod, name, w)
    timed(partial_eval, "trace_to_jaxpr", "trace")
    timed(mlir, "lower_jaxpr_to_module", "lower")
    timed(compiler, "compile_module", "compile_or_load")
t0 = time.perf_counter()
step = lib.jit(lib.value_and_grad(loss)).lower(p, x).compile()
t1 = time.perf_counter()
v, g = step(p, x)
v = float(v)
t2 = time.perf_counter()
phases["first_run"] = t2 - t1
print(t1 - t0, t2 - t0, v, json.dumps(phases))
"""

args = parse_args(__doc__)
rounds = 1 if args.quick else 3


def child(cache_dir, model):
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, args.lib, cache_dir, model],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    ready, first, loss, phases = proc.stdout.strip().splitlines()[-1].split(" ", 3)
    return float(ready), float(first), wall, float(loss), json.loads(phases)


def cold_then_warm(model):
    with tempfile.TemporaryDirectory(prefix="startup-cache-") as d:
        return child(d, model), child(d, model)


cold, warm, small_cold, small_warm = [], [], [], []
for _ in range(rounds):
    for runs, model in (((cold, warm), "mlp8"), ((small_cold, small_warm), "small")):
        c, w = cold_then_warm(model)
        runs[0].append(c)
        runs[1].append(w)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


cold_ready, warm_ready = median([c[0] for c in cold]), median([w[0] for w in warm])
cold_first, warm_first = median([c[1] for c in cold]), median([w[1] for w in warm])
cold_wall, warm_wall = median([c[2] for c in cold]), median([w[2] for w in warm])
res = dict(cold_ready_ms=round(cold_ready * 1e3, 1), warm_ready_ms=round(warm_ready * 1e3, 1),
           ready_speedup=round(cold_ready / warm_ready, 2),
           cold_first_call_ms=round(cold_first * 1e3, 1),
           warm_first_call_ms=round(warm_first * 1e3, 1),
           cold_process_ms=round(cold_wall * 1e3, 1), warm_process_ms=round(warm_wall * 1e3, 1),
           first_call_speedup=round(cold_first / warm_first, 2),
           process_speedup=round(cold_wall / warm_wall, 2), loss=round(cold[0][3], 6))
speedups = [c[1] / w[1] for c, w in zip(small_cold, small_warm)]
res.update(small_cold_first_ms=round(median([c[1] for c in small_cold]) * 1e3, 1),
           small_warm_first_ms=round(median([w[1] for w in small_warm]) * 1e3, 1),
           small_first_speedup=round(median(speedups), 2),
           small_first_speedup_min_max=[round(min(speedups), 2), round(max(speedups), 2)],
           small_loss=round(small_cold[0][3], 6))
for phase in sorted(small_warm[0][4]):
    res[f"small_warm_{phase}_ms"] = round(median([w[4][phase] for w in small_warm]) * 1e3, 1)
try:
    import importlib.metadata
    version = importlib.metadata.version(args.lib)
except Exception:  # noqa: BLE001
    version = "unknown"
emit("startup", SimpleNamespace(name=args.lib, version=version, compiled=True), res)
