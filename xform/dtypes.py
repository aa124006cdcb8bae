"""Public dtype utilities (``jax.dtypes`` names)."""
import numpy as np

from xform.core.dtype_promotion import TypePromotionError  # noqa: F401
from xform.core.dtypes import (bfloat16, canonicalize_dtype, extended, finfo,  # noqa: F401
                               float0, iinfo, issubdtype, itemsize_bits, prng_key,
                               result_type)


def scalar_type_of(x) -> type:
    """The Python scalar type (bool, int, float, complex) of a value's dtype."""
    dt = getattr(x, "dtype", None)
    dt = np.result_type(x) if dt is None else np.dtype(dt)
    for kind, typ in ((np.bool_, bool), (np.integer, int), (np.floating, float),
                      (np.complexfloating, complex)):
        if issubdtype(dt, kind):
            return typ
    raise TypeError(f"Invalid scalar value {x}")
