"""Public pytree utilities (``jax.tree_util``); implemented in :mod:`xform.core.tree_util`
(and ``tree_broadcast``/``tree_reduce_associative`` in :mod:`xform.tree`)."""
from typing import Any as _Any, TypeVar as _TypeVar

from xform.core import tree_util as _tu
from xform.core.tree_util import *  # noqa: F401,F403
from xform.core.tree_util import __all__ as _core_all
from xform.tree import broadcast as tree_broadcast  # noqa: F401
from xform.tree import reduce_associative as tree_reduce_associative  # noqa: F401

KeyEntry = _TypeVar("KeyEntry", bound=_Any)   # (typing names, as JAX's)
KeyPath = tuple[KeyEntry, ...]


class PyTreeRegistry:
    """``jax.tree_util.default_registry``'s methods over xform's one node registry."""

    def flatten(self, tree, leaf_predicate=None):
        return _tu.tree_flatten(tree, is_leaf=leaf_predicate)

    def flatten_one_level(self, tree):
        """``(children, node data)``, or None for a leaf."""
        return _tu.flatten_one_level(tree) if _tu.is_tree_node(type(tree)) else None

    def flatten_one_level_with_keys(self, tree):
        if not _tu.is_tree_node(type(tree)):
            return None
        pairs, data = _tu.flatten_one_level_with_keys(tree)
        return tuple(pairs), data

    def flatten_with_path(self, tree, leaf_predicate=None):
        """``leaf_predicate(key_path, x)``, as JAX's."""
        return _tu.tree_flatten_with_path(tree, leaf_predicate, True)

    def is_node(self, type):  # noqa: A002  (JAX's parameter name)
        return _tu.is_tree_node(type)

    def register_node(self, type, to_iterable, from_iterable,  # noqa: A002
                      to_iterable_with_keys=None):
        if to_iterable_with_keys is None:
            _tu.register_pytree_node(type, to_iterable, from_iterable)
        else:
            _tu.register_pytree_with_keys(type, to_iterable_with_keys, from_iterable,
                                          to_iterable)

    def register_dataclass_node(self, type, data_fields, meta_fields, /):  # noqa: A002
        _tu.register_dataclass(type, data_fields, meta_fields)


default_registry = PyTreeRegistry()
__all__ = [*_core_all, "tree_broadcast", "tree_reduce_associative", "KeyEntry", "KeyPath",
           "default_registry"]
