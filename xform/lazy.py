"""Lazy eager mode (the LazyTensor technique) and the compile break-even report.

``with xform.lazy(): ...`` keeps the eager API but records each operation into
xform's jaxpr IR instead of running it; the pending graph of all live arrays is
compiled (cached by its canonical form) and run at a *barrier*: ``mark_step()``, or
any use that needs a value (``np.asarray``, ``float``, ``print``, ``block_until_ready``,
host callbacks, passing the array to ``jit``/``pmap``, leaving the block).
``xform.lazy`` is both the context manager and the home of :func:`mark_step`,
:func:`metrics`, :func:`reset_metrics` and :func:`configure`;
``xform.config.update("xform_lazy", True)`` turns the mode on globally.

NB: JAX has no lazy mode; this follows PyTorch/XLA's (Suhan et al., "LazyTensor",
2021), recorded into the same IR the transformations use so that ``grad``, ``vmap``
and ``jit`` compose with it.
"""
import math
import sys
import time
import types

from xform import backend
from xform.core import tree_util
from xform.interpreters import lazy as _interp, lazy_run as _run, mlir
from xform.transforms.jit import jit, make_jaxpr

__all__ = ["lazy", "mark_step", "metrics", "reset_metrics", "configure",
           "dispatch_report", "DispatchReport", "is_pending"]

is_pending = _interp.is_pending


class lazy:
    """Context manager: eager operations inside the block are recorded, not run.

    Inside, operations on Arrays return lazy Arrays whose shape and dtype are known at
    once (errors are raised at the operation); their values are computed at a barrier,
    all live pending arrays by one compiled program. Leaving the block is a barrier.

    Args:
      enabled: ``False`` makes the block a no-op (handy to compare eager and lazy).

    >>> import xform, xform.numpy as jnp
    >>> with xform.lazy():
    ...     y = jnp.arange(3.0) * 2.0 + 1.0   # recorded
    ...     print(y)                           # a barrier: compiled and run here
    [1. 3. 5.]
    """

    def __init__(self, enabled=True):
        self.enabled = bool(enabled)

    def __enter__(self):
        if self.enabled:
            _interp.enter()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.enabled:
            _interp.exit_(failed=exc_type is not None)
        return False


def mark_step(block=False):
    """A barrier: compute every live pending array of this thread with one program.

    Call it once per training step (as PyTorch/XLA's ``xm.mark_step()``), so each step
    runs one cached executable. Outside lazy mode it does nothing.

    Args:
      block: wait until the computed values are ready. By default (as PyTorch/XLA's
        ``xm.mark_step()``) it returns once the program is dispatched (the runtime may
        run it asynchronously); reading a value waits for it.

    >>> import xform, xform.numpy as jnp
    >>> with xform.lazy():
    ...     w = jnp.ones(3)
    ...     for _ in range(3):
    ...         w = w - 0.5 * w
    ...         xform.lazy.mark_step()
    >>> w
    Array([0.125, 0.125, 0.125], dtype=float32)
    """
    bufs = _interp.barrier("mark_step")
    if block:
        for b in bufs:
            b.block_until_ready()


def metrics():
    """Counters of lazy mode since the last :func:`reset_metrics` (a new dict).

    Keys: ``graphs_compiled`` (cache misses), ``cache_hits``, ``ops_recorded``,
    ``barriers`` (a dict: count per reason, e.g. ``mark_step``, ``exit``, ``asarray``,
    ``float``, ``repr``, ``block_until_ready``, ``host_callback``, ``jit``,
    ``device_buffer``, ``size_limit``, ``default_device``, ``aot_call``),
    ``programs_executed``, ``graph_cuts``,
    ``repeated_blocks``, ``donated_buffers``, ``cache_size``, and milliseconds in
    ``trace_ms`` (canonicalizing and building graphs at barriers), ``compile_ms``
    (lowering and XLA) and ``execute_ms``.

    >>> import xform
    >>> sorted(xform.lazy.metrics())[:3]
    ['barriers', 'cache_hits', 'cache_size']
    """
    return _run.metrics()


def reset_metrics():
    """Zero the counters :func:`metrics` reports (compiled programs stay cached)."""
    _run.reset_metrics()


def configure(max_graph_size=None, block_size=None, donate=None, cache_size=None,
              record_jit=None):
    """Set lazy mode's options; returns the options now in force (a dict).

    Args:
      max_graph_size: a pending graph reaching this many equations is cut and run
        (default 10,000), bounding memory and compile time of loops without barriers.
      block_size: length of the blocks a cut graph's repeated tail is run in: one
        executable runs every repetition (default 512 equations).
      donate: let a barrier's program reuse (donate) the buffers of inputs nothing
        references any more (default True).
      cache_size: executables kept (default 512; the oldest is evicted first).
      record_jit: record calls of jitted functions on lazy arrays as call equations of
        the pending graph instead of running a barrier first (default False: passing a
        lazy array to ``jit`` is a barrier, as the issue specifies). Worth turning on for
        code that calls many small jitted functions (``xform.nn`` activations are).

    >>> import xform
    >>> xform.lazy.configure()["max_graph_size"]
    10000
    """
    new = {"max_graph_size": max_graph_size, "block_size": block_size, "donate": donate,
           "cache_size": cache_size, "record_jit": record_jit}
    for k, v in new.items():
        if v is None:
            continue
        if k in ("donate", "record_jit"):
            _run.options[k] = bool(v)
        elif not isinstance(v, int) or v < 1:
            raise ValueError(f"xform.lazy.configure: {k} must be a positive int, got {v!r}")
        else:
            _run.options[k] = v
    _interp.refresh_limit()
    return dict(_run.options)


# ---- the break-even report ----

class DispatchReport:
    """What compiling ``f`` costs and saves (fields also as a dict: ``vars(report)``).

    Fields: ``name``, ``n_ops`` (primitives in f's jaxpr, one eager dispatch each),
    ``trace_ms``, ``lower_ms``, ``compile_ms`` (one-time costs of the first jitted
    call), ``eager_ms``, ``lazy_ms``, ``jit_ms`` (per call, measured),
    ``dispatch_share`` (share of eager time not spent computing: ``1 - jit/eager``),
    ``breakeven_calls`` (``T_compile / (T_eager - T_jit)`` with ``T_compile`` =
    trace + lower + compile; ``inf`` when jit is not faster) and ``recommendation``.
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __str__(self):
        rows = [("ops (eager dispatches)", f"{self.n_ops}"),
                ("trace / lower / compile", f"{self.trace_ms:.2f} / {self.lower_ms:.2f} / "
                                            f"{self.compile_ms:.2f} ms"),
                ("per call: eager", f"{self.eager_ms:.4f} ms"),
                ("per call: lazy", f"{self.lazy_ms:.4f} ms"),
                ("per call: jit", f"{self.jit_ms:.4f} ms"),
                ("dispatch share of eager", f"{self.dispatch_share:.0%}"),
                ("break-even calls", f"{self.breakeven_calls:.1f}")]
        width = max(len(k) for k, _ in rows)
        lines = [f"dispatch report for {self.name}"]
        lines += [f"  {k:<{width}}  {v}" for k, v in rows]
        lines.append(f"  -> {self.recommendation}")
        return "\n".join(lines)

    __repr__ = __str__


def _block(tree):
    for leaf in tree_util.tree_leaves(tree):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return tree


def _per_call_ms(call, number):
    call()  # warm up (compiles, fills caches)
    if number is None:
        t0 = time.perf_counter()
        call()
        once = time.perf_counter() - t0
        number = max(3, min(1000, int(0.05 / max(once, 1e-6))))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e3


def dispatch_report(f, *args, number=None, **kwargs):
    """Measure the Dispatch Overhead / Compilation Continuum trade-off for ``f(*args)``.

    Runs ``f`` eagerly, in lazy mode (one barrier per call) and jitted, times tracing,
    lowering and compiling, and computes the number of calls after which compiling pays.

    Args:
      f: a function of arrays (as passed to ``jit``).
      *args, **kwargs: example arguments.
      number: calls per timing (default: enough for ~50 ms).

    Returns:
      A :class:`DispatchReport` (print it; ``vars(report)`` gives the fields).

    >>> import xform, xform.numpy as jnp
    >>> r = xform.dispatch_report(lambda x: jnp.sin(x) * 2.0 + 1.0, jnp.ones(8))
    >>> r.n_ops, sorted(vars(r))[:3]
    (3, ['breakeven_calls', 'compile_ms', 'dispatch_share'])
    """
    if not callable(f):
        raise TypeError(f"dispatch_report: expected a callable, got {f!r}")
    name = getattr(f, "__name__", "fun")
    t0 = time.perf_counter()
    closed = make_jaxpr(f)(*args, **kwargs)  # a fresh trace (jit's would be cached)
    t1 = time.perf_counter()
    callbacks = []
    module = mlir.lower_jaxpr_to_module(closed, hoist_consts=True,
                                        host_callbacks=callbacks, as_bytecode=True)
    t2 = time.perf_counter()
    # XLA itself, past the program cache: what a first call in a fresh process pays.
    backend.compile(module, None, callbacks)
    t3 = time.perf_counter()
    trace_ms, lower_ms, compile_ms = (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3

    def lazy_call():
        with lazy():
            out = f(*args, **kwargs)
            mark_step()
        return _block(out)

    eager_ms = _per_call_ms(lambda: _block(f(*args, **kwargs)), number)
    lazy_ms = _per_call_ms(lazy_call, number)
    jitted = jit(f)
    jit_ms = _per_call_ms(lambda: _block(jitted(*args, **kwargs)), number)
    saved = eager_ms - jit_ms
    total = trace_ms + lower_ms + compile_ms
    breakeven = total / saved if saved > 0 else float("inf")
    if breakeven == float("inf"):
        rec = "stay eager: compiling does not make a call faster"
    elif breakeven <= 1:
        rec = "jit it: compiling pays off from the first call"
    else:
        rec = (f"jit it if you call it more than {math.ceil(breakeven)} times with these "
               "shapes; otherwise stay eager")
        if lazy_ms < eager_ms:
            rec += " (or use xform.lazy(): no tracing restrictions, cached compiles)"
    return DispatchReport(
        name=name, n_ops=len(closed.jaxpr.eqns), trace_ms=trace_ms,
        lower_ms=lower_ms, compile_ms=compile_ms, eager_ms=eager_ms, lazy_ms=lazy_ms,
        jit_ms=jit_ms, dispatch_share=max(0.0, saved / eager_ms) if eager_ms > 0 else 0.0,
        breakeven_calls=breakeven, recommendation=rec)


class _LazyModule(types.ModuleType):
    """``xform.lazy`` is this module and, called, the context manager."""

    def __call__(self, enabled=True):
        return lazy(enabled)


sys.modules[__name__].__class__ = _LazyModule
