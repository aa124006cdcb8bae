"""``xform.nn.core.tracers`` (``flax.core.tracers``): the current trace, which a
``Scope`` could compare with the one it was made under (Flax has the check off)."""
from xform.core.trace import current_trace

__all__ = ["check_trace_level", "current_trace"]


def check_trace_level(base_level):
    """No check, as Flax 0.12.8 (its check broke too many users' code)."""
    del base_level
