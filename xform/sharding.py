"""Meshes, partition specs and shardings (``jax.sharding``'s names).

A :class:`Mesh` arranges devices in an n-d grid with named axes; a
:class:`PartitionSpec` says, per array dimension, which mesh axes split it; a
:class:`NamedSharding` pairs them. The classes live in ``xform.core.mesh`` and
``xform.core.sharding``; this module is their public face.
"""
from xform.core.mesh import (  # noqa: F401
    AbstractDevice, AbstractMesh, AxisType, Mesh, current_mesh, get_abstract_mesh, get_mesh,
    make_mesh, set_mesh, use_abstract_mesh, use_mesh)
from xform.core.sharding import (  # noqa: F401
    DuplicateSpecError, IndivisibleError, NamedSharding, P, PartitionSpec, Shard,
    Sharding, SingleDeviceSharding)
from xform.lax.sharding_constraint import auto_axes, explicit_axes, reshard  # noqa: F401


def make_single_device_sharding(device, *, memory_kind=None):
    """A :class:`SingleDeviceSharding` on ``device`` (``jax.sharding``'s constructor)."""
    return SingleDeviceSharding(device, memory_kind=memory_kind)
