"""Sixty-odd common eager calls on small arrays (elementwise, scalar operands, reductions
with axis/keepdims, indexing, .at[], reshapes and joins, dot/matmul/einsum, norm,
softmax, logsumexp, one_hot, where, clip, sort, cumsum, mean/var/std, argmax), functions
JAX runs through jitted inner helpers (logspace, interp, isin, roots, expn) and eager
control flow (while/fori/scan/cond, their bodies defined once).

Unlike the other scripts this one imports BOTH libraries in one process and times them
interleaved (xform call, jax call, next call, ...; the minimum of several rounds), so
that the per-call ratio is not skewed by a noisy neighbour; ``--lib`` picks whose times
the JSON line reports (the xform line adds the geometric mean of the xform/jax ratios,
the worst ratio and how many calls are over 1.0). Times are CPU time of the process
(see ``time_one``).
``python eager_calls.py --table`` prints the markdown table instead."""
import gc
import math
import sys
import time

import numpy as np
from _common import parse_args, emit, load


def calls(jnp, lax, nn, sp, x, y, m, n, v, i8, b):
    """name -> thunk; ``x``,``y`` f32[8], ``m``,``n`` f32[8, 8], ``v`` f32[8, 16],
    ``i8`` int32[8], ``b`` bool[8]; ``sp`` is scipy.special."""
    ax, xs = jnp.abs(x) + 0.1, jnp.sort(x)   # (made once: positive, sorted)

    def body(c):  # (loop bodies defined once, as a program's functions are)
        return c[0] + 1, c[1] * 0.5
    return {
        "sin": lambda: jnp.sin(x),
        "exp": lambda: jnp.exp(x),
        "tanh": lambda: jnp.tanh(x),
        "add": lambda: x + y,
        "mul_scalar": lambda: x * 2.0,
        "radd_int": lambda: 1 + x,
        "maximum_0": lambda: jnp.maximum(x, 0.0),
        "pow_2": lambda: x ** 2,
        "greater": lambda: x > y,
        "sum": lambda: jnp.sum(m),
        "sum_axis": lambda: jnp.sum(m, axis=0),
        "max_axis_keep": lambda: jnp.max(m, axis=1, keepdims=True),
        "mean": lambda: jnp.mean(m),
        "mean_axis": lambda: jnp.mean(m, axis=-1),
        "var": lambda: jnp.var(x),
        "std": lambda: jnp.std(m, axis=0),
        "argmax": lambda: jnp.argmax(x),
        "argmin_axis": lambda: jnp.argmin(m, axis=1),
        "cumsum": lambda: jnp.cumsum(x),
        "sort": lambda: jnp.sort(x),
        "index_int": lambda: m[2],
        "slice": lambda: x[1:5],
        "index_2d": lambda: m[1, 3],
        "index_array": lambda: x[i8],
        "at_set": lambda: x.at[3].set(0.0),
        "at_add": lambda: x.at[i8].add(1.0),
        "reshape": lambda: m.reshape(4, 16),
        "transpose": lambda: m.T,
        "concatenate": lambda: jnp.concatenate([x, y]),
        "stack": lambda: jnp.stack([x, y]),
        "expand_dims": lambda: jnp.expand_dims(x, 0),
        "dot": lambda: jnp.dot(x, y),
        "matmul_op": lambda: m @ n,
        "matmul_vec": lambda: jnp.matmul(m, x),
        "einsum": lambda: jnp.einsum("ij,jk->ik", m, v),
        "norm": lambda: jnp.linalg.norm(x),
        "softmax": lambda: nn.softmax(m),
        "log_softmax": lambda: nn.log_softmax(m),
        "logsumexp": lambda: nn.logsumexp(m, axis=-1),
        "relu": lambda: nn.relu(x),
        "gelu": lambda: nn.gelu(x),
        "silu": lambda: nn.silu(x),
        "one_hot": lambda: nn.one_hot(i8, 8),
        "where": lambda: jnp.where(b, x, y),
        "where_scalar": lambda: jnp.where(b, x, 0.0),
        "clip": lambda: jnp.clip(x, -1.0, 1.0),
        "abs": lambda: jnp.abs(x),
        "astype": lambda: x.astype(jnp.int32),
        "zeros_like": lambda: jnp.zeros_like(x),
        # (functions that ran primitive by primitive before issue 27's third sweep)
        "isclose": lambda: jnp.isclose(x, y),
        "round_1": lambda: jnp.round(x, 1),
        "logaddexp": lambda: jnp.logaddexp(x, y),
        "diff": lambda: jnp.diff(x),
        "median": lambda: jnp.median(x),
        "searchsorted": lambda: jnp.searchsorted(x, y),
        "triu": lambda: jnp.triu(m),
        "signbit": lambda: jnp.signbit(x),
        # (issue 27's fourth pass: jitted inner helpers, eager control flow)
        "nanargmax_axis": lambda: jnp.nanargmax(m, axis=1),
        "logspace": lambda: jnp.logspace(0.0, 2.0, 8),
        "interp": lambda: jnp.interp(y, xs, x),
        "isin": lambda: jnp.isin(i8, b),
        "roots": lambda: jnp.roots(x),
        "expn": lambda: sp.expn(3, ax),
        "while_loop": lambda: lax.while_loop(_below_4, body, (0, x))[1],
        "fori_loop": lambda: lax.fori_loop(0, 4, _scale, x),
        "scan": lambda: lax.scan(_cumulate, x, m)[0],
        "cond": lambda: lax.cond(True, jnp.sin, jnp.cos, x),
    }


def _below_4(c):
    return c[0] < 4


def _scale(i, c):
    return c * 0.5


def _cumulate(c, a):
    return c + a, c


def setup(lib):
    """The calls of library ``lib`` ('jax' or 'xform') on fresh arrays."""
    import importlib
    mod = importlib.import_module(lib)
    jnp, lax, nn, sp = (importlib.import_module(f"{lib}.{s}")
                        for s in ("numpy", "lax", "nn", "scipy.special"))
    r = np.random.default_rng(0)
    f = lambda *s: jnp.asarray(r.standard_normal(s).astype(np.float32))  # noqa: E731
    arrays = (f(8), f(8), f(8, 8), f(8, 8), f(8, 16),
              jnp.asarray(np.arange(8, dtype=np.int32)[::-1] % 8),
              jnp.asarray(np.arange(8) % 3 == 0))
    return mod, calls(jnp, lax, nn, sp, *arrays)


def time_one(fn, inner):
    """Seconds per call of ``fn``: the process's CPU time (all threads), not wall time,
    so that time the scheduler gives to other processes on a shared machine is not
    counted (a small eager call keeps its thread busy from dispatch to result)."""
    t0 = time.process_time()
    for _ in range(inner):
        out = fn()
    out.block_until_ready()
    return (time.process_time() - t0) / inner


def measure(rounds, inner):
    """{lib: {call: min seconds}} timing xform and jax interleaved call by call."""
    libs = {lib: setup(lib)[1] for lib in ("xform", "jax")}
    names = list(libs["xform"])
    for fns in libs.values():  # warm up: compile every call, check results agree
        for name in names:
            for _ in range(3):
                fns[name]().block_until_ready()
    best = {lib: dict.fromkeys(names, math.inf) for lib in libs}
    gc.collect()
    gc.disable()
    try:
        for rnd in range(rounds):
            order = ("xform", "jax") if rnd % 2 == 0 else ("jax", "xform")
            for name in names:
                for lib in order:
                    t = time_one(libs[lib][name], inner)
                    best[lib][name] = min(best[lib][name], t)
    finally:
        gc.enable()
    return best


def main():
    table = "--table" in sys.argv
    if table:
        sys.argv.remove("--table")
    args = parse_args(__doc__)
    rounds, inner = (3, 20) if args.quick else (15, 100)
    best = measure(rounds, inner)
    names = list(best["xform"])
    ratios = {n: best["xform"][n] / best["jax"][n] for n in names}
    geo = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
    if table:
        print("| call | jax us | xform us | xform/jax |\n|---|---|---|---|")
        for n in names:
            print(f"| `{n}` | {best['jax'][n] * 1e6:.2f} | {best['xform'][n] * 1e6:.2f} "
                  f"| {ratios[n]:.2f} |")
        print(f"| geometric mean | | | {geo:.2f} |")
        print(f"calls over 1.0x: {sum(r > 1.0 for r in ratios.values())}/{len(names)}")
        return
    L = load(args)
    res = {f"{n}_us": round(best[args.lib][n] * 1e6, 3) for n in names}
    if args.lib == "xform":  # over this process's interleaved pairs
        worst = max(ratios, key=ratios.get)
        res.update(geomean_ratio=round(geo, 3), worst_ratio=round(ratios[worst], 3),
                   worst_call=worst, calls_over_1=sum(r > 1.0 for r in ratios.values()))
    emit("eager_calls", L, res, n=len(names))


if __name__ == "__main__":
    main()
