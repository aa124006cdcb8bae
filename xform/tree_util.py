"""Public pytree utilities (``jax.tree_util``); implemented in :mod:`xform.core.tree_util`
(and ``tree_broadcast``/``tree_reduce_associative`` in :mod:`xform.tree`)."""
from typing import Any, TypeVar

from xform.core.tree_util import *  # noqa: F401,F403
from xform.core.tree_util import __all__ as _core_all
from xform.tree import broadcast as tree_broadcast  # noqa: F401
from xform.tree import reduce_associative as tree_reduce_associative  # noqa: F401

KeyEntry = TypeVar("KeyEntry", bound=Any)   # (typing names, as JAX's)
KeyPath = tuple[KeyEntry, ...]
__all__ = [*_core_all, "tree_broadcast", "tree_reduce_associative", "KeyEntry", "KeyPath"]
