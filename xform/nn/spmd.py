"""``xform.nn.spmd`` (``flax.linen.spmd``): logical axis names mapped onto mesh axes;
the implementation is :mod:`xform.nn._spmd`."""
from xform.nn._spmd import (  # noqa: F401
    LogicallyPartitioned, RulesFallback, get_logical_axis_rules, logical_to_mesh,
    logical_to_mesh_axes, logical_to_mesh_sharding, with_logical_constraint,
    with_logical_partitioning)

__all__ = ["LogicallyPartitioned", "RulesFallback", "get_logical_axis_rules",
           "logical_to_mesh", "logical_to_mesh_axes", "logical_to_mesh_sharding",
           "with_logical_constraint", "with_logical_partitioning"]
