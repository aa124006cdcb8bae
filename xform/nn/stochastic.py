"""``xform.nn.stochastic``: flax.linen.stochastic's names (``Dropout``), re-exported
from ``xform.nn``."""
from xform.nn._module import compact, merge_param, Module  # noqa: F401
from xform.nn._stochastic import Dropout  # noqa: F401

__all__ = ["Dropout", "Module", "compact", "merge_param"]
