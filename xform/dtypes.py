"""Public dtype utilities (``jax.dtypes`` names)."""
from xform.core.dtypes import (bfloat16, canonicalize_dtype, extended, finfo,  # noqa: F401
                               float0, iinfo, issubdtype, prng_key, result_type)
