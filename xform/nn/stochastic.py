"""``xform.nn.stochastic``: flax.linen.stochastic's names (``Dropout``), re-exported
from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    Dropout, Module, compact, merge_param)

__all__ = ["Dropout", "Module", "compact", "merge_param"]
