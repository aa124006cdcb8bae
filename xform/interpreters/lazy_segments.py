"""Cutting a lazy graph: a tail of repeated equations runs in blocks, each block
one canonical segment, so every repetition hits one cached executable instead of
compiling ever-longer unrolled graphs; a graph with committed inputs off the default
device runs one part per device. See docs/architecture.md, "Lazy eager mode" and
"Placement"."""
import time

from xform import backend
from xform.core.config import config
from xform.interpreters.lazy_run import _metrics, build, execute, lookup, options, run_whole
from xform.interpreters.placement import incompatible


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


# ---- placement (interpreters/placement.py's rule, per recorded value) ----

def var_devices(g):
    """Per variable and per equation of ``g``, the device its committed inputs put it
    on, or None (uncommitted: the default device); an equation on two raises JAX's
    error (at the barrier: recording does not look at devices)."""
    in_dev = [backend.buffer_device(x._buf) if x._committed else None for x in g.inputs]
    var_dev, eqn_dev = [], []
    multi = g.multi
    for i, (prim, _, refs) in enumerate(g.keys):
        d, first = None, None
        for k, r in enumerate(refs):
            if type(r) is int:
                e = var_dev[r] if r >= 0 else in_dev[-r - 1]
                if e is not None and d is None:
                    d, first = e, k
                elif e is not None and e != d:
                    aval = lambda j: (g.arrays[refs[j]].aval if refs[j] >= 0 else  # noqa
                                      g.in_avals[-refs[j] - 1])
                    raise incompatible([(f"argument {first}", prim.name, aval(first), d),
                                        (f"argument {k}", prim.name, aval(k), e)])
        eqn_dev.append(d)
        var_dev.extend([d] * multi.get(i, 1))
    return var_dev, eqn_dev


def device_of(p):
    """The device pending value ``p`` will be computed on, without computing it (None
    where that is not known: its graph ran or is to raise)."""
    g = p.graph
    if g.closed:
        return None
    if g.devices is None or not g.arrays[p.var]._committed:
        return backend.default_device()
    if len(g.devices) == 1:
        return next(iter(g.devices))
    try:
        return var_devices(g)[0][p.var]
    except ValueError:
        return None


def run_by_device(g, out_vars):
    """Run graph ``g``, whose committed inputs are off the default device, as one
    program per device, as JAX ran each op: uncommitted values on the default device
    first, then each device's committed ones (their equations read values of the first
    part, never of another device's)."""
    var_dev, eqn_dev = var_devices(g)
    parts = {}
    for i, d in enumerate(eqn_dev):
        parts.setdefault(d, []).append(i)
    if len(parts) == 1:
        return run_whole(g, out_vars)
    g.tables()
    firsts = [0]
    for c in g.counts:
        firsts.append(firsts[-1] + c)
    shared = {r for d, eqns in parts.items() if d is not None for i in eqns
              for r in g.keys[i][2] if type(r) is int and r >= 0 and var_dev[r] is None}
    env = {}
    for d in sorted(parts, key=lambda d: d is not None):
        outs = [v for v in out_vars if var_dev[v] == d] + \
            (sorted(shared) if d is None else [])
        if outs or g.effects:
            _run_part(g, parts[d], firsts, outs, env)
    g.inputs = []
    g.in_index = {}
    return [env[v] for v in out_vars]


def _run_part(g, eqns, firsts, outs, env):
    """Run equations ``eqns`` (indices into ``g.keys``) as one program: its inputs
    are ``g``'s and values in ``env``, which gets the buffers of ``outs``."""
    t0 = time.perf_counter()
    local_of, ext, ext_refs, keys, counts, avals = {}, {}, [], [], [], []
    for i in eqns:
        prim, pkey, refs = g.keys[i]
        local = []
        for r in refs:
            if type(r) is not int:
                local.append(r)
            elif r >= 0 and r in local_of:
                local.append(local_of[r])
            else:
                if r not in ext:
                    ext[r] = len(ext_refs)
                    ext_refs.append(r)
                local.append(-ext[r] - 1)
        keys.append((prim, pkey, tuple(local)))
        counts.append(g.counts[i])
        for v in range(firsts[i], firsts[i + 1]):
            local_of[v] = len(avals)
            avals.append(g.var_avals[v])
    ext_avals = [g.var_avals[r] if r >= 0 else g.in_avals[-r - 1] for r in ext_refs]
    local_outs = [local_of[v] for v in outs]
    key = (tuple(keys), tuple(ext_avals), tuple(local_outs), (), config.jax_debug_nans,
           config.jax_debug_infs)
    exe = lookup(key, lambda: build(keys, counts, ext_avals, avals, local_outs), (), t0)
    bufs = [env[r] if r >= 0 else g.inputs[-r - 1]._buf for r in ext_refs]
    args = [None if r >= 0 else g.inputs[-r - 1] for r in ext_refs]  # (their placement)
    env.update(zip(outs, execute(exe, bufs, args)))
