"""Public dtype utilities (``jax.dtypes`` names)."""
from xform.core.dtypes import (bfloat16, canonicalize_dtype, finfo, float0,  # noqa: F401
                               iinfo, issubdtype, result_type)
