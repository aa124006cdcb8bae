"""``flax.core.spmd``: the logical-axis rules in force (set per thread); the
implementation is :mod:`xform.nn._spmd`."""
from xform.nn._spmd import (  # noqa: F401
    get_logical_axis_rules, logical_axis_rules, set_logical_axis_rules)

__all__ = ["get_logical_axis_rules", "logical_axis_rules", "set_logical_axis_rules"]
