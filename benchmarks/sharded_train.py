"""Data- x tensor-parallel transformer-ish train step on a (4, 2) mesh of 8 host CPU
devices, one SPMD program partitioned by XLA: xform vs JAX.

usage: python benchmarks/sharded_train.py --lib jax|xform [--quick]

Two pre-norm blocks (self-attention with heads split over 'model', an MLP with its
hidden units split over 'model'; Megatron-style column/row splits), tokens split over
'data', mean-squared error to a fixed target, SGD. Parameters and batches are placed
with ``device_put`` to ``NamedSharding`` s and the step is
``jit(step, in_shardings=..., out_shardings=...)``. Prints one JSON line: first-call ms
(trace + compile + run), median steady-state ms/step, the loss after the steps, and the
number of collectives of each kind in the optimized program (``compile().as_text()``),
which should be equal across libraries (same partitioner). With ``--lib xform`` it also
builds JAX's step in the same process and reports ``interleaved_ratio``, xform/JAX over
steps that alternate between the libraries (robust on a loaded machine).
"""
import argparse
import json
import os
import re
import statistics
import time

# Must happen before jax/xform create the CPU client.
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()

import numpy as np  # noqa: E402

BATCH, SEQ, D_MODEL, HEADS, LAYERS, LR = 16, 32, 128, 4, 2, 0.05
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
               "all-to-all")


def param_specs():
    """Mesh axes of each parameter's dimensions (None: replicated)."""
    block = {"ln1": (None,), "wq": (None, "model"), "wk": (None, "model"),
             "wv": (None, "model"), "wo": ("model", None), "ln2": (None,),
             "w1": (None, "model"), "w2": ("model", None)}
    return {f"block{i}": dict(block) for i in range(LAYERS)}


def init_params(rng):
    def dense(a, b):
        return (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
    out = {}
    for i in range(LAYERS):
        out[f"block{i}"] = {
            "ln1": np.ones(D_MODEL, np.float32), "ln2": np.ones(D_MODEL, np.float32),
            "wq": dense(D_MODEL, D_MODEL), "wk": dense(D_MODEL, D_MODEL),
            "wv": dense(D_MODEL, D_MODEL), "wo": dense(D_MODEL, D_MODEL),
            "w1": dense(D_MODEL, 4 * D_MODEL), "w2": dense(4 * D_MODEL, D_MODEL)}
    return out


def make_step(jax, jnp):
    def norm(x, scale):
        x = x - x.mean(-1, keepdims=True)
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * scale

    def block(p, x):
        h = norm(x, p["ln1"])
        b, s, _ = h.shape
        q, k, v = (jnp.reshape(h @ p[w], (b, s, HEADS, D_MODEL // HEADS))
                   for w in ("wq", "wk", "wv"))
        att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D_MODEL // HEADS))
        o = jnp.reshape(jnp.einsum("bhqk,bkhd->bqhd", att, v), (b, s, D_MODEL))
        x = x + o @ p["wo"]
        return x + jax.nn.gelu(norm(x, p["ln2"]) @ p["w1"]) @ p["w2"]

    def loss_fn(params, x, y):
        for i in range(LAYERS):
            x = block(params[f"block{i}"], x)
        return jnp.mean((x - y) ** 2)

    def step(params, x, y):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - LR * b, params, g), loss
    return step


def count_collectives(hlo_text):
    """Collectives of each kind in an optimized HLO module's text (async starts once)."""
    counts = {}
    for kind in COLLECTIVES:
        pat = rf"[ )]{kind}(-start)?\("   # the op, not an operand (%all-reduce.3)
        counts[kind] = len(re.findall(pat, hlo_text))
    return counts


def setup(lib, steps):
    """Library ``lib``'s jitted step, its sharded params and batches (same data for both)."""
    if lib == "jax":
        import jax
        import jax.numpy as jnp
        from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
    else:
        import xform as jax
        import xform.numpy as jnp
        from xform.sharding import AxisType, NamedSharding, PartitionSpec as P

    # Auto axes: XLA's SPMD partitioner propagates the shardings through the step
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    rng = np.random.default_rng(0)
    specs = param_specs()
    p_shard = jax.tree_util.tree_map(lambda names: NamedSharding(mesh, P(*names)), specs,
                                     is_leaf=lambda t: isinstance(t, tuple))
    d_shard = NamedSharding(mesh, P("data", None, None))
    params = jax.device_put(init_params(rng), p_shard)
    batches = [tuple(jax.device_put(rng.standard_normal((BATCH, SEQ, D_MODEL)).astype(
        np.float32), d_shard) for _ in range(2)) for _ in range(steps)]
    step = jax.jit(make_step(jax, jnp), in_shardings=(p_shard, d_shard, d_shard),
                   out_shardings=(p_shard, NamedSharding(mesh, P())))
    return jax, step, params, batches


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", choices=["jax", "xform"], required=True)
    p.add_argument("--quick", action="store_true", help="few steps (smoke test)")
    args = p.parse_args()
    steps = 3 if args.quick else 30
    jax, step, params, batches = setup(args.lib, steps)

    t0 = time.perf_counter()
    out = step(params, *batches[0])
    jax.block_until_ready(out)
    first_ms = (time.perf_counter() - t0) * 1e3
    hlo = step.lower(params, *batches[0]).compile().as_text()
    for _ in range(2):
        jax.block_until_ready(step(params, *batches[1]))
    times = []
    for x, y in batches:
        t0 = time.perf_counter()
        params, loss = step(params, x, y)
        jax.block_until_ready((params, loss))
        times.append(time.perf_counter() - t0)
    record = {"script": "sharded_train", "lib": args.lib, "first_call_ms": round(first_ms, 1),
              "step_ms": round(statistics.median(times) * 1e3, 3),
              "final_loss": round(float(loss), 6), "steps": steps, "mesh": "4x2",
              "batch": BATCH, "seq": SEQ, "d_model": D_MODEL, "layers": LAYERS}
    record.update({"n_" + k.replace("-", "_"): v for k, v in count_collectives(hlo).items()})
    if args.lib == "xform":
        record["interleaved_ratio"] = interleaved_ratio(step, params, batches, steps)
    print(json.dumps(record))


def interleaved_ratio(x_step, x_params, x_batches, steps):
    """xform/JAX median step time with the two libraries' steps alternating in this one
    process (both run on jaxlib's CPU client), so a noisy neighbour slows both alike."""
    jax, j_step, j_params, j_batches = setup("jax", steps)
    jax.block_until_ready(j_step(j_params, *j_batches[0]))
    times = {"xform": [], "jax": []}
    for i in range(3 * steps):
        for lib in (("xform", "jax") if i % 2 else ("jax", "xform")):
            if lib == "xform":
                x, y = x_batches[i % steps]
                t0 = time.perf_counter()
                x_params, loss = x_step(x_params, x, y)
                loss.block_until_ready()
            else:
                x, y = j_batches[i % steps]
                t0 = time.perf_counter()
                j_params, loss = j_step(j_params, x, y)
                loss.block_until_ready()
            times[lib].append(time.perf_counter() - t0)
    return round(statistics.median(times["xform"]) / statistics.median(times["jax"]), 3)


if __name__ == "__main__":
    main()
