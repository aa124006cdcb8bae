"""Reading and writing optimizer states by field name (``optax.tree.get/set``,
``tree_get_all_with_path``, ``tree_map_params``): states are searched through dicts and
NamedTuples, whose fields are addressed by :class:`NamedTupleKey` path entries."""
import dataclasses
import functools
import typing
from typing import Protocol

from xform.core import tree_util as tu


@tu.register_pytree_node_class
class _ParamsPlaceholder:
    # A leafless stand-in for params: init(placeholder) marks where params-shaped
    # subtrees sit in a state.
    def tree_flatten(self):
        return (), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls()


@dataclasses.dataclass(frozen=True)
class NamedTupleKey:
    """A path entry for the field ``name`` of a NamedTuple of class ``tuple_name``."""
    tuple_name: str
    name: str

    def __str__(self):
        return f"{self.tuple_name}.{self.name}"


@typing.runtime_checkable
class Initable(Protocol):
    """Anything with ``init(params) -> state`` (a GradientTransformation)."""

    def init(self, params): ...


def tree_map_params(initable, f, state, /, *rest, transform_non_params=None, is_leaf=None):
    """Apply ``f`` to the params-shaped parts of an optimizer ``state`` (e.g. Adam's
    ``mu`` and ``nu``), found by calling ``initable.init`` on a placeholder.

    Args:
        initable: the transformation (or its ``init``) that made ``state``.
        f: applied leafwise to each params-shaped subtree (with ``rest`` alongside).
        state: the state.
        transform_non_params: applied to every other leaf (default: unchanged).
        is_leaf: passed to ``tree_map`` over the params-shaped subtrees.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.adam(1e-3)
        >>> s = optax.tree_utils.tree_map_params(tx, lambda p: p + 1, tx.init(jnp.zeros(2)))
        >>> s[0].mu
        Array([1., 1.], dtype=float32)
    """
    placeholder = _ParamsPlaceholder()
    marked = initable.init(placeholder) if isinstance(initable, Initable) \
        else initable(placeholder)

    def map_params(mark, value):
        if isinstance(mark, _ParamsPlaceholder):
            return tu.tree_map(f, value, *rest, is_leaf=is_leaf)
        return transform_non_params(value) if transform_non_params is not None else value
    return tu.tree_map(map_params, marked, state,
                       is_leaf=lambda v: isinstance(v, _ParamsPlaceholder))


def _is_named_tuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _node_has_keys(node, keys):
    if _is_named_tuple(node):
        return any(k in node._fields for k in keys) or type(node).__name__ in keys
    return isinstance(node, dict) and any(k in node for k in keys)


def _leaves_with_named_path(tree, is_leaf=None):
    # tree_leaves_with_path, but descending into NamedTuples with NamedTupleKey entries.
    is_leaf_ = is_leaf or (lambda _: False)
    out = []
    for path, node in tu.tree_leaves_with_path(
            tree, is_leaf=lambda x: is_leaf_(x) or _is_named_tuple(x)):
        if is_leaf_(node) or not _is_named_tuple(node):
            out.append((path, node))
            continue
        for field in node._fields:
            key = NamedTupleKey(type(node).__name__, field)
            out += [((*path, key, *p), v)
                    for p, v in _leaves_with_named_path(getattr(node, field), is_leaf)]
    return out


def _children_with_path(path, node):
    if _is_named_tuple(node):
        return [((*path, NamedTupleKey(type(node).__name__, f)), getattr(node, f))
                for f in node._fields]
    if isinstance(node, dict):
        return [((*path, tu.DictKey(k)), v) for k, v in node.items()]
    raise ValueError(f"Subtree must be a dict or a NamedTuple. Got {type(node)}")


def _flatten_to_key(path, node, key):
    if _is_named_tuple(node):
        if key == type(node).__name__:
            return path, node
        return (*path, NamedTupleKey(type(node).__name__, key)), getattr(node, key)
    return (*path, tu.DictKey(key)), node[key]


def _get_all_with_path(tree, key):
    has_key = functools.partial(_node_has_keys, keys=(key,))
    subtrees = [(p, t) for p, t in _leaves_with_named_path(tree, is_leaf=has_key)
                if has_key(t)]
    found = [_flatten_to_key(p, t, key) for p, t in subtrees]
    for path, subtree in subtrees:
        for child_path, child in _children_with_path(path, subtree):
            found += [((*child_path, *p), v) for p, v in _get_all_with_path(child, key)]
    return found


def tree_get_all_with_path(tree, key, filtering=None):
    """Every ``(path, value)`` whose dict key, NamedTuple field or NamedTuple class name
    is ``key``, optionally kept only where ``filtering(path, value)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> s = optax.adam(1e-3).init(jnp.zeros(1))
        >>> [str(p[-1]) for p, _ in optax.tree_utils.tree_get_all_with_path(s, 'count')]
        ['ScaleByAdamState.count']
    """
    found = _get_all_with_path(tree, key)
    if filtering:
        found = [(p, v) for p, v in found if filtering(p, v)]
    return found


def tree_get(tree, key, default=None, filtering=None):
    """The one value named ``key`` in ``tree`` (``default`` when absent).

    Raises:
        KeyError: when several values match.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> s = optax.adam(1e-3).init(jnp.zeros(1))
        >>> optax.tree.get(s, 'count')
        Array(0, dtype=int32)
    """
    found = tree_get_all_with_path(tree, key, filtering=filtering)
    if len(found) > 1:
        raise KeyError(f"Found multiple values for '{key}' in {tree}.")
    return found[0][1] if found else default


def _key_name(entry):
    if isinstance(entry, tu.DictKey):
        if isinstance(entry.key, (str, int)):
            return entry.key
        raise KeyError("Hashable keys not supported")
    for attr in ("idx", "name", "key"):     # SequenceKey, GetAttrKey/NamedTupleKey, Flattened
        if hasattr(entry, attr):
            return getattr(entry, attr)
    raise KeyError(f"Tree key '{entry}' of type '{type(entry)}' not valid.")


def tree_set(tree, filtering=None, /, **kwargs):
    """A copy of ``tree`` with the values named by ``kwargs``'s keys replaced.

    Raises:
        KeyError: when a key matches nothing.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> s = optax.adam(1e-3).init(jnp.zeros(1))
        >>> int(optax.tree.get(optax.tree.set(s, count=jnp.array(5)), 'count'))
        5
    """
    for key in kwargs:
        if not tree_get_all_with_path(tree, key, filtering):
            if filtering:
                raise KeyError(f"Found no values matching '{key}' given the filtering "
                               f"operation in {tree}")
            raise KeyError(f"Found no values matching '{key}' in {tree}")
    has_any_key = functools.partial(_node_has_keys, keys=tuple(kwargs))

    def replace(path, node):
        if not has_any_key(node):
            return node
        if _is_named_tuple(node) and type(node).__name__ in kwargs and (
                filtering is None or filtering(path, node)):
            return kwargs[type(node).__name__]
        children = {}
        for child_path, child in _children_with_path(path, node):
            key = _key_name(child_path[-1])
            if key in kwargs and (filtering is None or filtering(child_path, child)):
                children[key] = kwargs[key]
            elif isinstance(child, (dict, list, tuple)):
                children[key] = replace(child_path, child)
            else:
                children[key] = child
        return node._replace(**children) if _is_named_tuple(node) else children

    _, treedef = tu.tree_flatten(tree, is_leaf=has_any_key)
    leaves = _leaves_with_named_path(tree, is_leaf=has_any_key)
    return tu.tree_unflatten(treedef, [replace(p, v) for p, v in leaves])
