"""Axis metadata on variables (Flax's ``core/meta.py``): ``Partitioned`` boxes a
parameter with the mesh-axis names of its dimensions; ``param``/``variable`` unbox it
for use, ``init`` returns the boxes, and lifted ``vmap``/``scan`` insert/remove the
mapped axis' name (``metadata_params={nn.PARTITION_NAME: 'layers'}``)."""
import dataclasses
import functools

from xform import lax
from xform.core.mesh import get_abstract_mesh
from xform.core.sharding import NamedSharding, PartitionSpec
from xform.core.tree_util import register_dataclass, tree_map
from xform.nn import errors

__all__ = ["AxisMetadata", "PARTITION_NAME", "Partitioned", "add_axis", "get_global_mesh",
           "get_partition_spec", "get_sharding", "global_mesh_defined", "is_axis_metadata",
           "map_axis_meta", "remove_axis", "replace_boxed", "unbox", "with_partitioning"]

PARTITION_NAME = "partition_name"


class AxisMetadata:
    """A box around a variable value carrying per-axis metadata."""

    def unbox(self):
        raise NotImplementedError

    def replace_boxed(self, val):
        raise NotImplementedError

    def add_axis(self, index, params):
        raise NotImplementedError

    def remove_axis(self, index, params):
        raise NotImplementedError


def is_axis_metadata(val):
    """Whether ``val`` is an ``AxisMetadata`` box."""
    return isinstance(val, AxisMetadata)


def map_axis_meta(fn, tree):
    """Applies ``fn`` to every ``AxisMetadata`` box in ``tree`` (other leaves kept)."""
    return tree_map(lambda x: fn(x) if is_axis_metadata(x) else x, tree,
                    is_leaf=is_axis_metadata)


def unbox(tree):
    """Strips every ``AxisMetadata`` box from ``tree``."""
    return map_axis_meta(lambda x: unbox(x.unbox()), tree)


def add_axis(tree, index, params):
    return map_axis_meta(lambda x: x.add_axis(index, params), tree)


def remove_axis(tree, index, params):
    return map_axis_meta(lambda x: x.remove_axis(index, params), tree)


def replace_boxed(tree, updates):
    """``updates`` (plain values) put back into ``tree``'s boxes."""
    return tree_map(lambda c, v: c.replace_boxed(replace_boxed(c.unbox(), v))
                    if is_axis_metadata(c) else v, tree, updates, is_leaf=is_axis_metadata)


def get_global_mesh():
    """The mesh set with ``xform.set_mesh`` (flax reads JAX's abstract mesh, so a legacy
    ``with mesh:`` does not count), or None."""
    mesh = get_abstract_mesh()
    return None if mesh.empty else mesh


def global_mesh_defined():
    """Whether a global mesh is set (then ``Partitioned.unbox`` constrains its value)."""
    return get_global_mesh() is not None


@dataclasses.dataclass(frozen=True)
class Partitioned(AxisMetadata):
    """A value with the mesh-axis ``names`` of its dimensions (None: replicated).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> init = nn.with_partitioning(nn.initializers.zeros, (None, 'model'))
    >>> v = nn.Dense(4, kernel_init=init).init(xform.random.PRNGKey(0), jnp.ones((1, 2)))
    >>> nn.get_partition_spec(v)['params']['kernel']
    P(None, 'model')
    """
    value: object
    names: tuple
    mesh: object = None

    def unbox(self, apply_constraint=True):
        """The value; under a global mesh or with ``mesh`` set, constrained to be
        sharded as ``names`` say (``lax.with_sharding_constraint``)."""
        if apply_constraint and (self.mesh is not None or global_mesh_defined()):
            spec = self.get_partition_spec()
            where = spec if self.mesh is None else NamedSharding(self.mesh, spec)
            return lax.with_sharding_constraint(self.value, where)
        return self.value

    def replace(self, **updates):
        return dataclasses.replace(self, **updates)

    def replace_boxed(self, val):
        return self.replace(value=val)

    def _name(self, params):
        if PARTITION_NAME not in params:
            raise errors.PartitioningUnspecifiedError(self)
        return params[PARTITION_NAME]

    def add_axis(self, index, params):
        names = list(self.names)
        while len(names) < index:
            names.append(None)
        names.insert(index, self._name(params))
        return self.replace(names=tuple(names))

    def remove_axis(self, index, params):
        names = list(self.names)
        assert names.pop(index) == self._name(params)
        return self.replace(names=tuple(names))

    def get_partition_spec(self):
        return PartitionSpec(*self.names)

    def get_sharding(self, mesh):
        return NamedSharding(mesh, self.get_partition_spec())


register_dataclass(Partitioned, ["value"], ["names", "mesh"])


def with_partitioning(fn, names, mesh=None):
    """Wraps initializer ``fn`` so its output is boxed as ``Partitioned(names)``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return Partitioned(fn(*args, **kwargs), tuple(names), mesh=mesh)
    return wrapper


def _leaf_spec(x):
    if hasattr(x, "get_partition_spec"):
        return x.get_partition_spec()
    return PartitionSpec() if hasattr(x, "shape") else None


def get_partition_spec(tree):
    """The ``PartitionSpec`` tree of ``tree`` (unboxed arrays: replicated)."""
    return tree_map(_leaf_spec, tree, is_leaf=is_axis_metadata)


def get_sharding(tree, mesh):
    """The ``NamedSharding`` tree of ``tree`` on ``mesh`` (boxes give their own)."""
    def leaf(x):
        if hasattr(x, "get_sharding"):
            return x.get_sharding(mesh)
        spec = _leaf_spec(x)
        return None if spec is None else NamedSharding(mesh, spec)
    return tree_map(leaf, tree, is_leaf=is_axis_metadata)
