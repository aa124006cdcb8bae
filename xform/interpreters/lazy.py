"""The lazy (LazyTensor) interpreter: eager primitives recorded into a jaxpr, run at barriers.

While lazy mode is on, :class:`LazyTrace` is the bottom trace: it records each primitive
(inline on its hot path, else through :func:`record`): the abstract evaluation runs at
once (so shape errors point at the user's line) and one equation is appended to the
thread's pending graph; the result is an Array whose buffer is pending. A *barrier* (:func:`barrier`) computes every live
pending array with one compiled program: the graph's equations, renumbered canonically
(inputs and variables by first appearance, Python scalars other than 0 and 1 as
inputs), are the cache key, so the same sequence of operations on the same avals reuses
one executable whatever the values are. Arrays nothing references any more are dead:
DCE drops the equations only they needed. A graph that reaches ``max_graph_size``
equations is cut; when its tail repeats a block of equations, the block is compiled
once and run as many times as it repeats. Running a graph (the executable cache, building
and compiling, executing, metrics) is ``lazy_run.py``; cut graphs, ``lazy_segments.py``.
See docs/architecture.md, "Lazy eager mode".
"""
import sys
import threading
from itertools import compress

import numpy as np

from xform import backend
from xform.core import dtypes, transfer
from xform.core.array import Array
from xform.core.avals import MemorySpace, aval_of_value
from xform.core.config import config
from xform.core.jaxpr import ClosedJaxpr, JaxprEqn
from xform.core.sharding import SingleDeviceSharding
from xform.core.trace import Trace, _context, check_not_tracer, eval_trace, set_current_trace
from xform.interpreters import dispatch, lazy_run, partial_eval as pe
from xform.interpreters.lazy_run import _metrics, count_barrier, options
from xform.interpreters.lazy_segments import device_of, run_by_device, run_segments

_getrefcount = sys.getrefcount
_new = object.__new__


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
        return np.asarray(self._get(), dtype=dtype)

    def block_until_ready(self):
        return self._get("block_until_ready").block_until_ready()

    def devices(self):  # (known before it is computed: see lazy_segments.device_of)
        d = device_of(self) if self.real is None else None
        return {d} if d is not None else self._get("devices").devices()

    @property
    def sharding(self):   # (likewise, with the memory its type says: Array.sharding)
        d = device_of(self) if self.real is None else None
        if d is None:
            return self._get("sharding").sharding
        host = self.graph.arrays[self.var].aval.memory_space is MemorySpace.Host
        return SingleDeviceSharding(d, memory_kind="pinned_host" if host else "device")

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
        count_barrier(reason)
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
    __slots__ = ("keys", "multi", "inputs", "in_avals", "in_index", "arrays", "error",
                 "effects", "closed", "limit", "counts", "var_avals", "devices")

    def __init__(self):
        self.keys = []       # (prim, params key, refs) per equation
        self.multi = {}      # equation index -> number of outputs, where not 1
        self.inputs = []     # concrete Arrays, by input number
        self.in_avals = []
        self.in_index = {}   # id(Array) -> input number
        self.arrays = []     # the lazy Array of each variable (liveness: refcounts)
        self.error = None
        self.effects = False
        self.closed = False  # run already (by a barrier, maybe from another thread)
        self.limit = _limit()  # equations after which a barrier runs (_after_record)
        self.counts = self.var_avals = None  # (tables(), when a program is built)
        self.devices = None  # the devices of committed inputs (a set), if any

    def tables(self):
        """Outputs per equation and the aval of each variable, derived once from what
        recording kept (not appended per op: recording is the hot path)."""
        if self.counts is None:
            multi = self.multi
            self.counts = [multi.get(i, 1) for i in range(len(self.keys))]
            self.var_avals = [a.aval for a in self.arrays]
        return self.counts, self.var_avals


def _limit():
    # The size limit, or 1 while NaNs/infs are checked: they are raised at the op that
    # made them, as eagerly.
    return 1 if config.jax_debug_nans or config.jax_debug_infs else options["max_graph_size"]


def refresh_limit():
    """Apply changed options or debug flags to the graph being recorded."""
    if _tls.graph is not None:
        _tls.graph.limit = _limit()


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


class LazyTrace(Trace):
    """The bottom trace in lazy mode: records primitives instead of running them."""
    __slots__ = ()

    def process_primitive(self, prim, args, params):
        """The hot path of lazy mode, inlined (docs/architecture.md has its profile): a
        recorded primitive of one or two Array operands, no params, one result, its
        abstract evaluation seen before. Anything else (or an AttributeError: an
        operand that is no Array) takes ``record`` or ``_not_recorded``."""
        if prim.lazy_kind != "record" or params or prim.multiple_results:
            return _not_recorded(prim, args, params)
        g = _tls.graph
        if g is None or g.closed:
            g = _tls.graph = _Graph()
        try:
            if len(args) == 2:
                x, y = args
                b = x._buf
                c = y._buf
                refs = (b.var if type(b) is _Pending and b.graph is g else _ref(g, x),
                        c.var if type(c) is _Pending and c.graph is g else _ref(g, y))
                hit = _evals_by_id.get((prim, id(x.aval), id(y.aval)))
                committed = x._committed or y._committed
            elif len(args) == 1:
                x, = args
                b = x._buf
                refs = (b.var if type(b) is _Pending and b.graph is g else _ref(g, x),)
                hit = _evals_by_id.get((prim, id(x.aval)))
                committed = x._committed
            else:
                hit = None
        except AttributeError:
            hit = None
        if hit is None or hit[1]:
            return _record(g, prim, args, params)
        # The two objects built without their __init__ frames (~70 ns less per op):
        # the same slots _Pending(g, var) and Array(pending, aval) set.
        arrays = g.arrays
        p = _new(_Pending)
        p.graph = g
        p.var = len(arrays)
        p.real = None
        result = _new(Array)
        result._buf = p
        result.aval = hit[0]
        result._npy = None
        result._committed = committed
        arrays.append(result)
        keys = g.keys
        keys.append((prim, (), refs))
        if len(keys) >= g.limit:
            _after_record(g, False)
        return result


def _not_recorded(prim, args, params):
    """``process_primitive`` off its hot path, by ``prim.lazy_kind``."""
    kind = prim.lazy_kind
    if kind == "record":
        return record(prim, args, params)
    if kind == "structural":
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


def record(prim, args, params):
    """Record ``prim`` applied to ``args`` in this thread's graph; returns its lazy
    result(s). Abstract evaluation runs now, so errors are raised at the operation."""
    g = _tls.graph
    if g is None or g.closed:
        g = _tls.graph = _Graph()
    return _record(g, prim, args, params)


# Abstract evaluations: by the identity of the input avals first (a tuple of ints hashes
# in C; ShapedArray.__hash__ is a Python call), then by value. An entry holds its input
# avals, so their ids cannot be reused while it exists.
_evals_by_id = {}  # (prim, params key, id of each in aval) -> (out, effects, in avals)
_avals_cache = {}  # (prim, in avals, params key) -> (out, effects)


def _ref(g, x):
    """The reference to concrete Array ``x`` (an input of ``g``), or AttributeError."""
    if type(x) is not Array:
        raise AttributeError
    b = x._buf
    if type(b) is _Pending:  # computed, or recorded by another thread
        x._buf = b._get("other_thread")
    i = g.in_index.get(id(x))
    if i is not None:
        return -i
    if x._committed:  # (lazy_segments places the graph's values by these)
        g.devices = (g.devices or set()) | {backend.buffer_device(x._buf)}
    return _input(g, x)


def _id_key(prim, pkey, avals):
    ids = tuple(map(id, avals))
    return (prim, *ids) if not pkey else (prim, pkey, *ids)


def _record(g, prim, args, params):
    refs = []
    avals = []
    committed = False
    for x in args:
        if type(x) is Array:
            b = x._buf
            refs.append(b.var if type(b) is _Pending and b.graph is g else _ref(g, x))
            avals.append(x.aval)
            committed = committed or x._committed
        elif getattr(x, "dtype", None) == dtypes.float0:
            return _float0_eager(prim, args, params)
        else:
            refs.append(_operand(g, prim, x, avals))
    pkey = tuple(params.items()) if params else ()
    try:
        hit = _evals_by_id.get(_id_key(prim, pkey, avals))
    except TypeError:  # unhashable params
        hit = None
    if hit is None:
        hit = _abstract_eval(prim, avals, params, pkey)
    out, effects = hit[0], hit[1]
    if effects == "float0":
        return _float0_eager(prim, args, params)
    var = len(g.arrays)
    if prim.multiple_results:
        result = [Array(_Pending(g, var + i), a, committed) for i, a in enumerate(out)]
        g.arrays.extend(result)
        if len(result) != 1:
            g.multi[len(g.keys)] = len(result)
    else:
        result = Array(_Pending(g, var), out, committed)
        g.arrays.append(result)
    g.keys.append((prim, pkey, tuple(refs)))
    if effects or len(g.keys) >= g.limit:
        _after_record(g, effects)
    return result


def _abstract_eval(prim, avals, params, pkey):
    """``(out avals, effects, in avals)`` of ``prim`` on ``avals``; cached when the
    params are hashable. ``effects`` is "float0" for an op making float0 values."""
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
        hit = (out, effects)
        if akey is not None and len(_avals_cache) < 65536:
            _avals_cache[akey] = hit
    if akey is not None:
        if len(_evals_by_id) >= 8192:
            _evals_by_id.clear()
        _evals_by_id[_id_key(prim, pkey, avals)] = hit + (tuple(avals),)
    return hit


def _after_record(g, effects):
    """The barriers a recorded op may need at once."""
    if effects:  # a host callback inside (a scan printing): run now, in program order
        g.effects = True
        barrier("host_callback")
    elif len(g.keys) >= options["max_graph_size"]:
        barrier("size_limit")
    else:  # NaNs/infs are raised at the op that made them, as eagerly
        barrier("debug_nans")


def _operand(g, prim, x, avals):
    """The reference to a non-Array operand (a literal or a new input)."""
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
    return pe.has_effects(JaxprEqn([], [], prim, params))


# ---- barriers ----

def _live_base():
    # What sys.getrefcount reports for an array only the graph's list holds, as
    # _live counts it (calibrated, not assumed: compress holds the item meanwhile).
    class _Probe:
        pass
    seen = []
    probe = [_Probe()]
    list(compress(probe, map(seen.append, map(_getrefcount, probe))))
    return seen[0]


def _live(arrays):
    """The arrays something besides the graph references (all in C: ~1 us per 100)."""
    return list(compress(arrays, map(_BASE.__lt__, map(_getrefcount, arrays))))


_BASE = _live_base()


def barrier(reason):
    """Compute every live pending array of this thread's graph with one program;
    returns their buffers."""
    count_barrier(reason)
    g = _tls.graph
    if g is None:
        return []
    _tls.graph = None
    return _run_graph(g, cut=reason == "size_limit")


def _run_graph(g, cut=False):
    if g.closed or not g.keys:
        return []
    g.closed = True
    _metrics["ops_recorded"] += len(g.keys)
    out_arrays = _live(g.arrays)
    out_vars = [a._buf.var for a in out_arrays]
    if not out_vars and not g.effects:
        g.arrays = []
        return []  # everything recorded is dead
    try:
        with set_current_trace(eval_trace):  # anything run inside (NaN reruns) is eager
            if cut and len(g.keys) >= 2 * options["block_size"]:
                bufs = run_segments(g, out_vars)
            elif g.devices and (len(g.devices) > 1 or
                                backend.default_device() not in g.devices):
                bufs = run_by_device(g, out_vars)
            else:
                bufs = lazy_run.run_whole(g, out_vars)
    except BaseException as e:
        g.error = e
        raise
    finally:
        g.arrays = []  # (the dead arrays go now; tables() has read what it needs)
    for a, b in zip(out_arrays, bufs):
        a._buf.real = b
        a._buf = b
    return bufs


def _clear_on_flag(name, value):
    if name == "jax_enable_x64":
        lazy_run.clear_cache()
        _avals_cache.clear()
        _evals_by_id.clear()
    elif name in ("jax_debug_nans", "jax_debug_infs"):
        refresh_limit()
    elif name == "jax_default_device":  # (programs compiled for the old one)
        lazy_run.clear_cache()


def _set_default_device(value):
    """What was recorded under the old default device runs there first (JAX ran it
    there); then ``placement``'s validator sets the new one."""
    if _tls.graph is not None and not _tls.graph.closed and _tls.graph.keys:
        barrier("default_device")
    _set_default_device_now(value)


config._add_listener(_clear_on_flag)
_set_default_device_now = config._validators["jax_default_device"]
config._add_validator("jax_default_device", _set_default_device)


if config.xform_lazy:  # XFORM_LAZY=1 in the environment: lazy from the start
    _on_flag("xform_lazy", True)
