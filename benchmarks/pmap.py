"""Data-parallel MLP training step with pmap on 8 host CPU devices: xform vs JAX.

usage: python benchmarks/pmap.py --lib jax|xform [--quick]

MLP 784-256-256-10 (ReLU, softmax cross-entropy), per-device batch 32, SGD with the
gradients averaged across devices by ``pmean``; parameters replicated and batches
pre-sharded (device_put_replicated / device_put_sharded), so a step is one pmap call.
Prints one JSON line: first-call ms (trace+compile+run), median steady-state ms/step,
and the loss after the steps (comparable across libraries).
"""
import argparse
import json
import os
import statistics
import time

# Must happen before jax/xform create the CPU client.
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()

import numpy as np  # noqa: E402

SIZES, PER_DEVICE, LR, NDEV = [784, 256, 256, 10], 32, 0.05, 8


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", choices=["jax", "xform"], required=True)
    p.add_argument("--quick", action="store_true", help="few steps (smoke test)")
    args = p.parse_args()
    steps = 5 if args.quick else 60
    if args.lib == "jax":
        import jax
        import jax.numpy as jnp
        lax = jax.lax
        lib = jax
    else:
        import xform as jax
        import xform.numpy as jnp
        from xform import lax
        lib = jax

    rng = np.random.default_rng(0)
    params = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        params[f"w{i}"] = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        params[f"b{i}"] = np.zeros(b, np.float32)
    teacher = rng.standard_normal((784, 10)).astype(np.float32)
    batches = []
    for _ in range(steps):
        x = rng.standard_normal((NDEV * PER_DEVICE, 784)).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[np.argmax(x @ teacher, axis=1)]
        batches.append((x.reshape(NDEV, PER_DEVICE, 784), y.reshape(NDEV, PER_DEVICE, 10)))

    def loss_fn(p, x, y):
        h = x
        for i in range(len(SIZES) - 1):
            h = h @ p[f"w{i}"] + p[f"b{i}"]
            if i < len(SIZES) - 2:
                h = jnp.maximum(h, 0.0)
        logp = h - jax.nn.logsumexp(h, axis=-1, keepdims=True)
        return -jnp.mean(jnp.sum(logp * y, axis=-1))

    def step(p, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        g = lax.pmean(g, "batch")
        return jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g), lax.pmean(loss, "batch")

    pstep = lib.pmap(step, "batch")
    devices = lib.devices()[:NDEV]
    if args.lib == "jax":  # device_put_sharded/replicated are gone from jax 0.10
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        sharding = NamedSharding(Mesh(np.array(devices), ("batch",)), PartitionSpec("batch"))
        p = {k: jax.device_put(np.stack([v] * NDEV), sharding) for k, v in params.items()}
        data = [(jax.device_put(x, sharding), jax.device_put(y, sharding)) for x, y in batches]
    else:
        p = lib.device_put_replicated(params, devices)
        data = [(lib.device_put_sharded(list(x), devices),
                 lib.device_put_sharded(list(y), devices)) for x, y in batches]
    t0 = time.perf_counter()
    out = pstep(p, *data[0])
    jax.block_until_ready(out)
    first_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(2):
        jax.block_until_ready(pstep(p, *data[1]))
    times = []
    for x, y in data:
        t0 = time.perf_counter()
        p, loss = pstep(p, x, y)
        jax.block_until_ready((p, loss))
        times.append(time.perf_counter() - t0)
    print(json.dumps({"script": "pmap", "lib": args.lib, "first_call_ms": round(first_ms, 1),
                      "step_ms": round(statistics.median(times) * 1e3, 3),
                      "final_loss": round(float(np.asarray(loss)[0]), 6),
                      "steps": steps, "devices": NDEV, "batch": NDEV * PER_DEVICE}))


if __name__ == "__main__":
    main()
