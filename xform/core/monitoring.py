"""Named events and their listeners (``jax.monitoring``'s model): code records an event,
a duration, a time span or a scalar by name, and every registered listener is called.

It sits in core (it imports nothing) so that the compiler and jit, below the public
``xform.monitoring`` face, can record JAX's event names where xform does the same thing:
``/jax/core/compile/{jaxpr_trace,jaxpr_to_mlir_module,backend_compile}_duration`` and
``/jax/compilation_cache/{compile_requests_use_cache,cache_hits,cache_misses,
cache_retrieval_time_sec,tasks_using_cache,task_disabled_cache}``.
"""
import contextlib
import time

JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
JAXPR_TO_MLIR_MODULE_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

_event_listeners = []
_event_duration_secs_listeners = []
_event_time_span_listeners = []
_scalar_listeners = []


def record_event(event, **kwargs):
    """Record that ``event`` happened; each listener gets ``(event, **kwargs)``.

    Pass the same keyword arguments in the same order for every record of one event."""
    for callback in _event_listeners:
        callback(event, **kwargs)


def record_event_duration_secs(event, duration, **kwargs):
    """Record that ``event`` took ``duration`` seconds (a float)."""
    for callback in _event_duration_secs_listeners:
        callback(event, duration, **kwargs)


def record_event_time_span(event, start_time, end_time, **kwargs):
    """Record that ``event`` ran from ``start_time`` to ``end_time`` (``time.time()`` s)."""
    for callback in _event_time_span_listeners:
        callback(event, start_time, end_time, **kwargs)


def record_scalar(event, value, **kwargs):
    """Record a scalar summary ``value`` for ``event``."""
    for callback in _scalar_listeners:
        callback(event, value, **kwargs)


def register_event_listener(callback):
    """Call ``callback(event, **kwargs)`` on every :func:`record_event`."""
    _event_listeners.append(callback)


def register_event_duration_secs_listener(callback):
    """Call ``callback(event, duration, **kwargs)`` on every duration recorded."""
    _event_duration_secs_listeners.append(callback)


def register_event_time_span_listener(callback):
    """Call ``callback(event, start_time, end_time, **kwargs)`` on every time span."""
    _event_time_span_listeners.append(callback)


def register_scalar_listener(callback):
    """Call ``callback(event, value, **kwargs)`` on every :func:`record_scalar`."""
    _scalar_listeners.append(callback)


def get_event_listeners():
    return list(_event_listeners)


def get_event_duration_listeners():
    return list(_event_duration_secs_listeners)


def get_event_time_span_listeners():
    return list(_event_time_span_listeners)


def get_scalar_listeners():
    return list(_scalar_listeners)


def clear_event_listeners():
    """Forget every listener.

    NB JAX 0.10.2 leaves the scalar listeners registered (its ``_scalar_listeners = []``
    binds a local name); xform clears all four kinds, as the name says."""
    for listeners in (_event_listeners, _event_duration_secs_listeners,
                      _event_time_span_listeners, _scalar_listeners):
        listeners.clear()


def _unregister(listeners, callback):
    assert callback in listeners  # JAX's check: unregistering an unknown one is a bug
    listeners.remove(callback)


def unregister_event_listener(callback):
    _unregister(_event_listeners, callback)


def unregister_event_duration_listener(callback):
    _unregister(_event_duration_secs_listeners, callback)


def unregister_event_time_span_listener(callback):
    _unregister(_event_time_span_listeners, callback)


def unregister_scalar_listener(callback):
    _unregister(_scalar_listeners, callback)


_off = contextlib.nullcontext()  # what log_elapsed_time gives without listeners


@contextlib.contextmanager
def _elapsed(event, fun_name):
    start = time.time()
    record_scalar(event, start, fun_name=fun_name)
    yield
    end = time.time()
    record_event_duration_secs(event, end - start, fun_name=fun_name)
    record_event_time_span(event, start, end, fun_name=fun_name)


def log_elapsed_time(event, fun_name):
    """Time a block as JAX's ``dispatch.log_elapsed_time`` does: the start as a scalar,
    then the duration and the time span, each with ``fun_name``; free without listeners."""
    if _scalar_listeners or _event_duration_secs_listeners or _event_time_span_listeners:
        return _elapsed(event, fun_name)
    return _off
