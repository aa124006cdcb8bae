"""Running things on XLA: host->device transfer, eager primitives, compiled jaxprs.

Eager execution has no separate implementation: a primitive applied to concrete
values is lowered alone into a one-op module, compiled once per
(primitive, avals, params) and cached. The cache lookup and ``execute`` call are
the whole hot path.
"""
import operator

import numpy as np

from xform import backend
from xform.core import dtypes, monitoring
from xform.core.array import Array, ShardedArray
from xform.core.avals import ShapedArray, aval_of_value, canonical_aval
from xform.core.config import config
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from xform.core.profiling import span
from xform.core.sharding import TiledLayout
from xform.core.trace import check_not_tracer
from xform.core.transfer import (clear_scalar_cache, has_float0, private_buffer, results,
                                 to_buffer)
from xform.interpreters import compiler, mlir, mlir_memory
from xform.interpreters.placement import committed, run_elsewhere, run_there
from xform.interpreters.compiler import LRUCache
from xform.core.jaxpr import eval_jaxpr


# ---- eager primitives ----

class _OneOp:
    """An eager op's executable: ``run(bufs).consume_with_handlers(handlers)`` gives
    its output buffers (two C++ calls on the common path); ``execute`` is the same as
    one function."""
    __slots__ = ("execute", "run", "handlers", "out_avals", "out_aval", "float0",
                 "executable")

    def __init__(self, exe, out_avals, multiple_results, execute=None):
        self.executable = exe
        if execute is None:
            self.run, self.handlers = exe.execute_parts(out_avals)
            self.execute = exe.make_execute(out_avals)
        else:  # a wrapped execute (jax_debug_nans)
            self.run, self.handlers = backend.as_execute_parts(execute)
            self.execute = execute
        self.out_avals = out_avals
        # set: return one Array; None: a list (several outputs, or multiple_results)
        self.out_aval = out_avals[0] if len(out_avals) == 1 and not multiple_results else None
        self.float0 = has_float0(out_avals)  # such an op is never cached (see results)


sharded_apply = None  # ``spmd.apply_primitive`` (set by that module, which imports this)

# Eager one-op executables, keyed by (primitive, avals[, params]); bounded like JAX's.
# NB: a hit does not refresh the entry's recency (that would hash the key a second
# time on the hottest path): eviction is in insertion order, and an evicted op costs a
# lowering and a program-cache hit, not a compile.
_prim_cache = LRUCache(4096)
_aval_of = operator.attrgetter("aval")
_buf_of = operator.attrgetter("_buf")
_committed_of = operator.attrgetter("_committed")


def apply_primitive(prim, *args, **params):
    """Execute one primitive on concrete values (the eval trace's ``impl``).

    The hot path (every argument an Array, the op seen before) runs no Python frame
    besides this one, one ``ShapedArray.__hash__`` per argument and ``Array.__init__``:
    buffers and avals are read inline (C ``attrgetter``s past two arguments), the flat
    key is hashed once, and the executable is called through its C++ parts. Anything
    else raises AttributeError here and takes ``_apply_slow``."""
    try:  # AttributeError: a Python or NumPy scalar, a NumPy array, a leaked tracer
        if len(args) == 1:  # (unrolled: ~100 ns less than map() for one or two)
            x, = args
            bufs = [x._buf]
            key = (prim, x.aval)
            committed = x._committed
        elif len(args) == 2:
            x, y = args
            bufs = [x._buf, y._buf]
            key = (prim, x.aval, y.aval)
            committed = x._committed or y._committed
        else:
            bufs = list(map(_buf_of, args))
            key = (prim, *map(_aval_of, args))
            committed = next(filter(None, map(_committed_of, args)), False)
    except AttributeError:
        return _apply_slow(prim, args, params)
    if params:
        key += (tuple(params.items()),)
    try:
        entry = _prim_cache.get(key)
    except TypeError:  # unhashable params (e.g. a list): compile without caching
        return _apply_slow(prim, args, params)
    if entry is None:
        entry = _compile_primitive(prim, key[1:len(args) + 1], params)
        if entry.float0:
            return _run_float0(entry, prim, args)
        _prim_cache.insert(_canonical_key(key), entry)
    if committed and committed is not True:   # (on a device other than the default)
        outs = run_there(entry, bufs, args, prim.name)
    else:
        try:
            outs = entry.run(bufs).consume_with_handlers(entry.handlers)
        except Exception as e:
            outs = run_elsewhere(entry, bufs, args, prim.name, e)
    if entry.out_aval is not None:
        return Array(outs[0], entry.out_aval, committed)
    return [Array(b, a, committed) for b, a in zip(outs, entry.out_avals)]


def _run_float0(entry, prim, args):
    """An eager op with float0 outputs (structural ops on float0 tangents, in vmap or
    jacfwd): never cached, so the fast paths never wrap a float0 buffer."""
    outs = entry.execute([x._buf if type(x) is Array else to_buffer(x) for x in args])
    outs = results(outs, entry.out_avals)
    return outs[0] if entry.out_aval is not None else outs


def _canonical_key(key):
    """``key`` with canonical avals, so hits from dispatch-made Arrays compare by
    identity (see ``canonical_aval``)."""
    return tuple(canonical_aval(k) if type(k) is ShapedArray else k for k in key)


def _apply_slow(prim, args, params):
    """``apply_primitive`` for arguments that are not all Arrays (Python and NumPy
    scalars are put on the device; a leaked tracer raises), or unhashable params."""
    if any(type(x) is ShardedArray and type(x.layout) is TiledLayout for x in args):
        return sharded_apply(prim, args, params)  # an SPMD program over their mesh
    avals = tuple([x.aval if type(x) is Array else _eager_aval(prim, x) for x in args])
    key = (prim, *avals, tuple(params.items())) if params else (prim, *avals)
    try:
        entry = _prim_cache.get(key)
    except TypeError:
        key, entry = None, None
    if entry is None:
        entry = _compile_primitive(prim, avals, params)
        if entry.float0:
            return _run_float0(entry, prim, args)
        if key is not None:
            _prim_cache.insert(_canonical_key(key), entry)
    bufs = [x._buf if type(x) is Array else to_buffer(x) for x in args]
    c = committed(args)
    if c and c is not True:
        outs = run_there(entry, bufs, args, prim.name)
    else:
        try:
            outs = entry.execute(bufs)
        except Exception as e:
            outs = run_elsewhere(entry, bufs, args, prim.name, e)
    if entry.out_aval is not None:
        return Array(outs[0], entry.out_aval, c)
    return [Array(b, a, c) for b, a in zip(outs, entry.out_avals)]


# ---- eager higher-order primitives: compiled once per body *structure* ----
# Every eager ``scan``/``cond``/``while`` call traces its functions to fresh jaxprs,
# so the cache above (keyed by param identity) would miss each time and grow without
# bound. Structurally equal jaxprs are mapped to one canonical ClosedJaxpr first.

_canonical_jaxprs = {}


def structural_key(closed: ClosedJaxpr):
    """A hashable key equal for jaxprs that compile to the same program (avals with weak
    types, literal values, params with nested jaxprs, consts by identity); raises
    TypeError for unhashable params."""
    j = closed.jaxpr
    ids = {}

    def atom(v):
        if type(v) is Literal:
            val = np.asarray(v.val)
            return ("lit", v.aval, val.dtype.str, val.tobytes())
        return ids.setdefault(v, (len(ids), v.aval))

    def param(v):
        if isinstance(v, ClosedJaxpr):
            return structural_key(v)
        if isinstance(v, tuple):
            return tuple(param(x) for x in v)
        hash(v)
        return v

    head = tuple(atom(v) for v in j.constvars + j.invars)
    eqns = tuple((e.primitive, tuple(atom(v) for v in e.invars),
                  tuple(sorted((k, param(v)) for k, v in e.params.items())),
                  tuple(atom(v) for v in e.outvars)) for e in j.eqns)
    return head, eqns, tuple(atom(v) for v in j.outvars), tuple(id(c) for c in closed.consts)


_canonical_of = {}  # id(ClosedJaxpr) -> (it, its canonical one): a body whose trace is
# reused (``control_flow.common.eager_cached``) is keyed once, not on every call


def _canonical(closed):
    hit = _canonical_of.get(id(closed))
    if hit is not None and hit[0] is closed:
        return hit[1]
    try:
        key = structural_key(closed)
    except TypeError:
        return closed
    if len(_canonical_jaxprs) > 1024 or len(_canonical_of) > 4096:
        _canonical_jaxprs.clear()
        _canonical_of.clear()
    canon = _canonical_jaxprs.setdefault(key, closed)
    _canonical_of[id(closed)] = (closed, canon)
    return canon


def def_eager_shortcut(prim, impl):
    """Eager impl for ``prim`` that runs an equivalent primitive instead (e.g. ``slice``
    as ``dynamic_slice`` with its starts as operands, so ``x[i]`` for every ``i`` shares
    one executable, as JAX's eager slice does). Lazy mode records ``prim`` itself."""
    prim.def_impl(impl, lazy_kind="record")


def def_structural_impl(prim):
    """Eager impl for a primitive whose params hold ClosedJaxprs (or tuples of them):
    canonicalize them structurally, then compile and cache like any primitive."""
    def impl(*args, **params):
        for k, v in params.items():
            if isinstance(v, ClosedJaxpr):
                params[k] = _canonical(v)
            elif isinstance(v, tuple) and v and isinstance(v[0], ClosedJaxpr):
                params[k] = tuple(_canonical(x) for x in v)
        return apply_primitive(prim, *args, **params)
    prim.def_impl(impl, lazy_kind="structural")


def _eager_aval(prim, x):
    if isinstance(x, Array):  # a multi-device Array (pmap's results)
        return x.aval
    check_not_tracer(x, f" (it reached primitive '{prim.name}' outside any transformation)")
    return aval_of_value(x)


def _compile_primitive(prim, avals, params):
    out = prim.abstract_eval(*avals, **params)
    out_avals = [canonical_aval(a) for a in (out if prim.multiple_results else [out])]
    if all(a.dtype == dtypes.float0 for a in out_avals):  # all zeros: nothing to run
        return _OneOp(None, out_avals, prim.multiple_results,
                      lambda bufs: [None] * len(out_avals))
    invars = [Var(a) for a in avals]
    outvars = [Var(a) for a in out_avals]
    jaxpr = Jaxpr([], invars, outvars, [JaxprEqn(invars, outvars, prim, params)])
    callbacks = []  # higher-order primitives (scan, cond) may hold host callbacks
    module = mlir.lower_jaxpr_to_module(ClosedJaxpr(jaxpr, []), host_callbacks=callbacks,
                                        as_bytecode=True)
    exe = compiler.compile_module(module, None, callbacks, prim.name, avals)
    if config.jax_debug_nans or config.jax_debug_infs:  # baked in: caches are cleared
        return _OneOp(exe, out_avals, prim.multiple_results,  # when the flags flip
                      _nan_checked(exe.make_execute(out_avals), out_avals,
                                   lambda bufs, what: _raise_nan(prim.name, what)))
    return _OneOp(exe, out_avals, prim.multiple_results)


# ---- jax_debug_nans / jax_debug_infs ----

def _nan_checked(execute, out_avals, on_nan):
    """``execute`` calling ``on_nan(input buffers, "nan" or "inf")`` when a floating output
    has a NaN (under jax_debug_nans) or an infinity (under jax_debug_infs)."""
    checked = [i for i, a in enumerate(out_avals) if a.dtype in dtypes.inexact_dtypes]
    nans, infs = config.jax_debug_nans, config.jax_debug_infs
    if not checked:
        return execute

    def run(bufs):
        outs = execute(bufs)
        for i in checked:
            x = backend.to_numpy(outs[i])
            if nans and np.isnan(x).any():
                on_nan(bufs, "nan")
            if infs and np.isinf(x).any():
                on_nan(bufs, "inf")
        return outs
    return run


def _raise_nan(name, what="nan"):
    raise FloatingPointError(f"invalid value ({what}) encountered in {name}")


def _rerun_op_by_op(closed, name, bufs, what="nan"):
    """A compiled program produced a NaN: run its jaxpr again one primitive at a time,
    so that the first primitive producing a NaN raises (eager primitives check too)."""
    args = [Array(b, a) for b, a in zip(bufs[len(bufs) - len(closed.in_avals):],
                                        closed.in_avals)]
    eval_jaxpr(closed.jaxpr, closed.consts, *args)
    raise FloatingPointError(
        f"invalid value ({what}) encountered in {name}. Because jax_debug_{what}s is set, "
        "the program was re-run one primitive at a time to find the primitive that "
        f"produced it, but none did: the {what} may come from a constant or input returned "
        "as is, or from an XLA optimization of the compiled program.")


# ---- compiled jaxprs (jit) ----

# Closed-over arrays of up to this many elements are constants in a jitted program (JAX
# embeds every one: XLA then folds them, e.g. a sampler's parameters, and values match
# JAX's); larger ones are passed as arguments, not baked into the program.
EMBED_CONSTS_UP_TO = 1024


class CompiledJaxpr:
    """An XLA executable for a ClosedJaxpr; consts are device buffers passed first.

    The executable comes from the program cache (``compiler.compile_module``): a
    jaxpr that lowers to a module compiled before reuses that executable.
    ``donated[i]`` marks input i as donated (its buffer may become an output's);
    ``skip_passes`` is ``backend.compile``'s; ``layout_modes`` ``mlir``'s. With ``jax_debug_nans`` set when it is
    built, ``execute`` checks the outputs and on a NaN re-runs the jaxpr op by op to name
    the primitive that produced it."""
    __slots__ = ("execute", "run", "handlers", "const_bufs", "out_avals", "executable",
                 "name", "float0", "donated")

    def __init__(self, closed: ClosedJaxpr, device=None, name="jit", donated=None,
                 skip_passes="", out_kinds=None, layout_modes=None):
        callbacks = []
        with span("xform.jit.lower", name=name), monitoring.log_elapsed_time(
                monitoring.JAXPR_TO_MLIR_MODULE_EVENT, name):
            module = mlir.lower_jaxpr_to_module(closed, hoist_consts=EMBED_CONSTS_UP_TO,
                                                host_callbacks=callbacks, as_bytecode=True,
                                                donated=donated, out_kinds=out_kinds,
                                                layout_modes=layout_modes)
        devices = [device] if device is not None else None
        self.name = name
        self.donated = donated if donated and any(donated) else None
        self.executable = compiler.compile_module(module, devices, callbacks, name,
                                                  closed.in_avals, skip_passes)
        self.execute = self.executable.make_execute(closed.out_avals)
        # The hit paths call run(bufs).consume_with_handlers(handlers) (see _OneOp).
        self.run, self.handlers = self.executable.execute_parts(closed.out_avals)
        self.const_bufs = [to_buffer(c) for c, h in zip(
            closed.consts, mlir.hoist_mask(closed, EMBED_CONSTS_UP_TO)) if h]
        self.out_avals = [canonical_aval(a)
                          for a in mlir_memory.with_memory_kinds(closed.out_avals, out_kinds)]
        self.float0 = has_float0(self.out_avals)
        if config.jax_debug_nans or config.jax_debug_infs:
            self.execute = _nan_checked(
                self.execute, self.out_avals,
                lambda bufs, what: _rerun_op_by_op(closed, name, bufs, what))
            self.run, self.handlers = backend.as_execute_parts(self.execute)

    def __call__(self, args, describe=None):
        bufs = self.const_bufs + [to_buffer(x) for x in args]
        if self.donated is not None:  # a donated host value: a buffer only this call holds
            n = len(self.const_bufs)
            for i, (x, d) in enumerate(zip(args, self.donated)):
                if d and not isinstance(x, Array):
                    bufs[n + i] = private_buffer(x)
        c = committed(args)
        if c and c is not True:   # (on a device other than the default: no failed run)
            outs = run_there(self, bufs, args, self.name, describe)
        else:
            try:
                outs = self.execute(bufs)
            except Exception as e:
                outs = run_elsewhere(self, bufs, args, self.name, e, describe)
        if self.float0:
            return results(outs, self.out_avals)
        return [Array(b, a, c) for b, a in zip(outs, self.out_avals)]


def _clear_caches(name, value):
    if name == "jax_enable_x64":
        _prim_cache.clear()
        clear_scalar_cache()
    elif name in ("jax_debug_nans", "jax_debug_infs"):
        _prim_cache.clear()
    elif name == "jax_default_device":  # (programs and scalars were put on the old one)
        _prim_cache.clear()
        clear_scalar_cache()


config._add_listener(_clear_caches)
