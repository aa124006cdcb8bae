"""``xform.nn.combinators``: flax.linen.combinators's names (``Sequential``),
re-exported from ``xform.nn``."""
from xform.nn._module import compact, Module  # noqa: F401
from xform.nn._stochastic import Sequential  # noqa: F401

__all__ = ["Module", "Sequential", "compact"]
