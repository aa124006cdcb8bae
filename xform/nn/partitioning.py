"""``xform.nn.partitioning`` (``flax.linen.partitioning``): Flax's older logical-axis API
(T5X style), kept for code written against it. Parameters declared with
``param_with_axes`` keep their logical names in a parallel ``params_axes`` collection
(``AxisMetadata`` sown beside each variable) instead of boxing the value;
``get_axis_names`` turns that collection into logical ``PartitionSpec`` s, and
``scan_with_axes``/``vmap_with_axes`` insert the mapped axis' name there. New code uses
``nn.with_logical_partitioning`` (see :mod:`xform.nn._spmd`).
"""
import dataclasses
import re

from xform.core.sharding import PartitionSpec
from xform.core.tree_util import register_dataclass, tree_map
from xform.nn import _module, _scope, traverse_util
from xform.nn._lifted_ad import map_variables
from xform.nn._spmd import (  # noqa: F401  (flax.linen.partitioning's names)
    RulesFallback, _is_logical_spec, get_logical_axis_rules as get_axis_rules,
    logical_axis_rules as axis_rules, logical_to_mesh, logical_to_mesh_axes,
    set_logical_axis_rules as set_axis_rules,
    with_logical_constraint as with_sharding_constraint)
from xform.nn._transforms import checkpoint as remat  # (static_argnums included)
from xform.nn._transforms import scan, vmap
from xform.nn.core.frozen_dict import freeze, unfreeze

__all__ = ["AxisMetadata", "PartitionedVariable", "RulesFallback", "axis_rules",
           "get_axis_names", "get_axis_rules", "logical_to_mesh", "logical_to_mesh_axes",
           "param_with_axes", "remat", "scan_with_axes", "set_axis_rules",
           "variable_with_axes", "vmap_with_axes", "with_sharding_constraint"]


@dataclasses.dataclass(frozen=True)
class AxisMetadata:
    """The logical axis names of one variable (a leafless pytree: ``names`` is static)."""
    names: tuple

    def replace(self, **updates):
        return dataclasses.replace(self, **updates)


register_dataclass(AxisMetadata, [], ["names"])


def _sow_reduce(old, new):
    if not isinstance(new, AxisMetadata):
        raise TypeError("Expected newly sown value to be an AxisMetadata")
    if isinstance(old, AxisMetadata) and old != new:
        raise ValueError(f"If axis names are sown twice, expected them to match. Got "
                         f"{old} and {new}.")
    return new


def _current(module, what):
    module = module if module is not None else _module._context.module_stack[-1]
    if module is None:
        raise ValueError(f"{what} declares a variable of the Module being run: call it "
                         "inside a Module method (or pass module=)")
    return module


def param_with_axes(name, init_fn, *init_args, axes=None, module=None, **init_kwargs):
    """``self.param`` that constrains the value to logical ``axes`` and sows them into
    ``params_axes`` as ``<name>_axes``."""
    module = _current(module, "param_with_axes")
    value = module.param(name, init_fn, *init_args, **init_kwargs)
    if axes is not None:
        value = with_sharding_constraint(value, PartitionSpec(*axes))
        module.sow("params_axes", f"{name}_axes", AxisMetadata(tuple(axes)),
                   reduce_fn=_sow_reduce)
    return value


class PartitionedVariable(_scope.Variable):
    """A variable whose reads and writes are constrained to its logical ``axes``."""
    __slots__ = ("axes", "fallback")

    def __init__(self, scope, collection, name, axes=None,
                 fallback=RulesFallback.AXIS_IS_UNSHARDED):
        super().__init__(scope, collection, name, unbox=False)
        self.axes, self.fallback = axes, fallback

    @property
    def value(self):
        v = self.scope.get_variable(self.collection, self.name)
        if self.axes is not None:
            v = with_sharding_constraint(v, self.axes, fallback=self.fallback)
        return v

    @value.setter
    def value(self, value):
        if self.axes is not None:
            value = with_sharding_constraint(value, self.axes, fallback=self.fallback)
        self.scope.put_variable(self.collection, self.name, value)


def variable_with_axes(collection, name, init_fn, *init_args, axes=None, module=None,
                       fallback=RulesFallback.AXIS_IS_UNSHARDED, **init_kwargs):
    """``self.variable`` with logical ``axes`` (sown into ``<collection>_axes``);
    returns a :class:`PartitionedVariable`."""
    module = _current(module, "variable_with_axes")

    def init():
        value = init_fn(*init_args, **init_kwargs)
        return value if axes is None else with_sharding_constraint(value, axes,
                                                                   fallback=fallback)
    module.variable(collection, name, init, unbox=False)
    if axes is not None:
        module.sow(f"{collection}_axes", f"{name}_axes", AxisMetadata(tuple(axes)),
                   reduce_fn=_sow_reduce)
    return PartitionedVariable(module.scope, collection, name, axes, fallback)


def get_axis_names(axes_metadata):
    """A ``*_axes`` collection as logical ``PartitionSpec`` s, keyed by variable name
    (the ``_axes`` suffix removed)."""
    flat = traverse_util.flatten_dict(unfreeze(axes_metadata))
    out = {}
    for k, v in flat.items():
        spec = tree_map(lambda x: None if x is None else PartitionSpec(*x), v.names,
                        is_leaf=_is_logical_spec)
        out[k[:-1] + (re.sub(r"_axes$", "", k[-1]),)] = spec
    return freeze(traverse_util.unflatten_dict(out))


def _with_axis_in_metadata(fn, axis_pos, axis_name, axis_col):
    """``fn`` with ``axis_name`` inserted at ``axis_pos`` of every AxisMetadata in
    ``axis_col`` on the way out (and removed on the way in)."""
    axis_pos = getattr(axis_pos, "axis", axis_pos)

    def insert(names):
        names = list(names)
        names.insert(axis_pos, axis_name)
        return tuple(names)

    def remove(names):
        names = list(names)
        if names[axis_pos] != axis_name:
            raise ValueError(f"Expected axis {axis_name} at position {axis_pos} in axis "
                             f"metadata {names}.")
        names.pop(axis_pos)
        return tuple(names)

    def mapper(f):
        return lambda tree: tree_map(
            lambda x: x.replace(names=tree_map(lambda n: None if n is None else f(n),
                                               x.names, is_leaf=_is_logical_spec))
            if isinstance(x, AxisMetadata) else x,
            tree, is_leaf=lambda x: isinstance(x, AxisMetadata))
    parent = _module._context.module_stack[-1]
    mutable = parent is None or parent.is_mutable_collection(axis_col)
    return map_variables(fn, axis_col, mutable=mutable, trans_in_fn=mapper(remove),
                         trans_out_fn=mapper(insert))


def scan_with_axes(target, variable_axes={}, variable_broadcast=False,  # noqa: B006
                   variable_carry=False, split_rngs={}, in_axes=0, out_axes=0,  # noqa: B006
                   length=None, reverse=False, unroll=1, axis_name="layers",
                   axes_collections=("params",), data_transform=None, methods=None):
    """``nn.scan`` that broadcasts the ``*_axes`` collections and names the scanned
    axis ``axis_name`` in them."""
    broadcast = _scope.union_filters(variable_broadcast,
                                     tuple(f"{c}_axes" for c in axes_collections))
    scanned = scan(target, variable_axes=variable_axes, variable_broadcast=broadcast,
                   variable_carry=variable_carry, split_rngs=split_rngs, in_axes=in_axes,
                   out_axes=out_axes, length=length, reverse=reverse, unroll=unroll,
                   data_transform=data_transform, methods=methods)
    for col in axes_collections:
        if col in variable_axes:
            scanned = _with_axis_in_metadata(scanned, variable_axes[col], axis_name,
                                             f"{col}_axes")
    return scanned


def vmap_with_axes(target, variable_axes, split_rngs={}, in_axes=0, out_axes=0,  # noqa: B006
                   axis_size=None, axis_name=None, partitioning_axis_names={},  # noqa: B006
                   spmd_axis_name=None, methods=None):
    """``nn.vmap`` that names the mapped axis of collection ``c`` in ``c_axes`` as
    ``partitioning_axis_names[c]`` says."""
    variable_axes = dict(variable_axes)
    for name in partitioning_axis_names:
        variable_axes[f"{name}_axes"] = None
    vmapped = vmap(target, variable_axes=variable_axes, split_rngs=split_rngs,
                   in_axes=in_axes, out_axes=out_axes, axis_size=axis_size,
                   axis_name=axis_name, spmd_axis_name=spmd_axis_name, methods=methods)
    for col, axis in variable_axes.items():
        if col in partitioning_axis_names:
            vmapped = _with_axis_in_metadata(vmapped, axis, partitioning_axis_names[col],
                                             f"{col}_axes")
    return vmapped
