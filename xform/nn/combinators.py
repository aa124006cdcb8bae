"""``xform.nn.combinators``: flax.linen.combinators's names (``Sequential``),
re-exported from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    Module, Sequential, compact)

__all__ = ["Module", "Sequential", "compact"]
