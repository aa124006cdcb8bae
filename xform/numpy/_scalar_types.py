"""Scalar types ``jnp.float32`` etc.: usable wherever a dtype is expected, and callable
to make an array (``jnp.float32(1)`` is a rank-0 float32 Array, as in JAX)."""
import numpy as np

from xform.core import dtypes
from xform.numpy._creation import asarray


class _ScalarMeta(type):
    """Metaclass of the scalar types: compares and hashes like the dtype it names."""

    def __hash__(cls):
        return hash(cls.dtype.type)

    def __eq__(cls, other):
        return cls is other or other == cls.dtype.type

    def __ne__(cls, other):
        return not cls == other

    def __call__(cls, x):
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls):
        return f"<class 'xform.numpy.{cls.__name__}'>"


def _make(name, dtype):
    return _ScalarMeta(name, (object,), {"dtype": np.dtype(dtype),
                                         "__doc__": f"The {name} scalar type and dtype."})


bool_ = _make("bool_", dtypes.bool_)
int8 = _make("int8", dtypes.int8)
int16 = _make("int16", dtypes.int16)
int32 = _make("int32", dtypes.int32)
int64 = _make("int64", dtypes.int64)
uint8 = _make("uint8", dtypes.uint8)
uint16 = _make("uint16", dtypes.uint16)
uint32 = _make("uint32", dtypes.uint32)
uint64 = _make("uint64", dtypes.uint64)
float16 = _make("float16", dtypes.float16)
bfloat16 = _make("bfloat16", dtypes.bfloat16)
float32 = _make("float32", dtypes.float32)
float64 = _make("float64", dtypes.float64)
complex64 = _make("complex64", dtypes.complex64)
complex128 = _make("complex128", dtypes.complex128)
