"""AdamW update over a 10M-parameter pytree, jitted: xform.optim vs optax on JAX.

usage: python benchmarks/optim.py --lib jax|xform [--quick]

One jitted function does ``tx.update`` + ``apply_updates`` (the optimizer half of a
training step) on fixed gradients; each sample is one call blocked on its result. Prints
one JSON line: update_ms (median), its p10/p90, and a checksum of the params after the
timed steps (equal across libraries up to float rounding).
"""
import argparse
import gc
import json
import os
import platform
import statistics
import time

import numpy as np

SHAPES = {"embed": (4096, 648), "w1": (2048, 1536), "w2": (1536, 2048), "w3": (1024, 1024),
          "b1": (1536,), "b2": (2048,), "ln": (1024,)}   # 9.999M parameters


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", choices=["jax", "xform"], default="jax")
    p.add_argument("--quick", action="store_true", help="few repetitions (smoke test only)")
    args = p.parse_args()
    if args.lib == "jax":
        import jax as lib
        import jax.numpy as xnp
        import optax
    else:
        import xform as lib
        import xform.numpy as xnp
        import xform.optim as optax

    rng = np.random.RandomState(0)
    params = {k: xnp.asarray(rng.standard_normal(s).astype(np.float32) * 0.02)
              for k, s in SHAPES.items()}
    grads = {k: xnp.asarray(rng.standard_normal(s).astype(np.float32) * 1e-3)
             for k, s in SHAPES.items()}
    n_params = sum(int(np.prod(s)) for s in SHAPES.values())
    tx = optax.adamw(1e-3, weight_decay=1e-2)
    state = tx.init(params)

    @lib.jit
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    def block(tree):
        for x in lib.tree_util.tree_leaves(tree):
            x.block_until_ready()

    t0 = time.perf_counter()
    params, state = step(params, state, grads)
    block(params)
    first_ms = (time.perf_counter() - t0) * 1e3
    warmup, reps = (2, 5) if args.quick else (10, 60)
    for _ in range(warmup):
        params, state = step(params, state, grads)
    block(params)
    gc.collect()
    gc.disable()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        params, state = step(params, state, grads)
        block(params)
        samples.append((time.perf_counter() - t0) * 1e3)
    gc.enable()
    checksum = float(sum(np.asarray(x, np.float64).sum() for x in
                         lib.tree_util.tree_leaves(params)))
    q10, q90 = np.percentile(samples, [10, 90])
    print(json.dumps({
        "script": "optim", "lib": args.lib, "version": getattr(lib, "__version__", "?"),
        "python": platform.python_version(), "nproc": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "n": n_params, "steps": reps,
        "update_ms": round(statistics.median(samples), 3),
        "update_ms_p10_p90": [round(float(q10), 3), round(float(q90), 3)],
        "first_call_ms": round(first_ms, 1), "checksum": checksum}), flush=True)


if __name__ == "__main__":
    main()
