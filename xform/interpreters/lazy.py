"""The lazy (LazyTensor) interpreter: eager primitives recorded into a jaxpr, run at barriers.

While lazy mode is on, :class:`LazyTrace` is the bottom trace: it hands each primitive
to :func:`record`, which runs its abstract evaluation at once (so shape errors point at
the user's line) and appends one equation to the thread's pending graph; the result is
an Array whose buffer is pending. A *barrier* (:func:`barrier`) computes every live
pending array with one compiled program: the graph's equations, renumbered canonically
(inputs and variables by first appearance, Python scalars other than 0 and 1 as
inputs), are the cache key, so the same sequence of operations on the same avals reuses
one executable whatever the values are. Arrays nothing references any more are dead:
DCE drops the equations only they needed. A graph that reaches ``max_graph_size``
equations is cut; when its tail repeats a block of equations, the block is compiled
once and run as many times as it repeats. See docs/architecture.md, "Lazy eager mode".
"""
import sys
import threading
import time
import weakref

from xform import backend
from xform.core import dtypes, transfer
from xform.core.array import Array
from xform.core.avals import aval_of_value
from xform.core.config import config
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from xform.core.profiling import span
from xform.core.trace import Trace, _context, check_not_tracer, eval_trace, set_current_trace

_getrefcount = sys.getrefcount

options = {"max_graph_size": 10_000, "block_size": 512, "donate": True,
           "cache_size": 512, "record_jit": False}


def _zero_metrics():
    return {"graphs_compiled": 0, "cache_hits": 0, "ops_recorded": 0,
            "barriers": {}, "programs_executed": 0, "graph_cuts": 0,
            "repeated_blocks": 0, "donated_buffers": 0,
            "trace_ms": 0.0, "compile_ms": 0.0, "execute_ms": 0.0}


_metrics = _zero_metrics()


def _count_barrier(reason):
    counts = _metrics["barriers"]
    counts[reason] = counts.get(reason, 0) + 1


class _Thread(threading.local):
    def __init__(self):
        self.depth = 0       # nesting of ``with lazy()`` blocks in this thread
        self.saved = []      # the traces lazy() blocks replaced
        self.graph = None    # the pending graph (made on the first recorded op)


_tls = _Thread()


def enter():
    """Start recording in this thread (nested blocks and blocks entered under a
    transformation change nothing)."""
    st = _tls
    cur = _context.trace
    st.saved.append(cur)
    st.depth += 1
    if cur is eval_trace:
        _context.trace = LazyTrace()


def exit_(failed=False):
    st = _tls
    prev = st.saved.pop()
    st.depth -= 1
    if type(_context.trace) is LazyTrace and prev is eval_trace:
        if config.xform_lazy and not st.depth:
            return  # the global flag keeps recording
        _context.trace = prev
        if failed:  # don't mask the block's own exception with a barrier's
            try:
                barrier("exit")
            except Exception:
                pass
        else:
            barrier("exit")


def _on_flag(name, value):
    if name != "xform_lazy":
        return
    if value and _context.trace is eval_trace:
        _context.trace = LazyTrace()
    elif not value and type(_context.trace) is LazyTrace and not _tls.depth:
        _context.trace = eval_trace
        barrier("exit")


config._add_listener(_on_flag)


# ---- lazy arrays ----
# A lazy array is a plain ``Array`` whose buffer slot holds a ``_Pending``: the variable
# of the graph that computes it. Every Array fast path (``type(x) is Array``) still sees
# an Array; the few Array methods that read the buffer reach ``_Pending``'s methods,
# which run the barrier. A barrier writes the computed buffer into the slot of every
# live array, so after it no ``_Pending`` is left where a program could meet it.

class _Pending:
    """Stands in for a device buffer until a barrier computes it (duck-typed: the
    methods Array calls on its buffer run the barrier first)."""
    __slots__ = ("graph", "var", "real")

    def __init__(self, graph, var):
        self.graph = graph
        self.var = var
        self.real = None

    def _get(self, reason=None):
        if self.real is None:
            _force(self, reason or _reason_from_caller())
        return self.real

    def __array__(self, dtype=None, copy=None):
        import numpy as np
        return np.asarray(self._get(), dtype=dtype)

    def block_until_ready(self):
        return self._get("block_until_ready").block_until_ready()

    def devices(self):
        return {backend.default_device()} if self.real is None else self.real.devices()

    def __dlpack__(self, **kwargs):
        return self._get("device_buffer").__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._get("device_buffer").__dlpack_device__()

    def is_deleted(self):
        return False if self.real is None else self.real.is_deleted()

    def __repr__(self):
        return f"<pending lazy value {self.var}>"


# Array methods that read a value, by the reason their barrier is counted under.
_CALLER_REASONS = {"__array__": "asarray", "__float__": "float", "__int__": "int",
                   "__index__": "int", "__bool__": "bool", "__complex__": "complex",
                   "item": "item", "tolist": "tolist", "__repr__": "repr",
                   "__str__": "repr", "__format__": "repr", "__iter__": "iter",
                   "__reduce__": "asarray"}


def _reason_from_caller():
    f = sys._getframe(3)  # past _reason_from_caller, _get and _Pending's method
    for _ in range(6):
        if f is None:
            break
        r = _CALLER_REASONS.get(f.f_code.co_name)
        if r is not None:
            return r
        f = f.f_back
    return "asarray"


def is_pending(x) -> bool:
    """Whether ``x`` is an Array whose value a barrier has not computed yet."""
    return type(x) is Array and type(x._buf) is _Pending and x._buf.real is None


def _force(p, reason):
    """Compute pending value ``p`` (and, for consistency, every live array of its
    graph)."""
    graph = p.graph
    if graph.error is not None:
        raise RuntimeError("This lazy array's computation failed at an earlier barrier "
                           f"({type(graph.error).__name__}: {graph.error})") from graph.error
    if graph is _tls.graph:
        barrier(reason)
    else:  # recorded by another thread, or its graph was cut meanwhile
        _count_barrier(reason)
        _run_graph(graph)
    if p.real is None:
        raise RuntimeError("internal error: a live lazy array was not computed by its "
                           "barrier; please report it")


def concrete(x, reason="device_buffer"):
    """``x``, with its buffer computed first if it is a pending lazy Array."""
    if type(x) is Array:
        b = x._buf
        if type(b) is _Pending:
            x._buf = b._get(reason)
    return x


# ---- recording ----

class _Graph:
    """Equations recorded since the last barrier. Variables are numbered 0, 1, ... in
    order of definition; inputs are -1, -2, ... in order of first use; literals are
    ``(value, aval)`` tuples. ``keys[i]`` is equation i in that canonical numbering."""
    __slots__ = ("eqns", "keys", "counts", "inputs", "in_avals", "in_index",
                 "var_avals", "arrays", "error", "effects", "closed")

    def __init__(self):
        self.keys = []       # (prim, params key, refs) per equation
        self.counts = []     # number of outputs per equation
        self.inputs = []     # concrete Arrays, by input number
        self.in_avals = []
        self.in_index = {}   # id(Array) -> input number
        self.var_avals = []
        self.arrays = []     # every lazy Array made (liveness is read from refcounts)
        self.error = None
        self.effects = False
        self.closed = False  # run already (by a barrier, maybe from another thread)


def _is_literal(x):
    # The paper's heuristic: 0 and 1 are baked into the program (XLA folds them);
    # other Python scalars become inputs, so a changing learning rate does not
    # recompile. -0.0 is not 0.0 here.
    return (x == 0 or x == 1) and not (type(x) is float and str(x)[0] == "-")


def _input(g, x):
    i = g.in_index.get(id(x))
    if i is None:
        g.inputs.append(x)
        g.in_avals.append(x.aval)
        i = g.in_index[id(x)] = len(g.inputs)
    return -i


_kinds = {}
_INLINE = frozenset({"custom_jvp_call", "custom_vjp_call", "remat", "name",
                     "custom_lin"})
_BARRIER_REASONS = {"jit": "jit", "debug_callback": "host_callback",
                    "pure_callback": "host_callback", "io_callback": "host_callback"}


def _kind(prim):
    """How lazy mode handles ``prim``: "record" (its eager impl is its lowering),
    "structural" (the same, with jaxpr params canonicalized), "inline" (its impl
    evaluates a jaxpr: the equations inside are recorded) or a barrier reason."""
    import functools
    from xform.interpreters import dispatch
    impl = prim.impl
    if (isinstance(impl, functools.partial) and impl.func is dispatch.apply_primitive
            or getattr(impl, "same_as_lowering", False)):
        kind = "record"
    elif getattr(impl, "__qualname__", "").startswith("def_structural_impl"):
        kind = "structural"
    elif prim.name in _INLINE:
        kind = "inline"
    else:
        kind = _BARRIER_REASONS.get(prim.name, "pmap" if "pmap" in prim.name else "eager")
    _kinds[prim] = kind
    return kind


class LazyTrace(Trace):
    """The bottom trace in lazy mode: records primitives instead of running them."""
    __slots__ = ()

    def process_primitive(self, prim, args, params):
        kind = _kinds.get(prim) or _kind(prim)
        if kind == "record":
            return record(prim, args, params)
        if kind == "structural":
            from xform.interpreters import dispatch
            params = {k: (dispatch._canonical(v) if isinstance(v, ClosedJaxpr) else
                          tuple(dispatch._canonical(j) for j in v)
                          if isinstance(v, tuple) and v and isinstance(v[0], ClosedJaxpr)
                          else v) for k, v in params.items()}
            return record(prim, args, params)
        if kind == "inline":
            return prim.impl(*args, **params)
        if kind == "jit" and options["record_jit"]:  # a call equation in the graph
            return record(prim, args, params)
        # Needs values: a barrier, then run eagerly.
        if any(type(x) is Array and type(x._buf) is _Pending for x in args):
            args = [concrete(x, kind) for x in args]
        with set_current_trace(eval_trace):
            return prim.impl(*args, **params)


_avals_cache = {}  # (prim, in avals, params key) -> abstract evaluation


def record(prim, args, params):
    """Record ``prim`` applied to ``args`` in this thread's graph; returns its lazy
    result(s). Abstract evaluation runs now, so errors are raised at the operation."""
    g = _tls.graph
    if g is None or g.closed:
        g = _tls.graph = _Graph()
    refs = []
    avals = []
    for x in args:
        if type(x) is Array:
            b = x._buf
            if type(b) is _Pending:
                if b.graph is g and b.real is None:
                    refs.append(b.var)
                    avals.append(x.aval)
                    continue
                x._buf = b._get("other_thread")
            i = g.in_index.get(id(x))
            refs.append(-i if i is not None else _input(g, x))
            avals.append(x.aval)
        elif getattr(x, "dtype", None) == dtypes.float0:
            return _float0_eager(prim, args, params)
        else:
            refs.append(_operand(g, prim, x, avals))
    pkey = tuple(params.items()) if params else ()
    akey = (prim, tuple(avals), pkey)
    try:
        hit = _avals_cache.get(akey)
    except TypeError:  # unhashable params
        akey = hit = None
    if hit is None:
        out = prim.abstract_eval(*avals, **params)  # errors are raised here, at the op
        effects = bool(params) and _maybe_effects(prim, params)
        if any(a.dtype == dtypes.float0 for a in (out if prim.multiple_results else [out])):
            effects = "float0"  # (not an effect: such an op runs eagerly, below)
        if akey is not None and len(_avals_cache) < 65536:
            _avals_cache[akey] = (out, effects)
    else:
        out, effects = hit
    if effects == "float0":
        return _float0_eager(prim, args, params)
    var = len(g.var_avals)
    if prim.multiple_results:
        result = [Array(_Pending(g, var + i), a) for i, a in enumerate(out)]
        g.var_avals.extend(out)
        g.arrays.extend(result)
        g.counts.append(len(result))
    else:
        result = Array(_Pending(g, var), out)
        g.var_avals.append(out)
        g.arrays.append(result)
        g.counts.append(1)
    g.keys.append((prim, pkey, tuple(refs)))
    _metrics["ops_recorded"] += 1
    if effects:  # a host callback inside (a scan printing): run now, in program order
        g.effects = True
        barrier("host_callback")
    elif len(g.keys) >= options["max_graph_size"]:
        barrier("size_limit")
    elif config.jax_debug_nans or config.jax_debug_infs:  # NaNs/infs are raised at the op
        # that made them, as eagerly
        barrier("debug_nans")
    return result


def _operand(g, prim, x, avals):
    """The reference to a non-Array operand (a literal or a new input)."""
    from xform.interpreters import dispatch
    t = type(x)
    if t is float or t is int or t is bool:
        aval = aval_of_value(x)
        avals.append(aval)
        if _is_literal(x):
            return (x, aval)
        return _input(g, transfer.scalar_array(x, aval.dtype, aval.weak_type))
    check_not_tracer(x, f" (it reached primitive '{prim.name}' in lazy mode outside "
                        "its transformation)")
    x = transfer.device_put_value(x)
    avals.append(x.aval)
    return _input(g, x)


def _float0_eager(prim, args, params):
    """float0 values (int tangents, all zeros) stay on the host, out of the graph: an
    op on or making one runs eagerly, after its pending operands (see dispatch.results)."""
    if any(type(x) is Array and type(x._buf) is _Pending for x in args):
        args = [concrete(x, "float0") for x in args]
    with set_current_trace(eval_trace):
        return prim.impl(*args, **params)


def _maybe_effects(prim, params):
    from xform.interpreters import partial_eval as pe
    return pe.has_effects(JaxprEqn([], [], prim, params))


# ---- barriers ----

def _live_base():
    # What sys.getrefcount reports for an array only the graph's list holds, as
    # _live_mask counts it (calibrated, not assumed).
    class _Probe:
        pass
    return _live_counts([_Probe()])[0]


def _live_counts(arrays):
    return [_getrefcount(a) for a in arrays]


_BASE = _live_base()


def barrier(reason):
    """Compute every live pending array of this thread's graph with one program;
    returns their buffers."""
    _count_barrier(reason)
    g = _tls.graph
    if g is None:
        return []
    _tls.graph = None
    return _run_graph(g, cut=reason == "size_limit")


def _run_graph(g, cut=False):
    if g.closed or not g.keys:
        return []
    g.closed = True
    arrays = g.arrays
    counts = _live_counts(arrays)
    out_arrays = [arrays[i] for i, c in enumerate(counts) if c > _BASE]
    g.arrays = []
    del arrays, counts
    out_vars = [a._buf.var for a in out_arrays]
    if not out_vars and not g.effects:
        return []  # everything recorded is dead
    try:
        with set_current_trace(eval_trace):  # anything run inside (NaN reruns) is eager
            if cut and len(g.keys) >= 2 * options["block_size"]:
                from xform.interpreters.lazy_segments import run_segments
                bufs = run_segments(g, out_vars)
            else:
                bufs = _run_whole(g, out_vars)
    except BaseException as e:
        g.error = e
        raise
    for a, b in zip(out_arrays, bufs):
        a._buf.real = b
        a._buf = b
    return bufs


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
        import numpy as np
        probe = [Array(backend.device_put(np.zeros(1, np.float32)), aval_of_value(
            np.zeros(1, np.float32)))]
        _HOLDERS = _holders(probe, 0)
    return _HOLDERS


def _donations(g, out_vars):
    """Pairs (input number, output position): inputs whose Array and buffer nothing
    else references, made by a lazy program, never fetched to the host, matched with
    an output of the same shape and dtype. The program may write the output into the
    input's buffer (XLA's input/output aliasing)."""
    if not options["donate"] or config.jax_debug_nans or config.jax_debug_infs:
        return ()
    free = {}
    for pos, v in enumerate(out_vars):
        a = g.var_avals[v]
        free.setdefault((a.shape, a.dtype), []).append(pos)
    pairs = []
    inputs = g.inputs
    base = _holders_base()
    for i in range(len(inputs)):
        if type(inputs[i]) is not Array or _holders(inputs, i) != base:
            continue
        x = inputs[i]
        if x._npy is not None or not _was_produced(x._buf):
            continue
        slot = free.get((x.aval.shape, x.aval.dtype))
        if slot:
            pairs.append((i, slot.pop(0)))
    return tuple(pairs)


def _run_whole(g, out_vars):
    t0 = time.perf_counter()
    donate = _donations(g, out_vars) if g.inputs else ()
    key = (tuple(g.keys), tuple(g.in_avals), tuple(out_vars), donate,
           config.jax_debug_nans, config.jax_debug_infs)
    exe = _lookup(key, lambda: _build(g.keys, g.counts, g.in_avals, g.var_avals,
                                      out_vars), donate, t0)
    bufs = [x._buf for x in g.inputs]
    _metrics["donated_buffers"] += len(donate)
    g.inputs = []
    g.in_index = {}
    return _execute(exe, bufs)


def _lookup(key, build, donate, t0):
    try:
        exe = _cache.get(key)
    except TypeError:  # an unhashable param: compile without caching
        key, exe = None, None
    if exe is not None:
        _metrics["cache_hits"] += 1
        _metrics["trace_ms"] += (time.perf_counter() - t0) * 1e3
        return exe
    with span("xform.lazy.build", ops=len(key[0]) if key else 0):
        closed = build()
    t1 = time.perf_counter()
    _metrics["trace_ms"] += (t1 - t0) * 1e3
    exe = _compile(closed, donate)
    _metrics["compile_ms"] += (time.perf_counter() - t1) * 1e3
    _metrics["graphs_compiled"] += 1
    if key is not None:
        if len(_cache) >= options["cache_size"]:
            _cache.pop(next(iter(_cache)))
        _cache[key] = exe
    return exe


def _execute(exe, bufs):
    t0 = time.perf_counter()
    with span("xform.lazy.execute"):
        outs = exe(bufs)
    _metrics["programs_executed"] += 1
    _metrics["execute_ms"] += (time.perf_counter() - t0) * 1e3
    for b in outs:
        _mark_produced(b)
    return outs


def _build(keys, counts, in_avals, var_avals, out_vars):
    """The ClosedJaxpr of canonical equations ``keys``, returning ``out_vars``; DCE
    drops equations whose results no output needs (unless they have effects)."""
    from xform.interpreters import partial_eval as pe
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


def _compile(closed, donate):
    """Lower with the normal lowering, compile with backend.compile; returns
    ``execute(buffers) -> buffers`` (NaN-checked under jax_debug_nans)."""
    from xform.interpreters import dispatch, mlir
    callbacks = []
    with span("xform.lazy.lower"):
        text = mlir.lower_jaxpr_to_module(closed, host_callbacks=callbacks)
    if donate:
        text = _add_aliases(text, donate)
    with span("xform.compile", name="a lazy graph"):
        exe = backend.compile(text, None, callbacks)
    run = exe.execute
    if config.jax_debug_nans or config.jax_debug_infs:
        run = dispatch._nan_checked(run, closed.out_avals, lambda bufs, what: _nan_rerun(
            closed, bufs, what))
    if config.jax_log_compiles:
        import logging
        logging.getLogger("xform").warning("Compiled a lazy graph with %d equations",
                                           len(closed.jaxpr.eqns))
    return run


def _nan_rerun(closed, bufs, what="nan"):
    from xform.interpreters import dispatch
    dispatch._rerun_op_by_op(closed, "a lazy graph", bufs, what)


def _add_aliases(text, donate):
    """Mark ``@main``'s argument i as aliasing output j (``tf.aliasing_output``)."""
    ir = backend.ir
    with backend.make_ir_context():
        module = ir.Module.parse(text)
        main = next(op for op in module.body.operations
                    if ir.StringAttr(op.attributes["sym_name"]).value == "main")
        attrs = list(main.attributes["arg_attrs"]) if "arg_attrs" in main.attributes \
            else None
        n = len(main.regions[0].blocks[0].arguments)
        dicts = [dict((a.name, a.attr) for a in ir.DictAttr(attrs[i])) if attrs else {}
                 for i in range(n)]
        for i, j in donate:
            dicts[i]["tf.aliasing_output"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), j)
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [ir.DictAttr.get(d) for d in dicts])
        return str(module)


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


def _clear_on_flag(name, value):
    if name == "jax_enable_x64":
        _cache.clear()
        _avals_cache.clear()


config._add_listener(_clear_on_flag)


if config.xform_lazy:  # XFORM_LAZY=1 in the environment: lazy from the start
    _on_flag("xform_lazy", True)
