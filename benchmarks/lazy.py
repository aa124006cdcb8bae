"""Lazy eager mode (issue 14) side by side with JAX eager and jit; prints one JSON line.

usage: python benchmarks/lazy.py --lib xform|jax [--quick]

Metrics (times per iteration/step, best of a few repeats):
- ``chain_*_us``: a 100-op elementwise chain on f32[1000] (``CHAIN``: arithmetic with
  a Python scalar, and every fifth op transcendental: sin or tanh) whose result is read
  back to NumPy; xform records it in lazy mode (the read is the barrier), jax runs it
  eagerly (one dispatch per op) and jitted. ``chain_tanh33_*``: the same with every third
  op a tanh (``eager_chain.py``'s mix), whose XLA run alone is ~10x longer.
  ``chain_*_vs_jax_eager`` (xform): JAX eager time / lazy time measured interleaved in
  the one process (min over rounds), with ``*_spread`` = [worst, best] round ratio.
- ``mlp_*_ms``: an MLP training step (grad + SGD update written in Python); xform in
  lazy mode with ``mark_step()`` per step and jitted, jax eager and jitted.
- ``loop40k_s`` / ``loop40k_rss_mb``: 40,000 ops without a barrier (xform: lazy,
  cut and run in repeated blocks; jax: eager), wall time and peak RSS growth.
- ``scalar_steps_*`` (xform): 20 steps differing only in a Python scalar: compiles and
  cache hits.
Targets: lazy chain >= 5x faster than jax eager; lazy MLP step within 2x of the jitted
step; 40k loop < 30 s.
"""
import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def best_ms(fn, number, repeat=5):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e3


CHAIN = "amsanamsat"      # per 10 ops: a +0.5, m *0.9, s -0.25, n sin, t tanh
TANH33 = "amt"


def chain(xnp, x, pattern=CHAIN, n=100):
    ops = {"a": lambda v: v + 0.5, "m": lambda v: v * 0.9, "s": lambda v: v - 0.25,
           "n": xnp.sin, "t": xnp.tanh}
    for i in range(n):
        x = ops[pattern[i % len(pattern)]](x)
    return x


def interleaved(fns, rounds, number):
    """{name: [per-call seconds of each round]}, the functions alternating each round."""
    out = {k: [] for k in fns}
    for r in range(rounds):
        for k, f in (fns.items() if r % 2 else reversed(fns.items())):
            f()
            t0 = time.perf_counter()
            for _ in range(number):
                f()
            out[k].append((time.perf_counter() - t0) / number)
    return out


def mlp_setup(jnp, np, sizes=(64, 256, 256, 10), batch=128):
    rng = np.random.RandomState(0)
    params = [(jnp.asarray(rng.randn(m, n).astype(np.float32) / np.sqrt(m)),
               jnp.zeros(n, jnp.float32)) for m, n in zip(sizes[:-1], sizes[1:])]
    x = jnp.asarray(rng.randn(batch, sizes[0]).astype(np.float32))
    y = jnp.asarray(rng.randn(batch, sizes[-1]).astype(np.float32))
    return params, x, y


def make_step(lib, jnp):
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    def step(params, x, y, lr=0.01):
        grads = lib.grad(loss)(params, x, y)
        return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)]
    return step


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", choices=["jax", "xform"], required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    import numpy as np
    if args.lib == "jax":
        import jax as lib
        import jax.numpy as jnp
    else:
        import xform as lib
        import xform.numpy as jnp
    q = args.quick
    out = {"script": "lazy", "lib": args.lib}
    x = jnp.asarray(np.linspace(-2, 2, 1000, dtype=np.float32))
    for tag, pattern in (("chain", CHAIN), ("chain_tanh33", TANH33)):
        jchain = lib.jit(lambda v, pattern=pattern: chain(jnp, v, pattern))
        out[f"{tag}_jit_us"] = best_ms(lambda: np.asarray(jchain(x)), 50) * 1e3
    step = make_step(lib, jnp)
    params, xb, yb = mlp_setup(jnp, np)
    jstep = lib.jit(step)
    steps = 5 if q else 20

    def run_jit():
        ps = params
        for _ in range(steps):
            ps = jstep(ps, xb, yb)
        ps[0][0].block_until_ready()
        return ps
    out["mlp_jit_ms"] = best_ms(run_jit, 1, 3 if q else 5) / steps
    n40k = 4000 if q else 40000

    if args.lib == "jax":
        for tag, pattern in (("chain", CHAIN), ("chain_tanh33", TANH33)):
            out[f"{tag}_eager_us"] = best_ms(lambda: np.asarray(chain(jnp, x, pattern)),
                                             5 if q else 20) * 1e3

        def run_eager():
            ps = params
            for _ in range(steps):
                ps = step(ps, xb, yb)
            ps[0][0].block_until_ready()
        out["mlp_eager_ms"] = best_ms(run_eager, 1, 3) / steps
        r0, t0 = rss_mb(), time.perf_counter()
        y = x
        for _ in range(n40k // 2):
            y = y * 0.9999 + 0.0001
        y.block_until_ready()
    else:
        L = lib.lazy

        import jax
        import jax.numpy as jjnp
        xj = jjnp.asarray(np.asarray(x))
        for tag, pattern in (("chain", CHAIN), ("chain_tanh33", TANH33)):
            def lazy_chain(pattern=pattern):
                with lib.lazy():
                    return np.asarray(chain(jnp, x, pattern))  # the read is the barrier
            want = np.asarray(chain(jjnp, xj, pattern))
            np.testing.assert_allclose(lazy_chain(), want, rtol=2e-5, atol=2e-5)
            out[f"{tag}_lazy_us"] = best_ms(lazy_chain, 20 if q else 100) * 1e3
            t = interleaved({"lazy": lazy_chain,
                             "jax": lambda: np.asarray(chain(jjnp, xj, pattern))},
                            3 if q else 15, 5 if q else 20)
            ratios = [j / lz for j, lz in zip(t["jax"], t["lazy"])]
            out[f"{tag}_vs_jax_eager"] = round(min(t["jax"]) / min(t["lazy"]), 2)
            out[f"{tag}_vs_jax_eager_spread"] = [round(min(ratios), 2), round(max(ratios), 2)]
        del jax

        def run_lazy():
            ps = params
            with lib.lazy():
                for _ in range(steps):
                    ps = step(ps, xb, yb)
                    lib.mark_step()
            return ps
        out["mlp_lazy_ms"] = best_ms(run_lazy, 1, 3 if q else 5) / steps
        ref, got = run_jit(), run_lazy()
        out["mlp_max_abs_diff"] = float(max(np.abs(np.asarray(a) - np.asarray(b)).max()
                                            for pa, pb in zip(ref, got)
                                            for a, b in zip(pa, pb)))
        with lib.lazy():
            w = jnp.ones(10) * 2.0
            lib.mark_step()  # w: made by a lazy program, so its buffer may be donated
            L.reset_metrics()
            for i in range(20):
                w = w - (0.1 + 0.01 * i) * w
                lib.mark_step()
        m = L.metrics()
        out["scalar_steps_compiles"] = m["graphs_compiled"]
        out["scalar_steps_cache_hits"] = m["cache_hits"]
        L.reset_metrics()
        r0, t0 = rss_mb(), time.perf_counter()
        y = x
        with lib.lazy():
            for _ in range(n40k // 2):
                y = y * 0.9999 + 0.0001
        y.block_until_ready()
        m = L.metrics()
        out["loop40k_compiles"] = m["graphs_compiled"]
        out["loop40k_cuts"] = m["graph_cuts"]
    out["loop40k_s"] = time.perf_counter() - t0
    out["loop40k_rss_mb"] = rss_mb() - r0
    if args.lib == "xform":
        out["mlp_lazy_over_jit"] = out["mlp_lazy_ms"] / out["mlp_jit_ms"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
