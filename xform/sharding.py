"""Meshes, partition specs and shardings (``jax.sharding``'s names).

A :class:`Mesh` arranges devices in an n-d grid with named axes; a
:class:`PartitionSpec` says, per array dimension, which mesh axes split it. shard_map
maps a function over such a mesh; arrays that live on several devices report a
:class:`NamedSharding`, ordinary ones a :class:`SingleDeviceSharding`.
"""
import math

import numpy as np

from xform.core.array import GridLayout


class PartitionSpec(tuple):
    """Per array dimension: a mesh axis name, a tuple of names, or None (not split).

    >>> from xform.sharding import PartitionSpec as P
    >>> P('x', None)
    PartitionSpec('x', None)
    """
    def __new__(cls, *parts):
        for p in parts:
            if not (p is None or isinstance(p, str) or
                    isinstance(p, tuple) and all(isinstance(q, str) for q in p)):
                raise TypeError(f"PartitionSpec entries must be a mesh axis name, a tuple "
                                f"of names or None, got {p!r}")
        return super().__new__(cls, parts)

    def __repr__(self):
        return "PartitionSpec(" + ", ".join(repr(p) for p in self) + ")"

    def axis_names(self):
        """The mesh axis names the spec uses, in order."""
        out = []
        for p in self:
            out.extend(() if p is None else (p,) if isinstance(p, str) else p)
        return out


P = PartitionSpec


class Mesh:
    """Devices in a grid with named axes.

    Args:
      devices: an n-d array (or nested list) of devices.
      axis_names: one name per dimension of ``devices``.

    >>> import xform
    >>> from xform.sharding import Mesh
    >>> Mesh(xform.devices()[:2], ('x',)).shape
    {'x': 2}
    """
    def __init__(self, devices, axis_names):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        devices = np.array(devices, dtype=object)
        axis_names = tuple(axis_names)
        if devices.ndim != len(axis_names):
            raise ValueError(f"Mesh requires one axis name per dimension of devices: got "
                             f"devices of shape {devices.shape} and axis_names {axis_names}")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh axis names must be unique, got {axis_names}")
        self.devices = devices
        self.axis_names = axis_names

    @property
    def shape(self):
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self):
        return self.devices.size

    @property
    def axis_sizes(self):
        return tuple(self.devices.shape)

    def __eq__(self, other):
        return (isinstance(other, Mesh) and self.axis_names == other.axis_names and
                self.devices.shape == other.devices.shape and
                all(a == b for a, b in zip(self.devices.flat, other.devices.flat)))

    def __hash__(self):
        return hash((self.axis_names, self.devices.shape, tuple(self.devices.flat)))

    def __repr__(self):
        return f"Mesh({self.shape})"

    def __enter__(self):
        _mesh_stack.append(self)
        return self

    def __exit__(self, *exc):
        _mesh_stack.pop()
        return False


_mesh_stack = []  # meshes entered with ``with mesh:`` (innermost last)


def current_mesh():
    """The innermost mesh entered with ``with mesh:``, or None."""
    return _mesh_stack[-1] if _mesh_stack else None


def make_mesh(axis_shapes, axis_names, *, devices=None, axis_types=None):
    """A Mesh of the first ``prod(axis_shapes)`` devices in the given grid shape.

    Raises:
      ValueError: if more devices are asked for than exist.

    >>> import xform
    >>> xform.make_mesh((2, 2), ('x', 'y')).shape
    {'x': 2, 'y': 2}
    """
    from xform import backend
    axis_shapes = tuple(axis_shapes)
    devices = list(devices) if devices is not None else backend.devices()
    n = math.prod(axis_shapes)
    if n > len(devices):
        raise ValueError(f"make_mesh: the mesh shape {axis_shapes} needs {n} devices, but "
                         f"only {len(devices)} are available")
    return Mesh(np.array(devices[:n], dtype=object).reshape(axis_shapes), axis_names)


class Sharding:
    """Base class of shardings."""


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""
    def __init__(self, device):
        self._device = device

    @property
    def device_set(self):
        return {self._device}

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self):
        return hash(self._device)

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r})"


class NamedSharding(Sharding):
    """An array split over ``mesh`` as ``spec`` says.

    >>> import xform
    >>> from xform.sharding import NamedSharding, PartitionSpec as P
    >>> NamedSharding(xform.make_mesh((2,), ('x',)), P('x')).spec
    PartitionSpec('x')
    """
    def __init__(self, mesh, spec=PartitionSpec()):
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(*spec)
        unknown = [n for n in spec.axis_names() if n not in mesh.axis_names]
        if unknown:
            raise ValueError(f"NamedSharding spec {spec} names axis {unknown[0]!r}, which "
                             f"is not an axis of the mesh {mesh.axis_names}")
        self.mesh, self.spec = mesh, spec

    @property
    def device_set(self):
        return set(self.mesh.devices.flat)

    def __eq__(self, other):
        return (isinstance(other, NamedSharding) and self.mesh == other.mesh and
                tuple(self.spec) == tuple(other.spec))

    def __hash__(self):
        return hash((self.mesh, tuple(self.spec)))

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


class Shard:
    """One device's piece of an Array: ``device``, ``index`` (into the full array),
    ``data`` (a single-device Array) and ``replica_id``."""
    __slots__ = ("device", "index", "data", "replica_id")

    def __init__(self, device, index, data, replica_id):
        self.device, self.index, self.data, self.replica_id = device, index, data, replica_id

    def __repr__(self):
        return f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id})"


class TiledLayout(GridLayout):
    """How a :class:`~xform.core.array.ShardedArray`'s buffers tile it as a
    PartitionSpec says (what shard_map returns): ``spec[i]`` is the tuple of mesh axis
    indices (major first) splitting dimension ``i`` into equal blocks; each device
    holds its block, replicated along the mesh axes no entry uses. Same interface as
    ``MeshLayout`` (which squeezes mapped dimensions, pmap-style)."""
    __slots__ = ("devices", "sizes", "names", "spec", "_key")

    def __init__(self, devices, sizes, names, spec):
        self.devices, self.sizes = tuple(devices), tuple(sizes)
        self.names, self.spec = tuple(names), tuple(tuple(p) for p in spec)
        self._key = (self.devices, self.sizes, self.spec)

    def _count(self, i):
        return math.prod(self.sizes[a] for a in self.spec[i]) if i < len(self.spec) else 1

    def shard_shape(self, shape):
        return tuple(s // self._count(i) for i, s in enumerate(shape))

    def shard_index(self, k, shape):
        c = self.coords(k)
        index = []
        for i, s in enumerate(shape):
            axes = self.spec[i] if i < len(self.spec) else ()
            lin = 0
            for a in axes:
                lin = lin * self.sizes[a] + c[a]
            block = s // self._count(i)
            index.append(slice(lin * block, (lin + 1) * block) if axes else slice(None))
        used = {a for p in self.spec for a in p}
        replica = 0
        for a, size in enumerate(self.sizes):
            if a not in used:
                replica = replica * size + c[a]
        return tuple(index), replica

    def assemble(self, parts):
        """The full host array from the per-device host arrays."""
        shape = tuple(s * self._count(i) for i, s in enumerate(parts[0].shape))
        out = np.empty(shape, parts[0].dtype)
        for k, part in enumerate(parts):
            index, replica = self.shard_index(k, shape)
            if replica == 0:
                out[index] = part
        return out

    def sharding(self):
        names = [n if isinstance(n, str) else f"_axis{i}" for i, n in enumerate(self.names)]
        mesh = Mesh(np.array(self.devices, dtype=object).reshape(self.sizes), names)
        spec = [None if not p else names[p[0]] if len(p) == 1 else
                tuple(names[a] for a in p) for p in self.spec]
        while spec and spec[-1] is None:
            spec.pop()
        return NamedSharding(mesh, PartitionSpec(*spec))
