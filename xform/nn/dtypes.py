"""``xform.nn.dtypes``: flax.linen.dtypes's names (dtype helpers), re-exported from
``xform.nn``."""
from xform.nn import (  # noqa: F401
    canonicalize_dtype, promote_dtype)

__all__ = ["canonicalize_dtype", "promote_dtype"]
