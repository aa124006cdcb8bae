"""Public dtype utilities (``jax.dtypes`` names)."""
import numpy as np

from xform.core.dtype_promotion import TypePromotionError  # noqa: F401
from xform.core.dtypes import (bfloat16, canonicalize_dtype, extended, finfo,  # noqa: F401
                               float0, iinfo, issubdtype, prng_key, result_type)


def itemsize_bits(dtype) -> int:
    """Bits per element of ``dtype`` (8 for bool, its physical layout; sub-byte integer
    types their width, which ``itemsize`` cannot say)."""
    if dtype is None:
        raise ValueError("dtype cannot be None.")
    if np.dtype(dtype) == np.dtype(bool):
        return 8
    if issubdtype(dtype, np.integer):
        return iinfo(dtype).bits
    if issubdtype(dtype, np.floating):
        return finfo(dtype).bits
    if issubdtype(dtype, np.complexfloating):
        return 2 * finfo(dtype).bits
    raise ValueError(f"unexpected input: {dtype=}")


def scalar_type_of(x) -> type:
    """The Python scalar type (bool, int, float, complex) of a value's dtype."""
    dt = getattr(x, "dtype", None)
    dt = np.result_type(x) if dt is None else np.dtype(dt)
    for kind, typ in ((np.bool_, bool), (np.integer, int), (np.floating, float),
                      (np.complexfloating, complex)):
        if issubdtype(dt, kind):
            return typ
    raise TypeError(f"Invalid scalar value {x}")
