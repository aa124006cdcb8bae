"""``ShapeDtypeStruct``: an array's shape, dtype and weak type without data, the currency
of ``eval_shape``, AOT lowering and ``export`` (JAX's ``jax.ShapeDtypeStruct``)."""

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval


class ShapeDtypeStruct:
    """Shape and dtype of an array, without data (``eval_shape``'s currency)."""
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = tuple(shape)
        self.dtype = dtypes.canonicalize_dtype(dtype)
        self.weak_type = weak_type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: ShapedArray(self.shape, self.dtype).size)

    @classmethod
    def like(cls, x):
        """The shape, dtype and weak type of ``x`` (an array, tracer or scalar)."""
        aval = get_aval(x)
        return cls(aval.shape, aval.dtype, weak_type=aval.weak_type)

    def update(self, **kwargs):
        """A copy with ``shape``, ``dtype`` or ``weak_type`` replaced."""
        fields = dict(shape=self.shape, dtype=self.dtype, weak_type=self.weak_type)
        return ShapeDtypeStruct(**{**fields, **kwargs})

    @property
    def aval(self):
        return ShapedArray(self.shape, self.dtype, self.weak_type)

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"
