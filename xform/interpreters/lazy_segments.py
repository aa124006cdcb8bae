"""Cutting a long lazy graph: a tail of repeated equations runs in blocks, each block
one canonical segment, so every repetition hits one cached executable instead of
compiling ever-longer unrolled graphs. See docs/architecture.md, "Lazy eager mode"."""
import time

from xform.core.config import config
from xform.interpreters.lazy_run import _metrics, build, execute, lookup, options


def _shift_keys(g):
    """Equation keys with variable references as distances back (shift-invariant)."""
    out = []
    v = 0
    for (prim, pkey, refs), n in zip(g.keys, g.counts):
        out.append((prim, pkey, n, tuple(v - r if type(r) is int and r >= 0 else r
                                          for r in refs)))
        v += n
    return out


def find_period(keys, max_tries=8):
    """(period, start) when ``keys[start:]`` repeats with ``period`` at least twice
    and ends on a whole block, else None."""
    n = len(keys)
    last = keys[-1]
    tries = 0
    for j in range(n - 2, n // 2 - 2, -1):
        if j < 0 or keys[j] != last:
            continue
        p = n - 1 - j
        if keys[n - 2 * p:n - p] == keys[n - p:]:
            s = n - 2 * p
            while s > 0 and keys[s - 1] == keys[s - 1 + p]:
                s -= 1
            return p, s
        tries += 1
        if tries >= max_tries:
            break
    return None


def run_segments(g, out_vars):
    """Run a cut graph in segments: a prefix, blocks of whole periods (one executable
    for all of them) and a remainder. Values flow between segments as buffers."""
    _metrics["graph_cuts"] += 1
    g.tables()
    n = len(g.keys)
    found = find_period(_shift_keys(g))
    bounds = [0]
    if found is not None:
        p, s = found
        length = p * max(1, options["block_size"] // p)
        if s:
            bounds.append(s)
        k = s + length
        while k <= n:
            bounds.append(k)
            k += length
        _metrics["repeated_blocks"] += (n - s) // length
    if bounds[-1] != n:
        bounds.append(n)
    firsts = [0]
    for c in g.counts:
        firsts.append(firsts[-1] + c)
    last_use = [-1] * len(g.var_avals)
    for i, (_, _, refs) in enumerate(g.keys):
        for r in refs:
            if type(r) is int and r >= 0:
                last_use[r] = i
    wanted = set(out_vars)
    env = {}
    for a, b in zip(bounds, bounds[1:]):
        _run_segment(g, a, b, firsts, last_use, wanted, env)
    g.inputs = []
    g.in_index = {}
    return [env[v] for v in out_vars]


def _run_segment(g, a, b, firsts, last_use, wanted, env):
    t0 = time.perf_counter()
    base, end = firsts[a], firsts[b]
    ext = {}
    ext_refs = []
    keys = []
    for prim, pkey, refs in g.keys[a:b]:
        local = []
        for r in refs:
            if type(r) is int and r < base:
                k = ext.get(r)
                if k is None:
                    k = ext[r] = len(ext_refs)
                    ext_refs.append(r)
                local.append(-k - 1)
            else:
                local.append(r - base if type(r) is int else r)
        keys.append((prim, pkey, tuple(local)))
    outs = [v for v in range(base, end) if last_use[v] >= b or v in wanted]
    ext_avals = [g.var_avals[r] if r >= 0 else g.in_avals[-r - 1] for r in ext_refs]
    local_outs = [v - base for v in outs]
    key = (tuple(keys), tuple(ext_avals), tuple(local_outs), (), config.jax_debug_nans,
           config.jax_debug_infs)
    exe = lookup(key, lambda: build(keys, g.counts[a:b], ext_avals,
                                      g.var_avals[base:end], local_outs), (), t0)
    bufs = [env[r] if r >= 0 else g.inputs[-r - 1]._buf for r in ext_refs]
    for v, buf in zip(outs, execute(exe, bufs)):
        env[v] = buf
    for r in ext_refs:  # free buffers no later segment reads
        if r >= 0 and last_use[r] < b and r not in wanted:
            env.pop(r, None)
