"""Axis metadata on variables (Flax's ``core/meta.py``): ``Partitioned`` boxes a
parameter with the mesh-axis names of its dimensions; ``param``/``variable`` unbox it
for use, ``init`` returns the boxes, and lifted ``vmap``/``scan`` insert/remove the
mapped axis' name (``metadata_params={nn.PARTITION_NAME: 'layers'}``)."""
import dataclasses
import functools

from xform.core.tree_util import register_pytree_node, tree_map
from xform.core.sharding import NamedSharding, PartitionSpec

__all__ = ["AxisMetadata", "PARTITION_NAME", "Partitioned", "add_axis", "get_partition_spec",
           "get_sharding", "is_axis_metadata", "map_axis_meta", "remove_axis",
           "replace_boxed", "unbox", "with_partitioning"]

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


@dataclasses.dataclass(frozen=True)
class Partitioned(AxisMetadata):
    """A value with the mesh-axis ``names`` of its dimensions (None: replicated).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> init = nn.with_partitioning(nn.initializers.zeros, (None, 'model'))
    >>> v = nn.Dense(4, kernel_init=init).init(xform.random.PRNGKey(0), jnp.ones((1, 2)))
    >>> nn.get_partition_spec(v)['params']['kernel']
    PartitionSpec(None, 'model')
    """
    value: object
    names: tuple
    mesh: object = None

    def unbox(self, apply_constraint=True):
        return self.value

    def replace_boxed(self, val):
        return dataclasses.replace(self, value=val)

    def _name(self, params):
        if PARTITION_NAME not in params:
            raise ValueError(
                f"Trying to transform a Partitioned variable but no axis name was given: "
                f"pass metadata_params={{nn.PARTITION_NAME: ...}} to the lifted "
                f"transform (names={self.names}).")
        return params[PARTITION_NAME]

    def add_axis(self, index, params):
        names = list(self.names)
        while len(names) < index:
            names.append(None)
        names.insert(index, self._name(params))
        return dataclasses.replace(self, names=tuple(names))

    def remove_axis(self, index, params):
        names = list(self.names)
        assert names.pop(index) == self._name(params)
        return dataclasses.replace(self, names=tuple(names))

    def get_partition_spec(self):
        return PartitionSpec(*self.names)

    def get_sharding(self, mesh):
        return NamedSharding(mesh, self.get_partition_spec())


register_pytree_node(Partitioned, lambda p: ((p.value,), (p.names, p.mesh)),
                     lambda aux, kids: Partitioned(kids[0], *aux))


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
    """The ``NamedSharding`` tree of ``tree`` on ``mesh``."""
    return tree_map(lambda s: None if s is None else NamedSharding(mesh, s),
                    get_partition_spec(tree),
                    is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None)
