"""``xform.tree``: the short pytree API (``jax.tree.map``, ``jax.tree.leaves``, ...).

Thin names over :mod:`xform.core.tree_util`, with JAX's ``jax.tree`` signatures.
"""
import dataclasses as _dataclasses

from xform.core import tree_util as _tu

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "static", "structure",
           "transpose", "unflatten"]

_builtin_all = all
_builtin_map = map


def all(tree, *, is_leaf=None):  # noqa: A001
    """Whether every leaf of ``tree`` is truthy.

    >>> import xform
    >>> xform.tree.all([True, {'a': 1}])
    True
    """
    return _builtin_all(_tu.tree_leaves(tree, is_leaf))


def flatten(tree, is_leaf=None):
    """``(leaves, treedef)`` of ``tree``.

    >>> import xform
    >>> xform.tree.flatten({'b': 2, 'a': (1, None)})[0]
    [1, 2]
    """
    return _tu.tree_flatten(tree, is_leaf)


def leaves(tree, is_leaf=None):
    """The leaves of ``tree`` in flattening order.

    >>> import xform
    >>> xform.tree.leaves([1, (2, [3])])
    [1, 2, 3]
    """
    return _tu.tree_leaves(tree, is_leaf)


def map(f, tree, *rest, is_leaf=None):  # noqa: A001
    """Applies ``f`` leafwise to ``tree`` (and to the matching leaves of ``rest``).

    >>> import xform
    >>> xform.tree.map(lambda x, y: x + y, (1, [2]), (10, [20]))
    (11, [22])
    """
    return _tu.tree_map(f, tree, *rest, is_leaf=is_leaf)


def reduce(function, tree, initializer=_tu._NO_INIT, is_leaf=None):  # noqa: A001
    """Folds the leaves of ``tree`` with ``function`` (``functools.reduce`` order).

    >>> import operator, xform
    >>> xform.tree.reduce(operator.add, [1, (2, 3)], 10)
    16
    """
    return _tu.tree_reduce(function, tree, initializer, is_leaf)


def reduce_associative(operation, tree, *, identity=_tu._NO_INIT, is_leaf=None):
    """Reduces the leaves with an associative ``operation`` as a balanced tree
    (logarithmic depth): the halves ``[:n // 2]`` and ``[n // 2:]`` reduced and then
    combined, as JAX's (so floating-point sums round alike); ``identity`` is returned
    for a tree without leaves.

    Raises:
      TypeError: if ``tree`` has no leaves and no ``identity`` was given.

    >>> import operator, xform
    >>> xform.tree.reduce_associative(operator.add, [1, (2, 3), [4, 5, 6]])
    21
    """
    items = _tu.tree_leaves(tree, is_leaf)
    if not items:
        if identity is _tu._NO_INIT:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity

    def halves(seq):
        if len(seq) == 1:
            return seq[0]
        mid = len(seq) // 2
        return operation(halves(seq[:mid]), halves(seq[mid:]))
    return halves(items)


def structure(tree, is_leaf=None):
    """The ``PyTreeDef`` of ``tree``.

    >>> import xform
    >>> xform.tree.structure((1, [2]))
    PyTreeDef((*, [*]))
    """
    return _tu.tree_structure(tree, is_leaf)


def transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """Turns an outer-of-inner pytree into an inner-of-outer one (``inner_treedef`` may
    be None: inferred from the first outer subtree).

    >>> import xform
    >>> outer, inner = xform.tree.structure([0, 0]), xform.tree.structure((0, 0))
    >>> xform.tree.transpose(outer, inner, [(1, 2), (3, 4)])
    ([1, 3], [2, 4])
    """
    return _tu.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def unflatten(treedef, leaves):
    """Rebuilds a pytree of structure ``treedef`` from ``leaves``.

    >>> import xform
    >>> td = xform.tree.structure((0, [0]))
    >>> xform.tree.unflatten(td, [1, 2])
    (1, [2])
    """
    return _tu.tree_unflatten(treedef, leaves)


def flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """``([(key_path, leaf), ...], treedef)``.

    >>> import xform
    >>> xform.tree.flatten_with_path({'a': [1]})[0]
    [((DictKey(key='a'), SequenceKey(idx=0)), 1)]
    """
    return _tu.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)


def leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """``[(key_path, leaf), ...]``.

    >>> import xform
    >>> xform.tree.leaves_with_path((5,))
    [((SequenceKey(idx=0),), 5)]
    """
    return _tu.tree_leaves_with_path(tree, is_leaf, is_leaf_takes_path)


def map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """Like :func:`map`, with ``f(key_path, leaf, *others)``.

    >>> import xform
    >>> xform.tree.map_with_path(lambda p, x: xform.tree_util.keystr(p), {'a': 1})
    {'a': "['a']"}
    """
    return _tu.tree_map_with_path(f, tree, *rest, is_leaf=is_leaf,
                                  is_leaf_takes_path=is_leaf_takes_path)


def broadcast(prefix_tree, full_tree, is_leaf=None):
    """Repeats each leaf of ``prefix_tree`` over the matching subtree of ``full_tree``.

    Raises:
      ValueError: if ``prefix_tree`` is not a prefix of ``full_tree``.

    >>> import xform
    >>> xform.tree.broadcast((1, 2, 3), (0, {'a': 0, 'b': 0}, (0, 0)))
    (1, {'a': 2, 'b': 2}, (3, 3))
    """
    out = []
    _tu.tree_map(lambda x, sub: out.extend([x] * _tu.tree_structure(sub).num_leaves),
                 prefix_tree, full_tree, is_leaf=is_leaf)
    return _tu.tree_structure(full_tree).unflatten(out)


def static(**kwargs):
    """``dataclasses.field`` marked static for :func:`xform.tree_util.register_dataclass`
    (the field goes into the treedef, not the leaves).

    >>> import dataclasses, xform
    >>> @xform.tree_util.register_dataclass
    ... @dataclasses.dataclass
    ... class Op:
    ...     x: float
    ...     op: str = xform.tree.static(default="add")
    >>> xform.tree.leaves(Op(1.0))
    [1.0]
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata["static"] = True
    return _dataclasses.field(metadata=metadata, **kwargs)
