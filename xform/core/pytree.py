"""Pytrees: flatten nested containers into leaves plus a hashable ``PyTreeDef``; key
paths and prefixes. The registration of new node types is in ``pytree_registry.py``;
``tree_util.py`` is the face (the same API as ``jax.tree_util``).
"""
import functools
import itertools
import operator  # noqa: F401  (docstring examples)

from xform import backend

# Node kinds; tuple-like kinds (TUPLE, LIST, NAMEDTUPLE) are <= _NAMEDTUPLE.
_LEAFK, _NONEK, _TUPLE, _LIST, _NAMEDTUPLE, _DICT, _CUSTOM = range(7)


class _Node:
    """How to take apart and rebuild one node type."""

    __slots__ = ("type", "kind", "flatten", "unflatten", "flatten_with_keys")

    def __init__(self, type_, kind, flatten=None, unflatten=None, flatten_with_keys=None):
        self.type, self.kind = type_, kind
        self.flatten, self.unflatten, self.flatten_with_keys = flatten, unflatten, flatten_with_keys


_LEAF_NODE = _Node(None, _LEAFK)
# Exact type -> _Node; also caches leaf types and namedtuple classes after first sight.
_dispatch = {
    type(None): _Node(type(None), _NONEK),
    tuple: _Node(tuple, _TUPLE),
    list: _Node(list, _LIST),
    dict: _Node(dict, _DICT),
}


def _classify(t):
    node = _Node(t, _NAMEDTUPLE) if issubclass(t, tuple) and hasattr(t, "_fields") else _LEAF_NODE
    _dispatch[t] = node
    return node


def _sorted_keys(d):
    try:
        return tuple(sorted(d))
    except TypeError as e:
        raise ValueError("Comparator raised exception while sorting pytree dictionary keys: "
                         f"{e}") from e


def _shallow(node, x):
    """Returns ``(children, node_data)`` of ``x``, a node of kind ``node``."""
    kind = node.kind
    if kind <= _NAMEDTUPLE:
        return (x, None) if kind != _NONEK else ((), None)
    if kind == _DICT:
        keys = _sorted_keys(x)
        return [x[k] for k in keys], keys
    kids, data = node.flatten(x)
    return (kids if isinstance(kids, (tuple, list)) else list(kids)), data


class PyTreeDef:
    """The structure of a pytree: node types, node data and arity, without the leaves."""

    __slots__ = ("_node", "_data", "_children", "num_leaves", "num_nodes", "_hash")

    def __init__(self, node, data, children, num_leaves, num_nodes):
        self._node, self._data, self._children = node, data, children
        self.num_leaves, self.num_nodes = num_leaves, num_nodes
        try:
            self._hash = hash((node.type, data, children))
        except TypeError:
            # Unhashable node data (e.g. a dict), as JAX allows: the hash leaves it out
            # and __eq__ compares it by equality, so such treedefs still key jit caches.
            self._hash = hash((node.type, children, num_leaves))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return (self._node is other._node and self.num_nodes == other.num_nodes
                and self._hash == other._hash
                and self._data == other._data and self._children == other._children)

    def __repr__(self):
        return f"PyTreeDef({_repr(self)})"

    def __copy__(self):  # treedefs are immutable; copies keep identity-based node comparison
        return self

    def __deepcopy__(self, memo):
        return self

    def children(self):
        """Returns the treedefs of the root's immediate children."""
        return list(self._children)

    def node_data(self):
        """Returns ``(node_type, node_data)`` of the root, or None for a leaf."""
        node = self._node
        if node.kind == _LEAFK:
            return None
        return node.type, list(self._data) if node.kind == _DICT else self._data

    def unflatten(self, leaves):
        """Rebuilds a pytree of this structure from an iterable of leaves."""
        if type(leaves) is not list:
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            few = "few" if len(leaves) < self.num_leaves else "many"
            raise ValueError(f"Too {few} leaves for PyTreeDef; expected {self.num_leaves}, "
                             f"got {len(leaves)}.")
        return _unflatten(self, iter(leaves))

    def compose(self, inner):
        """This structure with ``inner`` in place of each of its leaves (the structure of
        ``tree_unflatten(self, [tree_unflatten(inner, ...)] * n)``)."""
        if self._node.kind == _LEAFK:
            return inner
        if not self.num_leaves:   # (None, (), {}: as they are; None is a singleton)
            return self
        kids = tuple(c.compose(inner) for c in self._children)
        return PyTreeDef(self._node, self._data, kids, sum(k.num_leaves for k in kids),
                         1 + sum(k.num_nodes for k in kids))

    def flatten_up_to(self, tree):
        """Returns the subtrees of ``tree`` sitting at this treedef's leaves.

        Raises ValueError naming the key path if ``tree`` lacks this structure.
        """
        return _flatten_up_to(self, tree, "the treedef", "the tree")


class _SingletonDef(PyTreeDef):
    """The leaf and None treedefs are singletons, so C-level identity hashing is exact."""

    __slots__ = ()
    __hash__ = object.__hash__


_LEAF = _SingletonDef(_LEAF_NODE, None, (), 1, 1)
_NONE = _SingletonDef(_dispatch[type(None)], None, (), 0, 1)


def _repr(td):
    kind, kids = td._node.kind, td._children
    if kind == _LEAFK:
        return "*"
    if kind == _NONEK:
        return "None"
    inner = ", ".join(map(_repr, kids))
    if kind == _TUPLE:
        return f"({inner},)" if len(kids) == 1 else f"({inner})"
    if kind == _LIST:
        return f"[{inner}]"
    if kind == _DICT:
        return "{" + ", ".join(f"{k!r}: {_repr(c)}" for k, c in zip(td._data, kids)) + "}"
    if kind == _NAMEDTUPLE:
        return f"CustomNode(namedtuple[{td._node.type.__name__}], [{inner}])"
    return f"CustomNode({td._node.type.__name__}[{td._data}], [{inner}])"


def _flatten(x, leaves, is_leaf):
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    get = _dispatch.get
    node = get(type(x)) or _classify(type(x))
    kind = node.kind
    if kind <= _NAMEDTUPLE:
        if kind == _LEAFK:
            leaves.append(x)
            return _LEAF
        if kind == _NONEK:
            return _NONE
        kids, data = x, None
    elif kind == _DICT:
        data = _sorted_keys(x)
        kids = [x[k] for k in data]
    else:
        kids, data = node.flatten(x)
    start, nodes, children = len(leaves), 1, []
    for c in kids:
        if is_leaf is None and get(type(c)) is _LEAF_NODE:
            leaves.append(c)
            children.append(_LEAF)
            nodes += 1
        else:
            td = _flatten(c, leaves, is_leaf)
            children.append(td)
            nodes += td.num_nodes
    return PyTreeDef(node, data, tuple(children), len(leaves) - start, nodes)


def _collect_leaves(x, out, is_leaf):
    if is_leaf is not None and is_leaf(x):
        out.append(x)
        return
    get = _dispatch.get
    node = get(type(x)) or _classify(type(x))
    if node.kind == _LEAFK:
        out.append(x)
    elif node.kind != _NONEK:
        for c in _shallow(node, x)[0]:
            if is_leaf is None and get(type(c)) is _LEAF_NODE:
                out.append(c)
            else:
                _collect_leaves(c, out, is_leaf)


def _unflatten(td, it):
    node = td._node
    kind = node.kind
    if kind == _LEAFK:
        return next(it)
    kids, n = td._children, len(td._children)
    if td.num_leaves == n and td.num_nodes == n + 1:  # all children are leaves
        kids = list(itertools.islice(it, n))
    else:
        kids = [next(it) if c is _LEAF else _unflatten(c, it) for c in kids]
    if kind == _TUPLE:
        return tuple(kids)
    if kind == _LIST:
        return kids
    if kind == _DICT:
        return dict(zip(td._data, kids))
    if kind == _NONEK:
        return None
    if kind == _NAMEDTUPLE:
        return node.type(*kids)
    return node.unflatten(td._data, tuple(kids))


def tree_flatten(tree, is_leaf=None):
    """Flattens a pytree into its leaves and its structure.

    Args:
      tree: the pytree to flatten.
      is_leaf: optional predicate; subtrees for which it is true are leaves.

    Returns:
      A pair ``(leaves, treedef)``.

    >>> tree_flatten((1, {'a': 2, 'b': None}))
    ([1, 2], PyTreeDef((*, {'a': *, 'b': None})))
    """
    leaves = []
    return leaves, _flatten(tree, leaves, is_leaf)


def tree_unflatten(treedef, leaves):
    """Rebuilds a pytree from a treedef and its leaves.

    >>> tree_unflatten(tree_structure((0, [0])), [1, 2])
    (1, [2])
    """
    return treedef.unflatten(leaves)


def builtin_treedef(treedef):
    """``treedef`` as jaxlib's C++ treedef (its ``unflatten`` is ~3x faster: cache-hit
    paths rebuild outputs with it) where it holds builtin containers only, else None."""
    marks = [object() for _ in range(treedef.num_leaves)]
    leaves, c_tree = backend.flatten_builtin(treedef.unflatten(marks))
    same = len(leaves) == len(marks) and all(a is b for a, b in zip(leaves, marks))
    return c_tree if same else None


def tree_leaves(tree, is_leaf=None):
    """Returns the leaves of a pytree in flattening order.

    >>> tree_leaves({'b': 2, 'a': [1, None]})
    [1, 2]
    """
    out = []
    _collect_leaves(tree, out, is_leaf)
    return out


def tree_structure(tree, is_leaf=None):
    """Returns the treedef of a pytree.

    >>> tree_structure((1, [2]))
    PyTreeDef((*, [*]))
    """
    return _flatten(tree, [], is_leaf)


def tree_map(f, tree, *rest, is_leaf=None):
    """Applies ``f`` leafwise; each of ``rest`` must have ``tree``'s structure as a prefix.

    >>> tree_map(lambda x, y: x + y, (1, [2]), (10, [20]))
    (11, [22])
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return _unflatten(treedef, map(f, leaves))
    others = [_flatten_up_to(treedef, r, "the first tree", f"tree argument {i + 1}")
              for i, r in enumerate(rest)]
    return _unflatten(treedef, map(f, leaves, *others))


_NO_INIT = object()


def tree_reduce(function, tree, initializer=_NO_INIT, is_leaf=None):
    """Reduces the leaves of a pytree with ``function``, like ``functools.reduce``.

    >>> tree_reduce(operator.add, [1, (2, 3)])
    6
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INIT:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree, *, is_leaf=None):
    """Returns whether all leaves are truthy.

    >>> tree_all([True, (1, None)])
    True
    """
    return all(tree_leaves(tree, is_leaf))


def all_leaves(iterable, is_leaf=None):
    """Returns whether every element of ``iterable`` is a leaf.

    >>> all_leaves([1, 'a']), all_leaves([1, None])
    (True, False)
    """
    items = list(iterable)
    return items == tree_leaves(items, is_leaf) if is_leaf is not None else all(
        (_dispatch.get(type(x)) or _classify(type(x))) is _LEAF_NODE for x in items)


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """Turns an outer-of-inner pytree into an inner-of-outer one.

    >>> tree_transpose(tree_structure([0, 0]), tree_structure((0, 0)), [(1, 2), (3, 4)])
    ([1, 3], [2, 4])
    """
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    leaves, treedef = tree_flatten(pytree_to_transpose)
    expected = _compose(outer_treedef, inner_treedef)
    if treedef != expected:
        raise TypeError(f"Mismatch\n{treedef}\n != \n{expected}")
    n = inner_treedef.num_leaves
    return inner_treedef.unflatten([outer_treedef.unflatten(leaves[j::n]) for j in range(n)])


def _make_def(node, data, kids):
    return PyTreeDef(node, data, kids, sum(k.num_leaves for k in kids),
                     1 + sum(k.num_nodes for k in kids))


def _compose(outer, inner):
    if not outer._children:
        return inner if outer is _LEAF else outer
    return _make_def(outer._node, outer._data, tuple(_compose(c, inner) for c in outer._children))


def treedef_children(treedef):
    """Returns the treedefs of the root's children.

    >>> treedef_children(tree_structure((1, [2])))
    [PyTreeDef(*), PyTreeDef([*])]
    """
    return treedef.children()


def treedef_is_leaf(treedef):
    """Returns whether the treedef has a single node (a leaf, None or an empty container).

    >>> treedef_is_leaf(tree_structure(1)), treedef_is_leaf(tree_structure([1]))
    (True, False)
    """
    return treedef.num_nodes == 1


def treedef_tuple(treedefs):
    """Builds the treedef of a tuple whose children have the given treedefs.

    >>> treedef_tuple([tree_structure(1), tree_structure([1])])
    PyTreeDef((*, [*]))
    """
    return _make_def(_dispatch[tuple], None, tuple(treedefs))


# ----------------------------------------------------------------------------- key paths


class _KeyEntry:
    """Base of the key-path entries: one field, compared and hashed by type and value."""

    __slots__ = ()
    _fmt = ""

    def __init__(self, value):
        setattr(self, self.__match_args__[0], value)

    def _value(self):
        return getattr(self, self.__match_args__[0])

    def __eq__(self, other):
        return type(self) is type(other) and self._value() == other._value()

    def __hash__(self):
        return hash((type(self), self._value()))

    def __repr__(self):
        return f"{type(self).__name__}({self.__match_args__[0]}={self._value()!r})"

    def __str__(self):
        return self._fmt.format(self._value())


class DictKey(_KeyEntry):
    """Path entry for a mapping value; prints as ``['a']``."""

    __slots__ = __match_args__ = ("key",)
    _fmt = "[{!r}]"


class SequenceKey(_KeyEntry):
    """Path entry for a sequence element; prints as ``[0]``."""

    __slots__ = __match_args__ = ("idx",)
    _fmt = "[{}]"


class GetAttrKey(_KeyEntry):
    """Path entry for an attribute (namedtuple or dataclass field); prints as ``.x``."""

    __slots__ = __match_args__ = ("name",)
    _fmt = ".{}"


class FlattenedIndexKey(_KeyEntry):
    """Path entry for the i-th child of a node registered without keys."""

    __slots__ = __match_args__ = ("key",)
    _fmt = "[<flat index {}>]"


def keystr(keys, *, simple=False, separator=""):
    """Renders a key path as a string.

    Args:
      keys: a sequence of key entries.
      simple: if true, render each key bare (``a`` rather than ``['a']``).
      separator: string put between keys.

    >>> keystr((DictKey('a'), SequenceKey(0), GetAttrKey('x')))
    "['a'][0].x"
    """
    return separator.join(str(k._value()) if simple and isinstance(k, _KeyEntry) else str(k)
                          for k in keys)


def _keyed_children(node, x):
    kind = node.kind
    if kind == _NAMEDTUPLE:
        return [(GetAttrKey(f), c) for f, c in zip(x._fields, x)]
    if kind == _DICT:
        return [(DictKey(k), x[k]) for k in _sorted_keys(x)]
    if kind < _DICT:
        return [(SequenceKey(i), c) for i, c in enumerate(_shallow(node, x)[0])]
    if node.flatten_with_keys is not None:
        return list(node.flatten_with_keys(x)[0])
    return [(FlattenedIndexKey(i), c) for i, c in enumerate(node.flatten(x)[0])]


def _leaf_paths(x, path, out, is_leaf, takes_path=False):
    if is_leaf is not None and (is_leaf(path, x) if takes_path else is_leaf(x)):
        out.append((path, x))
        return
    node = _dispatch.get(type(x)) or _classify(type(x))
    if node.kind == _LEAFK:
        out.append((path, x))
        return
    for k, c in _keyed_children(node, x):
        _leaf_paths(c, path + (k,), out, is_leaf, takes_path)


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """Like ``tree_flatten`` but each leaf comes with its key path;
    ``is_leaf_takes_path``: ``is_leaf`` is called as ``is_leaf(key_path, x)``.

    >>> pairs, _ = tree_flatten_with_path({'a': [1]})
    >>> [(keystr(p), x) for p, x in pairs]
    [("['a'][0]", 1)]
    """
    if not (is_leaf_takes_path and is_leaf is not None):
        return tree_leaves_with_path(tree, is_leaf), tree_structure(tree, is_leaf)
    pairs, seen = [], []   # (the structure's walk replays the path walk's decisions:
    _leaf_paths(tree, (), pairs, lambda p, x: seen.append(bool(is_leaf(p, x))) or seen[-1],
                True)      # both visit the same nodes in the same order)
    return pairs, _flatten(tree, [], lambda x, it=iter(seen): next(it))


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """Returns ``[(key_path, leaf), ...]`` in flattening order (``is_leaf_takes_path``:
    ``is_leaf(key_path, x)``).

    >>> tree_leaves_with_path((1,))
    [((SequenceKey(idx=0),), 1)]
    """
    out = []
    _leaf_paths(tree, (), out, is_leaf, is_leaf_takes_path)
    return out


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """Like ``tree_map`` but calls ``f(key_path, leaf, *other_leaves)``
    (``is_leaf_takes_path``: ``is_leaf(key_path, x)``).

    >>> tree_map_with_path(lambda p, x: keystr(p), {'a': 1})
    {'a': "['a']"}
    """
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [_flatten_up_to(treedef, r, "the first tree", f"tree argument {i + 1}")
              for i, r in enumerate(rest)]
    return treedef.unflatten(f(p, x, *xs) for (p, x), *xs in zip(pairs, *others))


# ---------------------------------------------------------------------------- one level

def _node_of(x):
    node = _dispatch.get(type(x)) or _classify(type(x))
    if node.kind == _LEAFK:
        raise ValueError(f"can't tree-flatten type: {type(x)}")
    return node


def flatten_one_level(tree):
    """``(children, node data)`` of a pytree node, one level down (ValueError for a
    leaf). A namedtuple's node data is its class, a dict's its sorted keys.

    >>> flatten_one_level({'a': [1, 2], 'b': {'c': 3}})
    (([1, 2], {'c': 3}), ('a', 'b'))
    """
    node = _node_of(tree)
    kids, data = _shallow(node, tree)
    if node.kind == _NAMEDTUPLE:
        return list(kids), type(tree)
    return (tuple(kids) if node.kind == _DICT else kids), data


def flatten_one_level_with_keys(tree):
    """``([(key, child), ...], node data)``: :func:`flatten_one_level` with each child's
    key (``DictKey``, ``SequenceKey``, ``GetAttrKey``, or the node's own)."""
    node = _node_of(tree)
    data = type(tree) if node.kind == _NAMEDTUPLE else _shallow(node, tree)[1]
    return _keyed_children(node, tree), data


def is_tree_node(typ):
    """Whether instances of ``typ`` are pytree nodes (containers, namedtuples, registered
    types), not leaves."""
    return (_dispatch.get(typ) or _classify(typ)).kind != _LEAFK


# ----------------------------------------------------------------------------- prefixes


class _Mismatch(Exception):
    def __init__(self, expected, got):
        super().__init__(expected, got)
        self.expected, self.got, self.path = expected, got, []


def _describe(node, data, n):
    kind = node.kind
    if kind == _NONEK:
        return "None"
    if kind == _DICT:
        return f"a dict with keys {list(data)}"
    if kind <= _NAMEDTUPLE:
        what = "namedtuple " if kind == _NAMEDTUPLE else ""
        return f"a {what}{node.type.__name__} of length {n}"
    return f"a {node.type.__name__} node with node data {data!r} and {n} children"


def _describe_value(x):
    node = _dispatch.get(type(x)) or _classify(type(x))
    if node.kind == _LEAFK:
        return f"a leaf of type {type(x).__name__}"
    kids, data = _shallow(node, x)
    return _describe(node, data, len(kids))


def _up_to(td, x, out):
    node = td._node
    if node.kind == _LEAFK:
        out.append(x)
        return
    if (_dispatch.get(type(x)) or _classify(type(x))) is node:
        kids, data = _shallow(node, x)
        if len(kids) == len(td._children) and data == td._data:
            for i, (c, k) in enumerate(zip(td._children, kids)):
                if c is _LEAF:
                    out.append(k)
                    continue
                try:
                    _up_to(c, k, out)
                except _Mismatch as e:
                    e.path.insert(0, _keyed_children(node, x)[i][0])
                    raise
            return
    raise _Mismatch(_describe(node, td._data, len(td._children)), _describe_value(x))


def _flatten_up_to(treedef, tree, prefix_name, full_name):
    out = []
    try:
        _up_to(treedef, tree, out)
    except _Mismatch as e:
        where = keystr(e.path) or "<root>"
        raise ValueError(
            f"pytree structure mismatch at key path {where}: {prefix_name} has {e.expected} but "
            f"{full_name} has {e.got}.\n  {prefix_name} structure: {treedef}\n"
            f"  {full_name} structure: {tree_structure(tree)}") from None
    return out


def broadcast_prefix(prefix_tree, full_tree, is_leaf=None):
    """Repeats each leaf of ``prefix_tree`` once per leaf of the matching subtree of ``full_tree``.

    ``None`` in ``prefix_tree`` is a leaf (vmap's "not mapped"); ``is_leaf`` applies to
    ``prefix_tree`` only: ``full_tree``'s subtrees count their ordinary leaves (a ``None``
    there has none), as JAX's. Raises ValueError naming the key path where
    ``prefix_tree`` is not a prefix of ``full_tree``.

    >>> broadcast_prefix((0, None), ([1, 2], {'a': 3}))
    [0, 0, None]
    """
    prefix_is_leaf = ((lambda x: x is None) if is_leaf is None
                      else (lambda x: x is None or is_leaf(x)))
    leaves, treedef = tree_flatten(prefix_tree, prefix_is_leaf)
    subtrees = _flatten_up_to(treedef, full_tree, "prefix", "the value")
    out = []
    for leaf, sub in zip(leaves, subtrees):
        out.extend([leaf] * len(tree_leaves(sub)))
    return out
