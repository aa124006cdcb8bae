"""``xform.nn.linear``: flax.linen.linear's names (linear and convolution layers),
re-exported from ``xform.nn``."""
from xform.nn._conv import Conv, ConvLocal, ConvTranspose, canonicalize_padding  # noqa: F401
from xform.nn._linear import Dense, DenseGeneral, Einsum, Embed, promote_dtype  # noqa: F401
from xform.nn._module import compact, Module  # noqa: F401

__all__ = ["Conv", "ConvLocal", "ConvTranspose", "Dense", "DenseGeneral", "Einsum",
    "Embed", "Module", "canonicalize_padding", "compact", "promote_dtype"]
