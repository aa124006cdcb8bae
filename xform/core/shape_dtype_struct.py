"""``ShapeDtypeStruct``: an array's shape, dtype, weak type and (optionally) sharding
without data, the currency of ``eval_shape``, AOT lowering and ``export`` (JAX's
``jax.ShapeDtypeStruct``).

A ``sharding`` makes AOT lowering partition the program as a call with arrays of that
sharding would (``interpreters.spmd.named_sharding_of``); a PartitionSpec names the
mesh in context when read. Over a mesh with Explicit axes it is part of the ``aval``.
"""

import math

import numpy as np

from xform.core import dtypes, sharding_types
from xform.core.array import Array
from xform.core.avals import ManualAxisType, ShapedArray
from xform.core.layout import Format
from xform.core.mesh import current_mesh
from xform.core.sharding import NamedSharding, PartitionSpec, Sharding
from xform.core.trace import get_aval


def _check_sharding(sharding, shape):
    """JAX's rank check (divisibility is checked where the sharding is used)."""
    spec = sharding if isinstance(sharding, PartitionSpec) else getattr(sharding, "spec", ())
    if len(shape) < len(spec):
        what = (f"PartitionSpec {sharding}" if isinstance(sharding, PartitionSpec)
                else f"Sharding {sharding}")
        raise ValueError(
            f"{what} is only valid for values of rank at least {len(spec)}, but was "
            f"applied to a value of rank {len(shape)}."
            + (" For scalars the PartitionSpec should be P()" if not shape else ""))


class ShapeDtypeStruct:
    """Shape, dtype and (optionally) sharding of an array, without data.

    >>> import xform, numpy as np
    >>> from xform.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = xform.make_mesh((2,), ('x',))
    >>> s = xform.ShapeDtypeStruct((4, 3), np.float32, sharding=NamedSharding(mesh, P('x')))
    >>> s.sharding.spec
    P('x',)
    """
    __slots__ = ("shape", "dtype", "_sharding", "weak_type", "manual_axis_type", "is_ref",
                 "_layout")

    def __init__(self, shape, dtype, *, sharding=None, weak_type=False,
                 manual_axis_type=None, is_ref=False):
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        _set = super().__setattr__
        _set("_layout", None)   # a Format's layout: the AOT argument's (core/layout.py)
        if isinstance(sharding, Format):
            _set("_layout", sharding.layout)
            sharding = sharding.sharding
        if sharding is not None and not isinstance(sharding, (Sharding, PartitionSpec)):
            raise ValueError(
                "sharding should be an instance of `jax.sharding.Sharding`, "
                "`jax.sharding.PartitionSpec` or `jax.experimental.layout.Format`. Got "
                f"{sharding} of type {type(sharding)}.")
        _set("shape", tuple(shape))
        # the dtype as given (float64 stays float64 without x64, as JAX's); the aval's
        # is canonical
        _set("dtype", dtype if dtypes.is_extended(dtype) else np.dtype(dtype))
        _check_sharding(sharding, self.shape)
        _set("_sharding", sharding)
        _set("weak_type", weak_type)
        if manual_axis_type is not None and not isinstance(manual_axis_type, ManualAxisType):
            raise TypeError("`manual_axis_type` argument passed to ShapeDtypeStruct should be "
                            "of type `jax.sharding.ManualAxisType`. Got type "
                            f"{type(manual_axis_type)}")
        _set("manual_axis_type", manual_axis_type)
        _set("is_ref", is_ref)

    def __setattr__(self, name, value):
        if hasattr(self, name):   # (an unset slot may be set: copy and pickle restore so)
            if getattr(self, name) == value:
                return
            raise RuntimeError(f"Cannot reassign attributes ({name}) of immutable "
                               "ShapeDtypeStruct objects")
        super().__setattr__(name, value)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    @property
    def sharding(self):
        """The Sharding (a PartitionSpec given is over the concrete mesh in context)."""
        if isinstance(self._sharding, PartitionSpec):
            mesh = current_mesh()
            if mesh is None:
                raise TypeError(
                    "When specifying PartitionSpec to `ShapeDtypeStruct`, the context mesh "
                    "cannot be empty. Please use `jax.set_mesh` to set the mesh context.")
            return NamedSharding(mesh, self._sharding)
        return self._sharding

    @property
    def format(self):
        """The layout (None: the default) and sharding as a ``Format``."""
        return Format(self._layout, self.sharding)

    @classmethod
    def like(cls, x):
        """The shape, dtype, weak type and, for a committed array, sharding of ``x``."""
        aval = get_aval(x)
        if isinstance(x, Array):  # an Array: its sharding if committed
            sharding = x.sharding if x._committed else None
        else:  # a tracer: its type's (explicit mode)
            sharding = aval._sharding
        return cls(aval.shape, aval.dtype, sharding=sharding, weak_type=aval.weak_type)

    def update(self, **kwargs):
        """A copy with ``shape``, ``dtype``, ``sharding``, ... replaced."""
        fields = dict(shape=self.shape, dtype=self.dtype, sharding=self._sharding if
                      self._layout is None else Format(self._layout, self._sharding),
                      weak_type=self.weak_type, manual_axis_type=self.manual_axis_type,
                      is_ref=self.is_ref)
        return ShapeDtypeStruct(**{**fields, **kwargs})

    @property
    def aval(self):
        aval = ShapedArray(self.shape, dtypes.canonicalize_dtype(self.dtype), self.weak_type)
        s = self.sharding  # (over Explicit axes, part of the type)
        return sharding_types.typed(aval, s) if isinstance(s, NamedSharding) else aval

    def _key(self):
        return (self.shape, self.dtype, self.sharding, self.weak_type,
                self.manual_axis_type, self.is_ref, self._layout)

    def __eq__(self, other):
        return isinstance(other, ShapeDtypeStruct) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        s = self.sharding
        extra = "".join(f", {k}={v}" for k, v in (
            ("sharding", s), ("format", self._layout), ("weak_type", self.weak_type),
            ("manual_axis_type", self.manual_axis_type), ("is_ref", self.is_ref)) if v)
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{extra})"

    __str__ = __repr__
