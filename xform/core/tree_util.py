"""Pytrees: flatten nested containers into leaves plus a hashable ``PyTreeDef``.

Same API and semantics as ``jax.tree_util``, plus ``broadcast_prefix`` for vmap. The
face of ``pytree.py`` (structure, flatten/unflatten, key paths, prefixes) and
``pytree_registry.py`` (registering node types, ``Partial``).
"""
from xform.core.pytree import (  # noqa: F401
    PyTreeDef, DictKey, SequenceKey, GetAttrKey, FlattenedIndexKey, tree_flatten,
    tree_unflatten, tree_leaves, tree_structure, tree_map, tree_reduce, tree_all,
    tree_transpose, all_leaves, treedef_children, treedef_is_leaf, treedef_tuple,
    tree_flatten_with_path, tree_leaves_with_path, tree_map_with_path, keystr,
    broadcast_prefix, flatten_one_level, flatten_one_level_with_keys, is_tree_node, _NO_INIT)
from xform.core.pytree_registry import (  # noqa: F401
    Partial, register_dataclass, register_pytree_node, register_pytree_node_class,
    register_pytree_with_keys, register_pytree_with_keys_class, register_static)

__all__ = [
    "PyTreeDef", "Partial", "DictKey", "SequenceKey", "GetAttrKey", "FlattenedIndexKey",
    "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "tree_map",
    "tree_reduce", "tree_all", "tree_transpose", "all_leaves", "treedef_children",
    "treedef_is_leaf", "treedef_tuple", "register_pytree_node",
    "register_pytree_node_class", "register_pytree_with_keys", "register_dataclass",
    "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path", "keystr",
    "broadcast_prefix", "flatten_one_level", "flatten_one_level_with_keys", "is_tree_node",
    "register_pytree_with_keys_class", "register_static",
]
