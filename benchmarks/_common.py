"""Helpers shared by the benchmark scripts (a helper module: its name starts with ``_``,
so run.py does not run it).

Every script takes ``--lib jax|xform`` and ``--quick`` and prints one JSON line.
``jax`` and ``xform`` go through the same code (``import <lib>``, ``import
<lib>.numpy as xnp``, then ``lib.jit``, ``lib.grad``, ``lib.vmap``, ...).
"""
import argparse
import gc
import importlib
import json
import os
import platform
import resource
import statistics
import time
from types import SimpleNamespace

import numpy as np


def parse_args(doc, extra=None):
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--lib", choices=["jax", "xform"], default="jax")
    p.add_argument("--quick", action="store_true", help="few repetitions (smoke test only)")
    if extra:
        extra(p)
    return p.parse_args()


def block(x):
    """Wait for every array in a pytree (dict/list/tuple) via .block_until_ready().

    Works for jax and xform arrays."""
    if hasattr(x, "block_until_ready"):
        x.block_until_ready()
    elif isinstance(x, dict):
        for v in x.values():
            block(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            block(v)
    return x


def load(args):
    """Return a namespace with JAX-style entry points for the chosen library."""
    mod = importlib.import_module(args.lib)
    xnp = importlib.import_module(args.lib + ".numpy")
    return SimpleNamespace(
        name=args.lib, mod=mod, np=xnp, version=getattr(mod, "__version__", "unknown"),
        jit=mod.jit, grad=mod.grad, value_and_grad=mod.value_and_grad, hessian=mod.hessian,
        vmap=lambda f, in_axes=0: mod.vmap(f, in_axes=in_axes),
        tree_map=mod.tree_util.tree_map, asarray=xnp.asarray, to_numpy=np.asarray,
        compiled=True)


class Samples(list):
    """Per-sample times in seconds, plus .faults_per_call (minor page faults per call:
    a high value means fresh memory was mapped in, a known source of bimodal timings)."""
    faults_per_call = 0.0


def _minflt():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def time_calls(fn, reps, inner=1, warmup=3):
    """Median-friendly timing: `reps` samples, each the mean of `inner` calls (seconds).
    fn must block on its result itself.  GC is off while timing, as in timeit."""
    for _ in range(warmup):
        fn()
    gc.collect()
    gc.disable()
    out = Samples()
    try:
        f0 = _minflt()
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            out.append((time.perf_counter() - t0) / inner)
        out.faults_per_call = round((_minflt() - f0) / (reps * inner), 1)
    finally:
        gc.enable()
    return out


def once(fn):
    """Wall time of a single call in seconds (and its result)."""
    t0 = time.perf_counter()
    r = fn()
    return time.perf_counter() - t0, r


def med(samples, scale):
    """Median of samples (seconds) in the given unit: scale 1e6 -> us, 1e3 -> ms."""
    return round(statistics.median(samples) * scale, 3)


def spread(samples, scale):
    """[p10, p90] of samples in the given unit, to show noise within one run."""
    q = np.percentile(samples, [10, 90]) * scale
    return [round(float(q[0]), 3), round(float(q[1]), 3)]


def emit(script, L, results, **extra):
    """Print the one JSON line this script produces."""
    line = {"script": script, "lib": L.name, "version": L.version, "compiled": L.compiled,
            "python": platform.python_version(), "nproc": os.cpu_count(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    line.update(extra)
    line.update(results)
    print(json.dumps(line), flush=True)


# ---- model code shared by the scripts; written with numpy-style ops on `xnp` only ----

def mlp_apply(xnp, p, x, n_layers):
    """ReLU MLP; p has w0,b0,...; returns logits."""
    for i in range(n_layers):
        x = x @ p[f"w{i}"] + p[f"b{i}"]
        if i < n_layers - 1:
            x = xnp.maximum(x, 0.0)
    return x


def softmax_xent(xnp, logits, onehot):
    """Mean softmax cross-entropy with one-hot labels (max-shifted log-sum-exp)."""
    m = xnp.max(logits, axis=-1, keepdims=True)
    lse = m + xnp.log(xnp.sum(xnp.exp(logits - m), axis=-1, keepdims=True))
    return -xnp.mean(xnp.sum(onehot * (logits - lse), axis=-1))


def mlp_init(rng, sizes):
    """He-initialised float32 numpy params {w0,b0,...}."""
    p = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        p[f"w{i}"] = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        p[f"b{i}"] = np.zeros(b, np.float32)
    return p
