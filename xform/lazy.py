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
import sys
import time
import types

from xform.interpreters import lazy as _interp

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


def mark_step(block=True):
    """A barrier: compute every live pending array of this thread with one program.

    Call it once per training step (as PyTorch/XLA's ``xm.mark_step()``), so each step
    runs one cached executable. Outside lazy mode it does nothing.

    Args:
      block: wait until the computed values are ready (else the program runs
        asynchronously and later reads wait for it).

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
    ``device_buffer``, ``size_limit``), ``programs_executed``, ``graph_cuts``,
    ``repeated_blocks``, ``donated_buffers``, ``cache_size``, and milliseconds in
    ``trace_ms`` (canonicalizing and building graphs at barriers), ``compile_ms``
    (lowering and XLA) and ``execute_ms``.

    >>> import xform
    >>> sorted(xform.lazy.metrics())[:3]
    ['barriers', 'cache_hits', 'cache_size']
    """
    return _interp.metrics()


def reset_metrics():
    """Zero the counters :func:`metrics` reports (compiled programs stay cached)."""
    _interp.reset_metrics()


def configure(max_graph_size=None, block_size=None, donate=None, cache_size=None):
    """Set lazy mode's options; returns the options now in force (a dict).

    Args:
      max_graph_size: a pending graph reaching this many equations is cut and run
        (default 10,000), bounding memory and compile time of loops without barriers.
      block_size: length of the blocks a cut graph's repeated tail is run in: one
        executable runs every repetition (default 512 equations).
      donate: let a barrier's program reuse (donate) the buffers of inputs nothing
        references any more (default True).
      cache_size: executables kept (default 512; the oldest is evicted first).

    >>> import xform
    >>> xform.lazy.configure()["max_graph_size"]
    10000
    """
    new = {"max_graph_size": max_graph_size, "block_size": block_size, "donate": donate,
           "cache_size": cache_size}
    for k, v in new.items():
        if v is None:
            continue
        if k == "donate":
            _interp.options[k] = bool(v)
        elif not isinstance(v, int) or v < 1:
            raise ValueError(f"xform.lazy.configure: {k} must be a positive int, got {v!r}")
        else:
            _interp.options[k] = v
    return dict(_interp.options)


class _LazyModule(types.ModuleType):
    """``xform.lazy`` is this module and, called, the context manager."""

    def __call__(self, enabled=True):
        return lazy(enabled)


sys.modules[__name__].__class__ = _LazyModule
