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

# ml_dtypes' narrow types (jnp.float8_e4m3fn etc.).
float8_e3m4 = _make("float8_e3m4", dtypes.float8_e3m4)
float8_e4m3 = _make("float8_e4m3", dtypes.float8_e4m3)
float8_e4m3b11fnuz = _make("float8_e4m3b11fnuz", dtypes.float8_e4m3b11fnuz)
float8_e4m3fn = _make("float8_e4m3fn", dtypes.float8_e4m3fn)
float8_e4m3fnuz = _make("float8_e4m3fnuz", dtypes.float8_e4m3fnuz)
float8_e5m2 = _make("float8_e5m2", dtypes.float8_e5m2)
float8_e5m2fnuz = _make("float8_e5m2fnuz", dtypes.float8_e5m2fnuz)
float8_e8m0fnu = _make("float8_e8m0fnu", dtypes.float8_e8m0fnu)
float6_e2m3fn = _make("float6_e2m3fn", dtypes.float6_e2m3fn)
float6_e3m2fn = _make("float6_e3m2fn", dtypes.float6_e3m2fn)
float4_e2m1fn = _make("float4_e2m1fn", dtypes.float4_e2m1fn)
int1 = _make("int1", dtypes.int1)
int2 = _make("int2", dtypes.int2)
int4 = _make("int4", dtypes.int4)
uint1 = _make("uint1", dtypes.uint1)
uint2 = _make("uint2", dtypes.uint2)
uint4 = _make("uint4", dtypes.uint4)
