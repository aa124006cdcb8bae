"""Lazy mode's running half: a recorded graph's executable (looked up by its canonical
key, or built as a jaxpr and compiled through the one compile path,
``dispatch.CompiledJaxpr``, with donation), running it, and the counters
``xform.lazy.metrics`` reports. The recording half is ``interpreters/lazy.py``; cut
graphs run in segments (``lazy_segments.py``) through the same functions."""
import sys
import time
import weakref

import numpy as np

from xform import backend
from xform.core.array import Array
from xform.core.avals import aval_of_value
from xform.core.config import config
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from xform.core.profiling import span
from xform.interpreters import dispatch, partial_eval as pe
from xform.interpreters.placement import run_elsewhere

_getrefcount = sys.getrefcount

options = {"max_graph_size": 10_000, "block_size": 512, "donate": True,
           "cache_size": 512, "record_jit": False}


def _zero_metrics():
    return {"graphs_compiled": 0, "cache_hits": 0, "ops_recorded": 0,
            "barriers": {}, "programs_executed": 0, "graph_cuts": 0,
            "repeated_blocks": 0, "donated_buffers": 0,
            "trace_ms": 0.0, "compile_ms": 0.0, "execute_ms": 0.0}


_metrics = _zero_metrics()


def count_barrier(reason):
    counts = _metrics["barriers"]
    counts[reason] = counts.get(reason, 0) + 1


_cache = {}
_produced = {}  # id(buffer) -> weakref: buffers lazy programs computed (donatable)


def _mark_produced(buf):
    key = id(buf)
    _produced[key] = weakref.ref(buf, lambda _, k=key: _produced.pop(k, None))


def _was_produced(buf):
    ref = _produced.get(id(buf))
    return ref is not None and ref() is buf


def _holders(lst, i):
    """sys.getrefcount of ``lst[i]`` and of its buffer, as _donations reads them."""
    x = lst[i]
    buf = x._buf
    return _getrefcount(x), _getrefcount(buf)


_HOLDERS = None


def _holders_base():
    # Calibrated, not assumed: an Array only a list holds, with a fresh buffer.
    global _HOLDERS
    if _HOLDERS is None:
        probe = [Array(backend.device_put(np.zeros(1, np.float32)), aval_of_value(
            np.zeros(1, np.float32)))]
        _HOLDERS = _holders(probe, 0)
    return _HOLDERS


def _donations(g, out_vars):
    """Per input, whether the program may write an output into its buffer (XLA's
    input/output aliasing; ``mlir.input_output_aliases`` pairs it with the first free
    output of its shape and dtype), or () for none: inputs whose Array and buffer
    nothing else references, made by a lazy program, never fetched to the host, with
    an output of the same shape and dtype."""
    if not options["donate"] or config.jax_debug_nans or config.jax_debug_infs:
        return ()
    free = {}
    for v in out_vars:
        a = g.arrays[v].aval
        key = (a.shape, a.dtype)
        free[key] = free.get(key, 0) + 1
    mask = [False] * len(g.inputs)
    inputs = g.inputs
    base = _holders_base()
    for i in range(len(inputs)):
        if type(inputs[i]) is not Array or _holders(inputs, i) != base:
            continue
        x = inputs[i]
        if x._npy is not None or not _was_produced(x._buf):
            continue
        key = (x.aval.shape, x.aval.dtype)
        if free.get(key):
            free[key] -= 1
            mask[i] = True
    return tuple(mask) if any(mask) else ()


def run_whole(g, out_vars):
    """Run graph ``g`` as one program; returns the buffers of ``out_vars``."""
    t0 = time.perf_counter()
    donated = _donations(g, out_vars) if g.inputs else ()
    key = (tuple(g.keys), tuple(g.in_avals), tuple(out_vars), donated,
           config.jax_debug_nans, config.jax_debug_infs)
    def build_whole():
        counts, var_avals = g.tables()
        return build(g.keys, counts, g.in_avals, var_avals, out_vars)
    exe = lookup(key, build_whole, donated, t0)
    inputs = g.inputs
    bufs = [x._buf for x in inputs]
    _metrics["donated_buffers"] += sum(donated)
    g.inputs = []
    g.in_index = {}
    return execute(exe, bufs, inputs)


def lookup(key, build_fn, donated, t0):
    """The executable cached under ``key``, or ``build_fn()``'s jaxpr compiled."""
    try:
        exe = _cache.get(key)
    except TypeError:  # an unhashable param: compile without caching
        key, exe = None, None
    if exe is not None:
        _metrics["cache_hits"] += 1
        _metrics["trace_ms"] += (time.perf_counter() - t0) * 1e3
        return exe
    with span("xform.lazy.build", ops=len(key[0]) if key else 0):
        closed = build_fn()
    t1 = time.perf_counter()
    _metrics["trace_ms"] += (t1 - t0) * 1e3
    exe = dispatch.CompiledJaxpr(closed, name="a lazy graph", donated=donated or None,
                                 skip_passes=_UNSPLIT if _small(closed) else "")
    _metrics["compile_ms"] += (time.perf_counter() - t1) * 1e3
    _metrics["graphs_compiled"] += 1
    if key is not None:
        if len(_cache) >= options["cache_size"]:
            _cache.pop(next(iter(_cache)))
        _cache[key] = exe
    return exe


# A graph whose values all have at most this many elements compiles without XLA:CPU's
# parallel task assigner: PJRT runs a program with a small entry computation on the
# caller's thread, and a fused loop split into pool tasks then waits for the pool's
# threads (on a busy machine, for a core). The loop is the work of many small eager ops,
# each of which XLA would run unsplit (100-op chain on f32[1000], 2-core VM under load:
# 66-104 -> 62-63 us; 45 us split on idle cores). Larger arrays keep XLA's split.
INLINE_UP_TO = 1 << 12
_UNSPLIT = "cpu-parallel-task-assigner"


def _small(closed):
    if backend.platform() != "cpu":
        return False
    j = closed.jaxpr
    return all(v.aval.size <= INLINE_UP_TO for v in j.invars) and all(
        v.aval.size <= INLINE_UP_TO for e in j.eqns for v in e.outvars)


def execute(exe, bufs, args=()):
    t0 = time.perf_counter()
    with span("xform.lazy.execute"):
        try:
            outs = exe.execute(bufs)
        except Exception as e:
            outs = run_elsewhere(exe, bufs, args, "a lazy graph", e)
    _metrics["programs_executed"] += 1
    _metrics["execute_ms"] += (time.perf_counter() - t0) * 1e3
    for b in outs:
        _mark_produced(b)
    return outs


def build(keys, counts, in_avals, var_avals, out_vars):
    """The ClosedJaxpr of canonical equations ``keys``, returning ``out_vars``; DCE
    drops equations whose results no output needs (unless they have effects)."""
    invars = [Var(a) for a in in_avals]
    vs = [Var(a) for a in var_avals]
    eqns = []
    v = 0
    for (prim, pkey, refs), n in zip(keys, counts):
        ins = [(vs[r] if r >= 0 else invars[-r - 1]) if type(r) is int else Literal(*r)
               for r in refs]
        eqns.append(JaxprEqn(ins, vs[v:v + n], prim, dict(pkey)))
        v += n
    jaxpr, _ = pe.dce_jaxpr(Jaxpr([], invars, [vs[i] for i in out_vars], eqns))
    return ClosedJaxpr(jaxpr, [])


# ---- metrics ----

def metrics():
    m = dict(_metrics)
    m["barriers"] = dict(_metrics["barriers"])
    m["cache_size"] = len(_cache)
    return m


def reset_metrics():
    _metrics.clear()
    _metrics.update(_zero_metrics())


def clear_cache():
    _cache.clear()
