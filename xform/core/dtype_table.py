"""The dtypes xform supports, x64 canonicalization, inspecting values' dtypes (weak
types included), the defaults, extended dtypes (typed keys) and dtype queries
(``issubdtype``, ``finfo``, ...). Part of ``dtypes.py``, the face.
"""
import collections.abc

import ml_dtypes
import numpy as np

from xform.core.array_ops import ArrayOps
from xform.core.config import config

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)
# Narrow types (ml_dtypes', as in JAX): no implicit promotion widens them (see
# dtype_promotion.py); which ones XLA computes with: mlir._NO_XLA_TYPE.
float8_e3m4 = np.dtype(ml_dtypes.float8_e3m4)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e4m3b11fnuz = np.dtype(ml_dtypes.float8_e4m3b11fnuz)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e4m3fnuz = np.dtype(ml_dtypes.float8_e4m3fnuz)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e5m2fnuz = np.dtype(ml_dtypes.float8_e5m2fnuz)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
float6_e2m3fn = np.dtype(ml_dtypes.float6_e2m3fn)
float6_e3m2fn = np.dtype(ml_dtypes.float6_e3m2fn)
float4_e2m1fn = np.dtype(ml_dtypes.float4_e2m1fn)
int1 = np.dtype(ml_dtypes.int1)
int2 = np.dtype(ml_dtypes.int2)
int4 = np.dtype(ml_dtypes.int4)
uint1 = np.dtype(ml_dtypes.uint1)
uint2 = np.dtype(ml_dtypes.uint2)
uint4 = np.dtype(ml_dtypes.uint4)
# Dtype of tangents of integer/bool primals: a zero-size vector space.
float0 = np.dtype([("float0", np.void, 0)])

float8_dtypes = frozenset({float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn,
                           float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu})
float6_dtypes = frozenset({float6_e2m3fn, float6_e3m2fn})
float4_dtypes = frozenset({float4_e2m1fn})
narrow_float_dtypes = float8_dtypes | float6_dtypes | float4_dtypes
narrow_int_dtypes = frozenset({int1, int2, int4, uint1, uint2, uint4})

bool_dtypes = frozenset({bool_})
signed_int_dtypes = frozenset({int1, int2, int4, int8, int16, int32, int64})
unsigned_int_dtypes = frozenset({uint1, uint2, uint4, uint8, uint16, uint32, uint64})
int_dtypes = signed_int_dtypes | unsigned_int_dtypes
float_dtypes = frozenset({float16, bfloat16, float32, float64}) | narrow_float_dtypes
complex_dtypes = frozenset({complex64, complex128})
inexact_dtypes = float_dtypes | complex_dtypes
numeric_dtypes = int_dtypes | inexact_dtypes
all_dtypes = bool_dtypes | numeric_dtypes

_VALID_DTYPES = all_dtypes | {float0}
# Exact classes of the valid np.dtype instances: `type(x) in _DTYPE_CLASSES` is a
# much cheaper "is this an np.dtype" test than isinstance on the hot path.
_DTYPE_CLASSES = frozenset(type(d) for d in _VALID_DTYPES)
_SUPPORTED_MSG = ("xform supports only bool, int1/2/4/8/16/32/64, uint1/2/4/8/16/32/64, "
                  "float16, bfloat16, float32, float64, complex64, complex128, ml_dtypes' "
                  "float8_*/float6_*/float4_e2m1fn (and float0 for tangents).")

_TO_32BIT = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}
# Indexed by the x64 flag: _CANONICAL[x64][dtype] is the canonical dtype; a missing
# key means the dtype is unsupported.
_CANONICAL = ({d: _TO_32BIT.get(d, d) for d in _VALID_DTYPES},
              {d: d for d in _VALID_DTYPES})

# Kind letters; numpy reports 'V' for ml_dtypes' types (but 'f' for float8_e5m2).
_KIND = {**{d: d.kind for d in all_dtypes}, bfloat16: "f",
         **{d: "f" for d in narrow_float_dtypes},
         **{d: "i" for d in signed_int_dtypes}, **{d: "u" for d in unsigned_int_dtypes}}
_DEFAULT_OF_KIND = ({"b": bool_, "i": int32, "u": uint32, "f": float32, "c": complex64},
                    {"b": bool_, "i": int64, "u": uint64, "f": float64, "c": complex128})

# Python scalar type -> (uncanonicalized default dtype, weak). bool is never weak.
_PY_SCALAR_KEYS = {bool: (bool_, False), int: (int64, True),
                   float: (float64, True), complex: (complex128, True)}
# result_type additionally reads None as the default float dtype, like JAX.
_ARG_KEYS = {**_PY_SCALAR_KEYS, type(None): (float64, False)}
_WEAK_SCALAR_TYPES = frozenset({int, float, complex})
_SCALAR_TYPE_OF_KIND = {"b": bool, "i": int, "u": int, "f": float, "c": complex}


def _describe(x):
    return repr(x) if isinstance(x, (str, type, np.dtype)) else f"a {type(x).__name__}"


def _unsupported(dt, origin):
    return TypeError(f"Unsupported dtype {dt} (from {_describe(origin)}): {_SUPPORTED_MSG}")


# Memo of np.dtype(x) for str and type dtype-likes (which compare by value and by
# identity, so no two distinct specs can collide).
_DTYPE_LIKE_MEMO = {}


def _as_dtype(x):
    """np.dtype of a dtype-like (no canonicalization, no validation)."""
    t = type(x)
    if t in _DTYPE_CLASSES:
        return x
    memoizable = t is str or isinstance(x, type)
    if memoizable and x in _DTYPE_LIKE_MEMO:
        return _DTYPE_LIKE_MEMO[x]
    if not memoizable and is_extended(x):
        return x
    try:
        dt = np.dtype(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Cannot interpret {_describe(x)} as a dtype: {e}") from None
    if memoizable:
        _DTYPE_LIKE_MEMO[x] = dt
    return dt


# --------------------------------------------------------------------------- defaults

def default_int_dtype():
    """Default integer dtype: int64 with x64 enabled, else int32.

    >>> default_int_dtype()
    dtype('int32')
    """
    return int64 if config.jax_enable_x64 else int32


def default_uint_dtype():
    """Default unsigned dtype: uint64 with x64 enabled, else uint32.

    >>> default_uint_dtype()
    dtype('uint32')
    """
    return uint64 if config.jax_enable_x64 else uint32


def default_float_dtype():
    """Default floating dtype: float64 with x64 enabled, else float32.

    >>> default_float_dtype()
    dtype('float32')
    """
    return float64 if config.jax_enable_x64 else float32


def default_complex_dtype():
    """Default complex dtype: complex128 with x64 enabled, else complex64.

    >>> default_complex_dtype()
    dtype('complex64')
    """
    return complex128 if config.jax_enable_x64 else complex64


class _PythonScalarDtypes(collections.abc.Mapping):
    """Read-only mapping {bool, int, float, complex} -> default dtype (x64-aware)."""

    def __getitem__(self, typ):
        if not isinstance(typ, type) or typ not in _PY_SCALAR_KEYS:
            raise KeyError(typ)
        return _CANONICAL[config.jax_enable_x64][_PY_SCALAR_KEYS[typ][0]]

    def __iter__(self):
        return iter(_PY_SCALAR_KEYS)

    def __len__(self):
        return len(_PY_SCALAR_KEYS)

    def __repr__(self):
        return repr(dict(self))


python_scalar_dtypes = _PythonScalarDtypes()


# ---------------------------------------------------------------- dtype inspection

def canonicalize_dtype(dtype):
    """Maps a dtype-like to the dtype xform uses for it under the current x64 flag.

    With x64 disabled, 64-bit types map to their 32-bit counterparts.

    Args:
      dtype: anything ``np.dtype`` accepts; Python ``int``/``float``/``complex``/
        ``bool`` mean their default dtypes.

    Returns:
      The canonical ``np.dtype``.

    Raises:
      TypeError: if ``dtype`` is not a dtype-like or is not supported by xform.

    >>> canonicalize_dtype("float64")
    dtype('float32')
    """
    dt = _as_dtype(dtype)
    out = _CANONICAL[config.jax_enable_x64].get(dt)
    if out is None or (dt is not dtype and isinstance(dtype, ArrayOps)):
        if isinstance(dtype, ArrayOps):  # (NumPy takes an array's .dtype; JAX refuses)
            raise ValueError("Passing an array as a dtype argument is no longer supported;"
                             " instead of dtype=arr use dtype=arr.dtype.")
        if is_extended(dt):
            return dt
        raise _unsupported(dt, dtype)
    return out


def _raw_dtype(x):
    """Uncanonicalized dtype of a value or dtype-like."""
    t = type(x)
    if t in _DTYPE_CLASSES or t is str:
        return _as_dtype(x)
    key = _PY_SCALAR_KEYS.get(t)
    if key is not None:
        return key[0]
    if x is None:
        raise ValueError("dtype(None) is ambiguous; pass a dtype or a value.")
    if isinstance(x, type):
        return _PY_SCALAR_KEYS[x][0] if x in _PY_SCALAR_KEYS else _as_dtype(x)
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    # Python-scalar subclasses (e.g. IntEnum members): the default dtype of the base.
    for base, (dt, _) in _PY_SCALAR_KEYS.items():
        if isinstance(x, base):
            return dt
    return _as_dtype(x)


def dtype(x, canonicalize=True):
    """Dtype of a value (Python scalar, array, tracer) or of a dtype-like.

    Python scalars get the default dtypes; objects with a ``.dtype`` (numpy and
    xform arrays, tracers) their dtype; dtype-likes (strings, numpy scalar types,
    ``np.dtype``) themselves.

    Args:
      x: a value or a dtype-like.
      canonicalize: if True (default), apply ``canonicalize_dtype``.

    Returns:
      An ``np.dtype``.

    Raises:
      TypeError: if the dtype cannot be determined or is unsupported.
      ValueError: if ``x`` is None.

    >>> dtype(1.0), dtype(np.zeros(2, np.int8))
    (dtype('float32'), dtype('int8'))
    """
    dt = getattr(x, "dtype", None)  # arrays and tracers first: the common case
    if type(dt) not in _DTYPE_CLASSES:
        if is_extended(dt):
            return dt
        dt = _raw_dtype(x)
    out = _CANONICAL[config.jax_enable_x64 if canonicalize else True].get(dt)
    if out is None:
        raise _unsupported(dt, x)
    return out


def _weak_attr(x):
    w = getattr(x, "weak_type", None)
    if w is None:
        w = getattr(getattr(x, "aval", None), "weak_type", False)
    return True if w else False


def is_weakly_typed(x):
    """Whether ``x`` is weakly typed.

    Python ``int``/``float``/``complex`` values are weak (``bool`` is not, as in
    JAX); so is anything with a truthy ``weak_type`` or ``aval.weak_type``.

    >>> is_weakly_typed(1), is_weakly_typed(True), is_weakly_typed(np.float32(1))
    (True, False, False)
    """
    return type(x) in _WEAK_SCALAR_TYPES or _weak_attr(x)


def scalar_type_of(x):
    """The Python scalar type (bool, int, float or complex) matching x's dtype.

    >>> scalar_type_of(np.zeros(2, bfloat16))
    <class 'float'>
    """
    dt = dtype(x, canonicalize=False)
    if dt not in _KIND:
        raise TypeError(f"{dt} has no Python scalar type.")
    return _SCALAR_TYPE_OF_KIND[_KIND[dt]]


# ------------------------------------------------------------------ dtype queries

# ml_dtypes' scalar types derive from np.generic only: their place in numpy's hierarchy.
_ABSTRACT_OF_KIND = {"f": np.floating, "i": np.signedinteger, "u": np.unsignedinteger}
_SUPERTYPES = {d.type: frozenset({d.type, _ABSTRACT_OF_KIND[_KIND[d]], np.number, np.generic,
                                  np.inexact if _KIND[d] == "f" else np.integer})
               for d in narrow_float_dtypes | narrow_int_dtypes | {bfloat16}}


def _scalar_type(x):
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    return _as_dtype(x).type


class extended:
    """Root of the non-NumPy dtypes (JAX's ``dtypes.extended``)."""


class prng_key(extended):
    """Dtype class of typed PRNG keys (``key<fry>``; see ``xform.random.key``)."""


def _extended_type(x):
    # The extended dtype class of x (a class, or a dtype object whose .type is one).
    if isinstance(x, type) and issubclass(x, extended):
        return x
    t = getattr(x, "type", None) if not isinstance(x, (np.dtype, type, str)) else None
    return t if isinstance(t, type) and issubclass(t, extended) else None


def is_extended(dt):
    """Whether ``dt`` is an extended dtype (a dtype object such as ``key<fry>``).

    Extended dtypes are not NumPy dtypes: arrays of them have a logical shape and a
    physical representation (``dt._rules.physical_element_aval``) that lowering uses.

    >>> is_extended(np.float32)
    False
    """
    return not isinstance(dt, (np.dtype, type, str)) and _extended_type(dt) is not None


def _extended_result_type(args):
    # Promotion of extended dtypes: only arrays of one extended dtype join (to it).
    dts = {getattr(a, "dtype", a) for a in args}
    ext = [d for d in dts if is_extended(d)]
    if len(dts) == 1 and ext:
        return ext[0]
    bad = ext[0] if ext else next(iter(dts))
    raise ValueError(f"dtype={bad} is not a valid dtype for JAX type promotion.")


def issubdtype(a, b):
    """Whether dtype-like ``a`` is ``b`` or below it in numpy's type hierarchy.

    Like ``jnp.issubdtype``: bfloat16 and float8 etc. count as ``np.floating``, int4
    etc. as ``np.signedinteger`` or ``np.unsignedinteger``; extended dtypes (PRNG
    key dtypes) sit under ``extended`` and ``prng_key`` only.

    >>> issubdtype(bfloat16, np.floating), issubdtype("int8", np.unsignedinteger)
    (True, False)
    """
    a_ext, b_ext = _extended_type(a), _extended_type(b)
    if a_ext is not None or b_ext is not None:
        return a_ext is not None and b_ext is not None and issubclass(a_ext, b_ext)
    if isinstance(b, np.dtype) and b == float0:
        # NB: JAX also answers True for any other void dtype here.
        return isinstance(a, np.dtype) and a == float0
    a_type, b_type = _scalar_type(a), _scalar_type(b)
    sup = _SUPERTYPES.get(a_type)
    if sup is not None:
        return b_type in sup
    return bool(np.issubdtype(a_type, b_type))


def _kind(dt):
    d = _as_dtype(dt)
    return _KIND.get(d, d.kind)


def is_bool(dt):
    """Whether dtype-like ``dt`` is bool.

    >>> is_bool(bool)
    True
    """
    return _kind(dt) == "b"


def is_integer(dt):
    """Whether dtype-like ``dt`` is a signed or unsigned integer type.

    >>> is_integer("uint8"), is_integer(bool)
    (True, False)
    """
    return _kind(dt) in ("i", "u")


def is_unsigned(dt):
    """Whether dtype-like ``dt`` is an unsigned integer type.

    >>> is_unsigned("uint8"), is_unsigned("int8")
    (True, False)
    """
    return _kind(dt) == "u"


def is_floating(dt):
    """Whether dtype-like ``dt`` is a real floating type (bfloat16 included).

    >>> is_floating("bfloat16"), is_floating("complex64")
    (True, False)
    """
    return _kind(dt) == "f"


def is_complex(dt):
    """Whether dtype-like ``dt`` is a complex type.

    >>> is_complex(complex)
    True
    """
    return _kind(dt) == "c"


def is_inexact(dt):
    """Whether dtype-like ``dt`` is floating or complex.

    >>> is_inexact("float16"), is_inexact("int32")
    (True, False)
    """
    return _kind(dt) in ("f", "c")


def finfo(dt):
    """Machine limits of a floating (or complex) dtype-like; supports bfloat16.

    >>> float(finfo("bfloat16").eps)
    0.0078125
    """
    d = _as_dtype(dt)
    if not is_inexact(d):
        raise ValueError(f"finfo() needs a floating or complex dtype, got {d}.")
    return ml_dtypes.finfo(d)


# As JAX's list: float6/float4 (which saturate) and float8_e8m0fnu (whose inf reads
# back as nan) are left out.
_NO_INF = frozenset({float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2fnuz})


def supports_inf(dt):
    """Whether dtype-like ``dt`` has infinities (JAX's ``dtypes.supports_inf``): the
    inexact dtypes but the float8 ones whose inf reads back as nan.

    >>> supports_inf("float8_e5m2"), supports_inf("float8_e4m3fn")
    (True, False)
    """
    return is_inexact(dt) and _as_dtype(dt) not in _NO_INF


def iinfo(dt):
    """Machine limits of an integer dtype-like.

    >>> iinfo("int8").min
    -128
    """
    d = _as_dtype(dt)
    if not is_integer(d):
        raise ValueError(f"iinfo() needs an integer dtype, got {d}.")
    return ml_dtypes.iinfo(d)


def itemsize_bits(dtype):
    """Bits per element of ``dtype`` (8 for bool, its physical layout; the narrow types
    their width, which ``itemsize`` cannot say).

    >>> itemsize_bits("int4"), itemsize_bits("complex64")
    (4, 64)
    """
    if dtype is None:
        raise ValueError("dtype cannot be None.")
    d = _as_dtype(dtype)
    if d == bool_:
        return 8
    if is_integer(d):
        return iinfo(d).bits
    if is_inexact(d):
        return finfo(d).bits * (2 if is_complex(d) else 1)
    raise ValueError(f"unexpected input: dtype={d!r}")


# (As JAX: int4/uint4 give float32, the other sub-byte ints are kept.)
_TO_INEXACT = {**{d: float32 for d in (bool_, int4, int8, int16, int32, uint4, uint8,
                                       uint16, uint32)},
               int64: float64, uint64: float64}


def to_inexact_dtype(dt):
    """The dtype float-only ops compute in: bool and ints of up to 32 bits give
    float32, 64-bit ints float64; inexact dtypes are kept. Canonicalized.

    >>> to_inexact_dtype("int8"), to_inexact_dtype("float16")
    (dtype('float32'), dtype('float16'))
    """
    # NB: JAX does not canonicalize here (int64 -> float64 even with x64 off).
    d = canonicalize_dtype(dt)
    return canonicalize_dtype(_TO_INEXACT.get(d, d))
