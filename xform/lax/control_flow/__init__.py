"""Structured control flow as higher-order primitives (cond, while, scan, ...)."""
from xform.lax.control_flow.loops import while_loop  # noqa: F401
from xform.lax.control_flow.conditionals import cond, switch  # noqa: F401
