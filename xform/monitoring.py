"""``xform.monitoring``: ``jax.monitoring``'s event listeners (record an event, a
duration, a time span or a scalar by name; every registered listener sees it).

xform records JAX's names where it does the same thing: the jit trace, lowering and
backend-compile durations and the persistent compilation cache's requests, hits,
misses (entries written) and retrieval time.

>>> from xform import monitoring
>>> seen = []
>>> monitoring.register_event_listener(lambda event, **kw: seen.append(event))
>>> monitoring.record_event("/my/event")
>>> seen
['/my/event']
>>> monitoring.clear_event_listeners()
"""
from xform.core.monitoring import (  # noqa: F401
    clear_event_listeners, record_event, record_event_duration_secs, record_event_time_span,
    record_scalar, register_event_duration_secs_listener, register_event_listener,
    register_event_time_span_listener, register_scalar_listener,
    unregister_event_duration_listener, unregister_event_listener,
    unregister_event_time_span_listener, unregister_scalar_listener)

__all__ = ["clear_event_listeners", "record_event", "record_event_duration_secs",
           "record_event_time_span", "record_scalar", "register_event_duration_secs_listener",
           "register_event_listener", "register_event_time_span_listener",
           "register_scalar_listener", "unregister_event_duration_listener",
           "unregister_event_listener", "unregister_event_time_span_listener",
           "unregister_scalar_listener"]
