"""Meshes: devices in an n-d grid with named axes, and the mesh in context.

``Mesh`` holds devices; ``AbstractMesh`` only axis names, sizes and types (what a
traced program may depend on). ``set_mesh`` / ``use_mesh`` / ``with mesh:`` put a mesh
in context, so bare ``PartitionSpec``s can stand for ``NamedSharding(mesh, spec)``.
"""
import collections
import contextlib
import dataclasses
import enum
import math

import numpy as np

from xform import backend
from xform.core.config import config


class AxisType(enum.Enum):
    """How the compiler treats a mesh axis: ``Auto`` (XLA chooses shardings),
    ``Explicit`` (shardings are part of the types) or ``Manual`` (shard_map)."""
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


def _axis_types(axis_types, n):
    if axis_types is None:
        return (AxisType.Auto,) * n
    if isinstance(axis_types, AxisType):
        axis_types = (axis_types,)
    axis_types = tuple(axis_types)
    if len(axis_types) != n or not all(isinstance(t, AxisType) for t in axis_types):
        raise ValueError(f"axis_types must be one AxisType per mesh axis ({n}), got "
                         f"{axis_types}")
    return axis_types


def _shape_str(names, sizes, types):
    body = ", ".join(f"'{n}': {s}" for n, s in zip(names, sizes))
    return f"{body}, axis_types={tuple(types)!r}" if names else "(), axis_types=()"


@dataclasses.dataclass(frozen=True)
class AbstractDevice:
    """The kind of device an abstract mesh stands for (no device itself)."""
    device_kind: str
    num_cores: object = None
    platform: str = None

    def __repr__(self):
        return f"AbstractDevice({self._repr()})"

    def _repr(self):
        return (f"device_kind={self.device_kind}, num_cores={self.num_cores}, "
                f"platform={self.platform}")


class AbstractMesh:
    """A mesh's axis names, sizes and types without its devices.

    NB equality leaves ``abstract_device`` out (JAX's interned meshes compare it): xform
    compiles for one platform, so a concrete mesh's abstract mesh equals a bare one.

    >>> from xform.sharding import AbstractMesh
    >>> dict(AbstractMesh((2, 4), ('a', 'b')).shape)
    {'a': 2, 'b': 4}
    """
    def __init__(self, axis_sizes, axis_names, axis_types=None, *, abstract_device=None):
        self.axis_sizes, self.axis_names = tuple(axis_sizes), tuple(axis_names)
        self.abstract_device = abstract_device
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(f"AbstractMesh: axis_sizes {self.axis_sizes} and axis_names "
                             f"{self.axis_names} differ in length")
        self.axis_types = _axis_types(axis_types, len(self.axis_names))

    shape = property(lambda self: collections.OrderedDict(zip(self.axis_names,
                                                              self.axis_sizes)))
    shape_tuple = property(lambda self: tuple(zip(self.axis_names, self.axis_sizes)))
    size = property(lambda self: math.prod(self.axis_sizes))
    empty = property(lambda self: not self.axis_names)
    abstract_mesh = property(lambda self: self)

    def _key(self):
        return (self.axis_sizes, self.axis_names, self.axis_types)

    def __eq__(self, other):
        return isinstance(other, AbstractMesh) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        dev = "" if self.abstract_device is None else f", {self.abstract_device._repr()}"
        return (f"AbstractMesh({_shape_str(self.axis_names, self.axis_sizes, self.axis_types)}"
                f"{dev})")


class Mesh:
    """Devices in a grid with named axes.

    Args:
      devices: an n-d array (or nested list) of devices.
      axis_names: one name per dimension of ``devices``.
      axis_types: one :class:`AxisType` per axis (default: all ``Auto``).

    Raises:
      ValueError: if the names do not match the grid's rank or repeat.

    >>> import xform
    >>> from xform.sharding import Mesh
    >>> dict(Mesh(xform.devices()[:2], ('x',)).shape)
    {'x': 2}
    """
    def __init__(self, devices, axis_names, axis_types=None):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        devices = np.array(devices, dtype=object)
        axis_names = tuple(axis_names)
        if devices.ndim != len(axis_names):
            raise ValueError(
                "Mesh requires the ndim of its first argument (`devices`) to equal the "
                "length of its second argument (`axis_names`), but got devices.ndim == "
                f"{devices.ndim} and len(axis_names) == {len(axis_names)}.")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh axis names must be unique, got {axis_names}")
        self.devices = devices
        self.axis_names = axis_names
        self.axis_types = _axis_types(axis_types, len(axis_names))
        d = devices.flat[0] if devices.size else None
        self.abstract_mesh = AbstractMesh(
            devices.shape, axis_names, self.axis_types, abstract_device=d and
            AbstractDevice(d.device_kind, None, d.platform))

    shape = property(lambda self: self.abstract_mesh.shape)
    shape_tuple = property(lambda self: self.abstract_mesh.shape_tuple)
    size = property(lambda self: self.devices.size)
    axis_sizes = property(lambda self: tuple(self.devices.shape))
    empty = property(lambda self: self.devices.size == 0)
    device_ids = property(lambda self: np.vectorize(lambda d: d.id, otypes=[int])(
        self.devices))
    local_devices = property(lambda self: list(self.devices.flat))
    is_multi_process = property(lambda self: len({d.process_index
                                                  for d in self.devices.flat}) > 1)

    @property
    def _flat_devices(self):
        return tuple(self.devices.flat)

    def _key(self):
        return (self.axis_names, self.devices.shape, tuple(d.id for d in self.devices.flat),
                self.axis_types)

    def __eq__(self, other):
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __str__(self):
        return f"Mesh({_shape_str(self.axis_names, self.axis_sizes, self.axis_types)})"

    def __repr__(self):
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
                f"axis_types={self.axis_types!r})")

    def __enter__(self):
        _switch(lambda: _context.append(self))
        return self

    def __exit__(self, *exc):
        _switch(_context.pop)
        return False


_context = []      # meshes in context (innermost last)
_global = [None]   # the mesh ``set_mesh(mesh)`` set outside any ``with``
_abstract = []     # abstract meshes in context (``use_abstract_mesh``), innermost last


def context_key():
    """The abstract mesh in context, or None: what a trace may depend on, so part of
    jit's trace key (as JAX's trace context)."""
    if _abstract:
        return _abstract[-1]
    m = current_mesh()
    return None if m is None else m.abstract_mesh


def _switch(change):
    """Apply ``change`` to the mesh context; a different mesh in context is told to
    config's listeners (as ``"mesh"``): jit's cache-hit paths, keyed on avals alone,
    forget what was traced under the one before."""
    before = context_key()
    change()
    if context_key() != before:
        for fn in config._listeners:
            fn("mesh", None)


def current_mesh():
    """The concrete mesh in context (``with mesh:``, ``set_mesh``, ``use_mesh``) or None."""
    return _context[-1] if _context else _global[0]


def get_abstract_mesh():
    """The abstract mesh in context (an empty one when there is none).

    >>> from xform.sharding import get_abstract_mesh
    >>> get_abstract_mesh().empty
    True
    """
    if _abstract:
        return _abstract[-1]
    m = current_mesh()
    return AbstractMesh((), ()) if m is None else m.abstract_mesh


class use_abstract_mesh:
    """Context manager making ``mesh`` (an :class:`AbstractMesh`) what
    :func:`get_abstract_mesh` answers, e.g. the mesh of an array type built inside.

    xform honours it there only: it does not retarget tracing or lowering to the
    abstract device's platform (xform compiles for the one platform it runs on).

    Raises:
      ValueError: if ``mesh`` is not an AbstractMesh, or it changes the size of a
        non-empty abstract mesh already in context.

    >>> from xform.sharding import AbstractMesh, get_abstract_mesh, use_abstract_mesh
    >>> with use_abstract_mesh(AbstractMesh((2,), ('x',))):
    ...     get_abstract_mesh().axis_names
    ('x',)
    """
    __slots__ = ("mesh",)

    def __init__(self, mesh):
        if not isinstance(mesh, AbstractMesh):
            raise ValueError("Expected mesh of type `jax.sharding.AbstractMesh`. Got type:"
                             f" {type(mesh)}")
        self.mesh = mesh

    def __enter__(self):
        prev = get_abstract_mesh()  # a concrete mesh in context counts too, as in JAX
        if (not prev.empty and not self.mesh.empty
                and prev.size != self.mesh.size):
            raise ValueError(
                "use_abstract_mesh cannot change the size of the mesh. Got new mesh: "
                f"{self.mesh} with size={self.mesh.size} and prev mesh: {prev} with "
                f"size={prev.size}")
        _switch(lambda: _abstract.append(self.mesh))

    def __exit__(self, *exc):
        _switch(_abstract.pop)
        return False


def get_mesh():
    """The concrete mesh in context (an empty one when there is none)."""
    m = current_mesh()
    return Mesh(np.empty((0,), object), ("_empty",)) if m is None else m


class set_mesh:
    """Put ``mesh`` in context: as a global setter (``set_mesh(mesh)``) or a context
    manager (``with set_mesh(mesh):``), as JAX's.

    Raises:
      ValueError: if ``mesh`` is not a :class:`Mesh` (or None).
    """
    __slots__ = ("prev",)

    def __init__(self, mesh):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise ValueError(f"Expected mesh of type `jax.sharding.Mesh`. Got {type(mesh)}")
        self.prev = _global[0]
        _switch(lambda: _global.__setitem__(0, mesh))

    def __enter__(self):
        return _global[0]

    def __exit__(self, *exc):
        _switch(lambda: _global.__setitem__(0, self.prev))
        return False


@contextlib.contextmanager
def use_mesh(mesh):
    """Context manager putting ``mesh`` in context (``jax.sharding.use_mesh``)."""
    if not isinstance(mesh, Mesh):
        raise ValueError(f"Expected mesh of type `jax.sharding.Mesh`. Got {type(mesh)}")
    _switch(lambda: _context.append(mesh))
    try:
        yield mesh
    finally:
        _switch(_context.pop)


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
    """A Mesh of the first ``prod(axis_shapes)`` devices in the given grid shape.

    As JAX 0.10, ``axis_types`` defaults to ``Explicit`` for every axis: arrays split
    over them carry their sharding in their type (``typeof(x)``: ``f32[8@x,4]``; see
    ``core/sharding_types.py``).

    Raises:
      ValueError: if more devices are asked for than exist.

    >>> import xform
    >>> xform.make_mesh((2, 2), ('x', 'y')).axis_names
    ('x', 'y')
    """
    axis_shapes = tuple(axis_shapes)
    devices = list(devices) if devices is not None else backend.devices()
    n = math.prod(axis_shapes)
    if n > len(devices):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of "
                         f"mesh_shape {axis_shapes}")
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(axis_shapes)
    return Mesh(np.array(devices[:n], dtype=object).reshape(axis_shapes), axis_names,
                axis_types)
