"""``xform.nn.linear``: flax.linen.linear's names (linear and convolution layers),
re-exported from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    Conv, ConvLocal, ConvTranspose, Dense, DenseGeneral, Einsum, Embed, Module, compact)

__all__ = ["Conv", "ConvLocal", "ConvTranspose", "Dense", "DenseGeneral", "Einsum",
    "Embed", "Module", "compact"]
