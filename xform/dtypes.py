"""Public dtype utilities (``jax.dtypes`` names)."""
import numpy as _np

from xform.core import dtypes as _dtypes
from xform.core.dtype_promotion import TypePromotionError  # noqa: F401
from xform.core.dtypes import (bfloat16, extended, finfo, float0, iinfo,  # noqa: F401
                               issubdtype, itemsize_bits, prng_key, result_type)


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """The dtype xform uses for ``dtype`` under the current x64 flag; an extended dtype
    (a PRNG key's) only with ``allow_extended_dtype``, as JAX's."""
    dt = _dtypes.canonicalize_dtype(dtype)
    if _dtypes.is_extended(dt) and not allow_extended_dtype:
        raise ValueError(f"Internal: canonicalize_dtype called on extended dtype {dt} with "
                         "allow_extended_dtype=False")
    return dt


def scalar_type_of(x) -> type:
    """The Python scalar type (bool, int, float, complex) of a value's dtype."""
    dt = getattr(x, "dtype", None)
    dt = _np.result_type(x) if dt is None else _np.dtype(dt)
    for kind, typ in ((_np.bool_, bool), (_np.integer, int), (_np.floating, float),
                      (_np.complexfloating, complex)):
        if issubdtype(dt, kind):
            return typ
    raise TypeError(f"Invalid scalar value {x}")


__all__ = ["TypePromotionError", "bfloat16", "canonicalize_dtype", "extended", "finfo",
           "float0", "iinfo", "issubdtype", "itemsize_bits", "prng_key", "result_type",
           "scalar_type_of"]
