"""Sharding descriptions: PartitionSpec, the Sharding classes and the layouts that say
which piece of an array each device's buffer holds.

A :class:`NamedSharding` splits array dimensions over mesh axes as a
:class:`PartitionSpec` says; its :class:`TiledLayout` is the arithmetic (device k's
block index, replica id) that arrays, device_put and the SPMD compile path share.
``MeshLayout`` is pmap's (mapped dimensions squeezed out of each device's buffer).
"""
import math

import numpy as np

from xform import backend
from xform.core.mesh import AbstractMesh, AxisType, Mesh


class _Unconstrained:
    """``P.UNCONSTRAINED``: the compiler may shard this dimension as it likes."""
    def __repr__(self):
        return "UNCONSTRAINED"

    def __reduce__(self):
        return "UNCONSTRAINED"


UNCONSTRAINED = _Unconstrained()


def _canonical_part(p):
    if isinstance(p, list):
        p = tuple(p)
    if isinstance(p, tuple):
        if len(p) == 0:
            return None
        if len(p) == 1:
            return p[0]
    return p


class PartitionSpec:
    """Per array dimension: a mesh axis name, a tuple of names, None (not split) or
    ``P.UNCONSTRAINED``. Also ``xform.P``.

    >>> from xform.sharding import PartitionSpec as P
    >>> P('x', None)
    P('x', None)
    """
    __slots__ = ("_partitions", "unreduced", "reduced")
    UNCONSTRAINED = UNCONSTRAINED

    def __init__(self, *partitions, unreduced=frozenset(), reduced=frozenset()):
        parts = tuple(_canonical_part(p) for p in partitions)
        for p in parts:
            if not (p is None or p is UNCONSTRAINED or isinstance(p, str) or
                    isinstance(p, tuple) and all(isinstance(q, str) for q in p)):
                raise TypeError(f"PartitionSpec entries must be a mesh axis name, a tuple "
                                f"of names, None or P.UNCONSTRAINED, got {p!r}")
        self._partitions = parts
        self.unreduced, self.reduced = frozenset(unreduced), frozenset(reduced)

    partitions = property(lambda self: self._partitions)

    def __repr__(self):
        return f"P({repr(self._partitions)[1:-1]})"

    def __eq__(self, other):
        return (isinstance(other, PartitionSpec) and self._partitions == other._partitions
                and self.unreduced == other.unreduced and self.reduced == other.reduced)

    def __hash__(self):
        return hash((self._partitions, self.unreduced, self.reduced))

    def __iter__(self):
        return iter(self._partitions)

    def __len__(self):
        return len(self._partitions)

    def __getitem__(self, i):
        return self._partitions[i]

    def __add__(self, other):
        return PartitionSpec(*self._partitions, *other)

    def __radd__(self, other):
        return PartitionSpec(*other, *self._partitions)

    def __reduce__(self):
        return (PartitionSpec, self._partitions)

    def index(self, value):
        return self._partitions.index(_canonical_part(value))

    def count(self, value):
        return self._partitions.count(_canonical_part(value))

    def axis_names(self):
        """The mesh axis names the spec uses, in order."""
        out = []
        for p in self._partitions:
            out.extend(() if p is None or p is UNCONSTRAINED else
                       (p,) if isinstance(p, str) else p)
        return out


P = PartitionSpec


class DuplicateSpecError(Exception):
    """A PartitionSpec names one mesh axis for two dimensions (or twice in one)."""


class IndivisibleError(ValueError):
    """A dimension is not divisible by the number of devices its spec splits it over."""


def _memory_kind(device, kind):
    """JAX's check of a sharding's ``memory_kind``: one ``device`` addresses (on CPU
    ``device``, ``pinned_host``, ``unpinned_host``); None: the default, ``device``."""
    if kind is None or kind == "device":
        return "device"
    kinds = [m.kind for m in device.addressable_memories()]
    if kind not in kinds:
        raise ValueError(
            f"Could not find memory addressable by device {device.device_kind}. Device "
            f"{device.device_kind} can address the following memory kinds: "
            f"{', '.join(kinds)}. Got memory kind: {kind}")
    return kind


class Sharding:
    """Base class of shardings: where each piece of an array lives (and in which of its
    devices' memories: ``memory_kind``).

    Subclasses give ``_device_assignment``, ``devices_indices_map`` and
    ``with_memory_kind``; the rest derives."""
    memory_kind = "device"

    @property
    def device_set(self):
        return set(self._device_assignment)

    @property
    def num_devices(self):
        return len(self._device_assignment)

    @property
    def addressable_devices(self):
        me = backend.process_index()
        return {d for d in self._device_assignment if d.process_index == me}

    @property
    def is_fully_addressable(self):
        return len(self.addressable_devices) == self.num_devices

    def addressable_devices_indices_map(self, global_shape):
        mine = self.addressable_devices
        return {d: i for d, i in self.devices_indices_map(global_shape).items() if d in mine}

    def shard_shape(self, global_shape):
        index = next(iter(self.devices_indices_map(global_shape).values()))
        return tuple(len(range(*s.indices(n))) for s, n in zip(index, global_shape))

    def is_equivalent_to(self, other, ndim):
        shape = (self.num_devices,) * ndim  # (a probe every tiling divides)
        return (self._device_assignment == other._device_assignment and
                _index_map_key(self, shape) == _index_map_key(other, shape))


def _index_map_key(s, shape):
    return [tuple(i.indices(n)[:2] for i, n in zip(idx, shape))  # (slice(None) == 0:n)
            for idx in s.devices_indices_map(shape).values()]


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""
    def __init__(self, device, *, memory_kind=None):
        self._device = device
        self.memory_kind = _memory_kind(device, memory_kind)

    def with_memory_kind(self, kind):
        return SingleDeviceSharding(self._device, memory_kind=kind)

    _device_assignment = property(lambda self: (self._device,))
    is_fully_replicated = True

    def devices_indices_map(self, global_shape):
        return {self._device: tuple(slice(None) for _ in global_shape)}

    def __eq__(self, other):
        return (isinstance(other, SingleDeviceSharding) and other._device == self._device
                and other.memory_kind == self.memory_kind)

    def __hash__(self):
        return hash((self._device, self.memory_kind))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


class NamedSharding(Sharding):
    """An array split over ``mesh`` as ``spec`` says.

    Raises:
      ValueError: if ``spec`` names an axis ``mesh`` lacks.
      DuplicateSpecError: if ``spec`` uses a mesh axis twice.

    >>> import xform
    >>> from xform.sharding import NamedSharding, PartitionSpec as P
    >>> NamedSharding(xform.make_mesh((2,), ('x',)), P('x')).spec
    P('x',)
    """
    def __init__(self, mesh, spec=PartitionSpec(), *, memory_kind=None):
        if not isinstance(spec, PartitionSpec):
            if spec is None or not isinstance(spec, (tuple, list)):
                raise TypeError(f"NamedSharding spec must be a PartitionSpec, got {spec!r}")
            spec = PartitionSpec(*spec)
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"NamedSharding mesh must be a Mesh, got {type(mesh)}")
        names = spec.axis_names()
        for n in names:
            if n not in mesh.axis_names:
                raise ValueError(f"Resource axis: {n} of {spec} is not found in mesh: "
                                 f"{mesh.axis_names}.")
        for n in names:
            if names.count(n) > 1:
                raise DuplicateSpecError(
                    "A single NamedSharding spec specification can map every mesh axis "
                    f"to at most one positional dimension, but {spec} has duplicate "
                    f"entries for `{n}`")
        if AxisType.Auto not in mesh.axis_types and UNCONSTRAINED in spec:
            raise ValueError(f"{spec} cannot contain `P.UNCONSTRAINED` when no mesh "
                             f"axis_types are `Auto`. Got mesh axis_types: {mesh.axis_types}")
        self.mesh, self.spec = mesh, spec
        self._layout = None
        self.memory_kind = None if isinstance(mesh, AbstractMesh) else \
            _memory_kind(mesh._flat_devices[0], memory_kind)

    @property
    def _device_assignment(self):
        if isinstance(self.mesh, AbstractMesh):
            raise ValueError(f"{self} has an AbstractMesh: it has no devices")
        return self.mesh._flat_devices

    @property
    def is_fully_replicated(self):
        sizes = self.mesh.shape
        return all(sizes[n] == 1 for n in self.spec.axis_names())

    def layout(self):
        """The :class:`TiledLayout` of arrays with this sharding."""
        if self._layout is None:
            index = {n: i for i, n in enumerate(self.mesh.axis_names)}
            spec = [() if p is None or p is UNCONSTRAINED else
                    (index[p],) if isinstance(p, str) else tuple(index[q] for q in p)
                    for p in self.spec]
            self._layout = TiledLayout(self._device_assignment, self.mesh.axis_sizes,
                                       self.mesh.axis_names, spec, named=self)
        return self._layout

    def check_shape(self, shape, what="One of device_put args", uneven_ok=False):
        """Raise JAX's errors if arrays of ``shape`` cannot have this sharding
        (``uneven_ok``: the rank only; inside a program XLA pads uneven blocks)."""
        if len(self.spec) > len(shape):
            raise ValueError(
                f"{what} is incompatible with its sharding annotation {self}: Sharding "
                f"{self} is only valid for values of rank at least {len(self.spec)}, but "
                f"was applied to a value of rank {len(shape)}.")
        if uneven_ok:
            return
        sizes = self.mesh.shape
        tiles = [math.prod(sizes[n] for n in PartitionSpec(p).axis_names())
                 for p in self.spec] + [1] * (len(shape) - len(self.spec))
        for i, (n, t) in enumerate(zip(shape, tiles)):
            if n % t:
                raise IndivisibleError(
                    f"Sharding {self} implies that array axis {i} is partitioned {t} "
                    f"times, but the dimension size is {n} (full shape: {tuple(shape)}, "
                    f"per-dimension tiling factors: {tiles} should evenly divide the shape)")

    def devices_indices_map(self, global_shape):
        self.check_shape(global_shape, "An array")
        lay = self.layout()
        return {d: lay.shard_index(k, global_shape)[0] for k, d in enumerate(lay.devices)}

    def shard_shape(self, global_shape):
        self.check_shape(global_shape, "An array")
        return self.layout().shard_shape(global_shape)

    def with_spec(self, spec):
        return NamedSharding(self.mesh, spec, memory_kind=self.memory_kind)

    def update(self, *, mesh=None, spec=None, memory_kind=None):
        """This sharding with the given fields replaced (as JAX's)."""
        return NamedSharding(self.mesh if mesh is None else mesh,
                             self.spec if spec is None else spec,
                             memory_kind=self.memory_kind if memory_kind is None
                             else memory_kind)

    def with_memory_kind(self, kind):
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    def __eq__(self, other):
        return (isinstance(other, NamedSharding) and self.mesh == other.mesh and
                self.spec == other.spec and self.memory_kind == other.memory_kind)

    def __hash__(self):
        return hash((self.mesh, self.spec, self.memory_kind))

    def __repr__(self):
        kind = "" if self.memory_kind is None else f", memory_kind={self.memory_kind}"
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}{kind})"


class Shard:
    """One device's piece of an Array: ``device``, ``index`` (into the full array),
    ``data`` (a single-device Array) and ``replica_id``."""
    __slots__ = ("device", "index", "data", "replica_id")

    def __init__(self, device, index, data, replica_id):
        self.device, self.index, self.data, self.replica_id = device, index, data, replica_id

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


# ---- layouts: how per-device buffers tile an array ----

class GridLayout:
    """Base of the layouts of per-device buffers over a mesh whose devices are numbered
    row-major (``sizes`` per mesh axis); subclasses set ``_key``, which they compare by."""
    __slots__ = ()

    def __eq__(self, other):
        return type(other) is type(self) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def local(self):
        """The positions ``k`` of this process's devices in ``devices``: the buffers a
        ShardedArray holds (all of them unless the mesh spans processes)."""
        me = backend.process_index()
        return [k for k, d in enumerate(self.devices) if d.process_index == me]

    def coords(self, k):
        """Device ``k``'s coordinates on the mesh (major axis first)."""
        out = []
        for size in reversed(self.sizes):
            out.append(k % size)
            k //= size
        return tuple(reversed(out))


class MeshLayout(GridLayout):
    """pmap's layout: per mesh axis, the array dimension it indexes (``dims``; that
    dimension has the axis's size and each device holds one index of it, squeezed) or
    None (replicated along that mesh axis)."""
    __slots__ = ("devices", "sizes", "dims", "names", "_key")

    def __init__(self, devices, sizes, dims, names):
        self.devices, self.sizes = tuple(devices), tuple(sizes)
        self.dims, self.names = tuple(dims), tuple(names)
        self._key = (self.devices, self.sizes, self.dims)

    def shard_shape(self, shape):
        mapped = {d for d in self.dims if d is not None}
        return tuple(s for i, s in enumerate(shape) if i not in mapped)

    def shard_index(self, k, shape):
        c = self.coords(k)
        index = [slice(None)] * len(shape)
        replica = 0
        for ci, d, size in zip(c, self.dims, self.sizes):
            if d is None:
                replica = replica * size + ci
            else:
                index[d] = ci
        return tuple(index), replica

    def assemble(self, parts):
        """The full host array from the per-device host arrays."""
        stacked = np.stack(parts).reshape(self.sizes + parts[0].shape)
        # drop replicated mesh axes (take index 0), then put mapped ones at their dims
        index = tuple(0 if d is None else slice(None) for d in self.dims)
        stacked = stacked[index]
        mapped = [d for d in self.dims if d is not None]
        n_mapped, body_rank = len(mapped), stacked.ndim - len(mapped)
        full_rank = n_mapped + body_rank
        perm = [None] * full_rank
        for i, d in enumerate(mapped):
            perm[d] = i
        body = iter(range(n_mapped, full_rank))
        perm = [p if p is not None else next(body) for p in perm]
        return np.ascontiguousarray(np.transpose(stacked, perm))

    def sharding(self):
        rank = max([d + 1 for d in self.dims if d is not None], default=0)
        spec = [None] * rank
        names = [n if isinstance(n, str) else "_internal_pmap_axis_name" if i == 0 else
                 f"_axis{i}" for i, n in enumerate(self.names)]  # (unnamed: JAX's name)
        mesh = Mesh(np.array(self.devices, dtype=object).reshape(self.sizes), names)
        for name, d in zip(names, self.dims):
            if d is not None:
                spec[d] = name if spec[d] is None else (
                    (spec[d] if isinstance(spec[d], tuple) else (spec[d],)) + (name,))
        return NamedSharding(mesh, PartitionSpec(*spec))


class TiledLayout(GridLayout):
    """A NamedSharding's layout: ``spec[i]`` is the tuple of mesh axis indices (major
    first) splitting dimension ``i`` into equal blocks; each device holds its block,
    replicated along the mesh axes no entry uses. ``named`` is the NamedSharding it
    stands for (reported as the array's ``.sharding``; not part of equality)."""
    __slots__ = ("devices", "sizes", "names", "spec", "_key", "named")

    def __init__(self, devices, sizes, names, spec, named=None):
        self.devices, self.sizes = tuple(devices), tuple(sizes)
        self.names, self.spec = tuple(names), tuple(tuple(p) for p in spec)
        while self.spec and not self.spec[-1]:
            self.spec = self.spec[:-1]
        self._key = (self.devices, self.sizes, self.spec)
        self.named = named

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

    def split(self, value):
        """Device k's block of the host array ``value``, for each k of this process's
        devices (``local()``; views, no copies)."""
        return [value[self.shard_index(k, value.shape)[0]] for k in self.local()]

    def sharding(self):
        if self.named is not None:
            return self.named
        names = [n if isinstance(n, str) else "_internal_pmap_axis_name" if i == 0 else
                 f"_axis{i}" for i, n in enumerate(self.names)]  # (unnamed: JAX's name)
        mesh = Mesh(np.array(self.devices, dtype=object).reshape(self.sizes), names)
        spec = [None if not p else names[p[0]] if len(p) == 1 else
                tuple(names[a] for a in p) for p in self.spec]
        return NamedSharding(mesh, PartitionSpec(*spec))
