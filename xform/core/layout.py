"""Data layouts (``jax.experimental.layout``): how an array's elements lie in its buffer.

``Layout(major_to_minor)`` orders the dimensions from the slowest-varying to the fastest
(row-major, XLA's default on CPU, is ``(0, 1, ..., n-1)``), with XLA's ``tiling`` and
sub-byte element size; ``Layout.AUTO`` leaves the choice to the compiler. ``Format``
pairs a layout with a sharding: what ``Array.format`` reports and what jit's
``in_shardings``/``out_shardings`` and ``device_put`` take. The runtime's layouts are read
through ``backend_layouts.py``.
"""
import weakref

from xform import backend_layouts
from xform.core.sharding import Sharding


class AutoLayout:
    """``Layout.AUTO``: the compiler picks the layout."""
    __slots__ = ()

    def __repr__(self):
        return "AUTO"


AUTO = AutoLayout()


class Layout:
    """A concrete layout: ``major_to_minor`` dimension order, XLA ``tiling`` (None:
    untiled, as given; ``()`` as the runtime reports an untiled layout) and
    ``sub_byte_element_size_in_bits`` (0: the dtype's size)."""
    __slots__ = ("major_to_minor", "tiling", "sub_byte_element_size_in_bits")
    AUTO = AUTO

    def __init__(self, major_to_minor, tiling=None, sub_byte_element_size_in_bits=0):
        self.major_to_minor = tuple(major_to_minor)
        self.tiling = None if tiling is None else tuple(map(tuple, tiling))
        self.sub_byte_element_size_in_bits = sub_byte_element_size_in_bits

    def __repr__(self):
        return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling}, "
                f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")

    def _key(self):
        return (self.major_to_minor, self.tiling, self.sub_byte_element_size_in_bits)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, Layout) and self._key() == other._key()

    def update(self, **kwargs):
        """A copy with the given fields replaced."""
        return Layout(**{k: kwargs.get(k, getattr(self, k)) for k in self.__slots__})

    def check_compatible_aval(self, aval_shape):
        if len(self.major_to_minor) != len(aval_shape):
            raise ValueError(
                "Length of major_to_minor and the rank of the value should match. Got "
                f"major_to_minor={self.major_to_minor} and shape={tuple(aval_shape)}")


def from_runtime(triple):
    """A Layout from ``backend_layouts``' ``(major_to_minor, tiling, bits)`` (or None)."""
    return None if triple is None else Layout(*triple)


class Format:
    """A layout (a :class:`Layout`, ``Layout.AUTO`` or None: the default) and a sharding
    (None: unspecified); a concrete layout needs a concrete sharding, as in JAX."""
    __slots__ = ("layout", "sharding")

    def __init__(self, layout=None, sharding=None):
        if isinstance(layout, Layout) and sharding is None:
            raise ValueError(
                f"Sharding has to be concrete when layout is of type {type(layout)}. "
                "Please pass a `jax.sharding.NamedSharding` or "
                "`jax.sharding.SingleDeviceSharding` to the sharding argument. Got "
                f"sharding {sharding}")
        if not isinstance(layout, (Layout, AutoLayout, type(None))):
            raise TypeError(
                "Invalid value received for the layout argument. Expected values are "
                f"`None`, `Layout.AUTO` or an instance of `Layout`. Got {layout} of type "
                f"{type(layout)}")
        if not isinstance(sharding, (Sharding, type(None))):
            raise TypeError(
                "Invalid value received for the sharding argument. Expected values are "
                f"`None` or an instance of `jax.Sharding`. Got {sharding} of type "
                f"{type(sharding)}")
        self.layout = layout
        self.sharding = sharding

    def __repr__(self):
        return f"Format(layout={self.layout}, sharding={self.sharding})"

    def __hash__(self):
        return hash((self.layout, self.sharding))

    def __eq__(self, other):
        return isinstance(other, Format) and (self.layout, self.sharding) == (
            other.layout, other.sharding)


# Arrays with a non-default layout: id -> (the array's weakref, its buffer in that
# layout). The Array itself holds a row-major copy, which every program that does not ask
# for the layout reads: PJRT runs a program on a buffer of another layout unconverted.
_laid_out = {}


def set_laid_out(x, buf):
    """Record that ``x`` (a one-device Array) was made in ``buf``'s layout."""
    _laid_out[id(x)] = (weakref.ref(x), buf)
    weakref.finalize(x, _laid_out.pop, id(x), None)


def laid_out(x):
    """The buffer of ``x`` in the layout it was made in, or None (the default layout)."""
    hit = _laid_out.get(id(x))
    return hit[1] if hit is not None and hit[0]() is x else None


def array_format(x):
    """``Array.format``: the layout of ``x``'s buffer (as it was made; else its first
    shard's) and its sharding; the layout None where the array is deleted or the
    runtime has none."""
    buf = laid_out(x)
    if buf is None:
        buf = (getattr(x, "_shards", None) or [x._buf])[0]
    layout = None if x.is_deleted() else from_runtime(backend_layouts.buffer_layout(buf))
    return Format(layout, x.sharding)


def default_triple(ndim):
    """The runtime's default (row-major, untiled) layout of rank ``ndim``, as
    ``backend_layouts`` reports layouts."""
    return (tuple(range(ndim)), (), 0)
