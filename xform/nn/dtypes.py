"""``xform.nn.dtypes``: flax.linen.dtypes's names (dtype helpers), re-exported from
``xform.nn``."""
from xform.nn._linear import canonicalize_dtype, promote_dtype  # noqa: F401

__all__ = ["canonicalize_dtype", "promote_dtype"]
