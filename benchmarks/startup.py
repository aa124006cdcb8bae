"""Second-process startup with the persistent compilation cache: a fresh process runs the
first jitted value_and_grad step of an 8-block residual MLP (width 256, layer norm, gelu;
a program whose XLA compile takes most of a second) with ``jax_compilation_cache_dir`` set to an empty folder
(cold), then a second fresh process does the same with the folder the first one filled
(warm). Reports for each: the time until the step is ready to run (trace, lower, and
compile or load: ``jit(...).lower(...).compile()``), the first call (ready + the first
run, which on XLA:CPU costs much more than later runs), the whole process, and the
cold/warm speedups.
Both libraries use ``jax_persistent_cache_min_compile_time_secs = 0``."""
import json
import os
import subprocess
import sys
import tempfile
import time

from _common import parse_args, emit
from types import SimpleNamespace

CHILD = r"""
import sys, time
import numpy as np
lib = __import__(sys.argv[1])
import importlib
xnp = importlib.import_module(sys.argv[1] + ".numpy")
lib.config.update("jax_compilation_cache_dir", sys.argv[2])
lib.config.update("jax_persistent_cache_min_compile_time_secs", 0)
rng = np.random.default_rng(0)
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
t0 = time.perf_counter()
step = lib.jit(lib.value_and_grad(loss)).lower(p, x).compile()
t1 = time.perf_counter()
v, g = step(p, x)
v.block_until_ready()
print(t1 - t0, time.perf_counter() - t0, float(v))
"""

args = parse_args(__doc__)
rounds = 1 if args.quick else 3


def child(cache_dir):
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, args.lib, cache_dir],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    ready, first, loss = proc.stdout.split()[-3:]
    return float(ready), float(first), wall, float(loss)


cold, warm = [], []
for _ in range(rounds):
    with tempfile.TemporaryDirectory(prefix="startup-cache-") as d:
        cold.append(child(d))
        warm.append(child(d))


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
try:
    import importlib.metadata
    version = importlib.metadata.version(args.lib)
except Exception:  # noqa: BLE001
    version = "unknown"
emit("startup", SimpleNamespace(name=args.lib, version=version, compiled=True), res)
