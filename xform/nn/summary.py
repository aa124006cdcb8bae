"""``xform.nn.summary``: flax.linen.summary's names (``tabulate``), re-exported from
``xform.nn``."""
from xform.nn import (  # noqa: F401
    DenyList, tabulate)

__all__ = ["DenyList", "tabulate"]
