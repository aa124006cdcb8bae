"""``xform.nn.summary``: flax.linen.summary's names (``tabulate``), re-exported from
``xform.nn``."""
from xform.nn._scope import DenyList  # noqa: F401
from xform.nn._summary import tabulate  # noqa: F401

__all__ = ["DenyList", "tabulate"]
