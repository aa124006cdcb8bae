"""Nested-dict utilities (``flax.traverse_util``): ``flatten_dict``/``unflatten_dict``,
``path_aware_map``, and the (deprecated in Flax) ``Traversal`` lenses that select and
update parts of immutable data without mutating it."""
import abc
import copy
import dataclasses
import warnings

from xform.core.tree_util import tree_leaves, tree_map
from xform.nn.core.frozen_dict import FrozenDict, unfreeze
from xform.training import struct

__all__ = ["ModelParamTraversal", "Traversal", "TraverseAttr", "TraverseCompose",
           "TraverseEach", "TraverseFilter", "TraverseId", "TraverseItem", "TraverseMerge",
           "TraverseTree", "empty_node", "flatten_dict", "path_aware_map", "t_identity",
           "unflatten_dict"]


@struct.dataclass
class _EmptyNode:
    pass


empty_node = _EmptyNode()


def _flatten(xs, prefix, keep_empty_nodes, is_leaf, sep):
    key = prefix if sep is None else sep.join(prefix)
    if not isinstance(xs, (FrozenDict, dict)) or (is_leaf and is_leaf(prefix, xs)):
        return {key: xs}
    result = {}
    for k, value in xs.items():
        result.update(_flatten(value, prefix + (k,), keep_empty_nodes, is_leaf, sep))
    if keep_empty_nodes and not xs:
        return {} if prefix == () else {key: empty_node}
    return result


def flatten_dict(xs, keep_empty_nodes=False, is_leaf=None, sep=None):
    """Flattens a nested (Frozen)dict to ``{key tuple: leaf}``.

    Args:
        xs: a nested dictionary.
        keep_empty_nodes: keep empty sub-dicts as :data:`empty_node` (else dropped).
        is_leaf: ``(path, value) -> bool``: stop descending at this sub-dict.
        sep: join the key tuples into strings with ``sep``.

    Returns:
        The flat dictionary.

    >>> flatten_dict({'foo': 1, 'bar': {'a': 2, 'b': {}}})
    {('foo',): 1, ('bar', 'a'): 2}
    >>> flatten_dict({'a': {'b': 1}}, sep='/')
    {'a/b': 1}
    """
    assert isinstance(xs, (FrozenDict, dict)), f"expected (frozen)dict; got {type(xs)}"
    return _flatten(xs, (), keep_empty_nodes, is_leaf, sep)


def unflatten_dict(xs, sep=None):
    """Inverse of :func:`flatten_dict` (``empty_node`` becomes ``{}``).

    >>> unflatten_dict({('foo',): 1, ('bar', 'a'): 2})
    {'foo': 1, 'bar': {'a': 2}}
    """
    assert isinstance(xs, dict), f"input is not a dict; it is a {type(xs)}"
    result = {}
    for path, value in xs.items():
        if sep is not None:
            path = path.split(sep)
        if value is empty_node:
            value = {}
        cursor = result
        for key in path[:-1]:
            cursor = cursor.setdefault(key, {})
        cursor[path[-1]] = value
    return result


def path_aware_map(f, nested_dict):
    """Maps ``f(path, value)`` over the leaves of a nested dict (``path``: key tuple).

    >>> params = {'a': {'x': 10, 'y': 3}, 'b': {'x': 20}}
    >>> path_aware_map(lambda path, x: x + 5 if 'x' in path else -x, params)
    {'a': {'x': 15, 'y': -3}, 'b': {'x': 25}}
    """
    flat = flatten_dict(nested_dict, keep_empty_nodes=True)
    return unflatten_dict({k: v if v is empty_node else f(k, v) for k, v in flat.items()})


class Traversal(abc.ABC):
    """Selects parts of an object: ``iterate`` them or ``update`` them in a copy.

    Built by chaining from :data:`t_identity`: ``t_identity['a'].each().attr``.

    >>> data = [{'foo': 1, 'bar': 2}, {'foo': 3, 'bar': 4}]
    >>> list(t_identity.each()['foo'].iterate(data))
    [1, 3]
    >>> t_identity.each()['foo'].update(lambda x: -x, data)
    [{'foo': -1, 'bar': 2}, {'foo': -3, 'bar': 4}]
    """

    def __new__(cls, *args, **kwargs):
        warnings.warn(
            "`flax.traverse_util.Traversal` will be deprecated. If you are using it for "
            "`flax.optim`, use `optax` instead. Refer to the update guide https://flax."
            "readthedocs.io/en/latest/guides/converting_and_upgrading/optax_update_guide"
            ".html for detailed instructions.", DeprecationWarning)
        return super().__new__(cls)

    @abc.abstractmethod
    def update(self, fn, inputs):
        """A copy of ``inputs`` with ``fn`` applied to each selected item."""

    @abc.abstractmethod
    def iterate(self, inputs):
        """An iterator over the selected items of ``inputs``."""

    def set(self, values, inputs):
        """A copy of ``inputs`` with the selected items replaced by ``values`` in order.

        Raises:
            ValueError: fewer or more values than selected items.
        """
        def update_fn(_):
            if not values:
                raise ValueError("Not enough values provided")
            return values.pop(0)
        y = self.update(update_fn, inputs)
        if values:
            raise ValueError("Too many values provided")
        return y

    def compose(self, other):
        """``other`` applied to each item this selects."""
        return TraverseCompose(self, other)

    def merge(self, *traversals):
        """The union of ``traversals``' selections, after this one."""
        return self.compose(TraverseMerge(*traversals))

    def each(self):
        """Each item of the selected containers."""
        return self.compose(TraverseEach())

    def tree(self):
        """Each leaf of the selected pytrees."""
        return self.compose(TraverseTree())

    def filter(self, fn):
        """The selected items for which ``fn`` is true."""
        return self.compose(TraverseFilter(fn))

    def __getattr__(self, attr):
        return self.compose(TraverseAttr(attr))

    def __getitem__(self, key):
        return self.compose(TraverseItem(key))


class TraverseId(Traversal):
    """The identity Traversal."""

    def update(self, fn, inputs):
        return fn(inputs)

    def iterate(self, inputs):
        yield inputs


with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    t_identity = TraverseId()


class TraverseMerge(Traversal):
    """Merges the selections of several traversals."""

    def __init__(self, *traversals):
        self._traversals = traversals

    def update(self, fn, inputs):
        for traversal in self._traversals:
            inputs = traversal.update(fn, inputs)
        return inputs

    def iterate(self, inputs):
        for traversal in self._traversals:
            yield from traversal.iterate(inputs)


class TraverseCompose(Traversal):
    """Two traversals, one after the other."""

    def __init__(self, x, y):
        self._x, self._y = x, y

    def update(self, fn, inputs):
        return self._x.update(lambda x: self._y.update(fn, x), inputs)

    def iterate(self, inputs):
        for x in self._x.iterate(inputs):
            yield from self._y.iterate(x)


class TraverseFilter(Traversal):
    """Keeps the selected values for which a predicate holds."""

    def __init__(self, fn):
        self._fn = fn

    def update(self, fn, inputs):
        return fn(inputs) if self._fn(inputs) else inputs

    def iterate(self, inputs):
        if self._fn(inputs):
            yield inputs


def _is_namedtuple(t):
    return issubclass(t, tuple) and hasattr(t, "_fields")


class TraverseAttr(Traversal):
    """An attribute of an object (namedtuples and dataclasses are ``replace``d)."""

    def __init__(self, attr):
        self._attr = attr

    def update(self, fn, inputs):
        value = fn(getattr(inputs, self._attr))
        if _is_namedtuple(type(inputs)):
            return inputs._replace(**{self._attr: value})
        if dataclasses.is_dataclass(inputs):
            return dataclasses.replace(inputs, **{self._attr: value})
        inputs = copy.copy(inputs)
        setattr(inputs, self._attr, value)
        return inputs

    def iterate(self, inputs):
        yield getattr(inputs, self._attr)


class TraverseItem(Traversal):
    """An item (key, index or slice) of a container."""

    def __init__(self, key):
        self._key = key

    def update(self, fn, inputs):
        if isinstance(inputs, tuple):
            ty = type(inputs)
            sl = self._key if isinstance(self._key, slice) else slice(self._key, self._key + 1)
            indices = set(range(*sl.indices(len(inputs))))
            args = [fn(x) if i in indices else x for i, x in enumerate(inputs)]
            return ty(*args) if _is_namedtuple(ty) else ty(args)
        xs = copy.copy(inputs)
        xs[self._key] = fn(xs[self._key])
        return xs

    def iterate(self, inputs):
        if isinstance(self._key, slice):
            yield from inputs[self._key]
        else:
            yield inputs[self._key]


class TraverseEach(Traversal):
    """Each entry of a list, tuple or dict."""

    def update(self, fn, inputs):
        ty = type(inputs)
        if ty is dict:
            return {key: fn(val) for key, val in inputs.items()}
        if ty not in {list, tuple}:
            raise ValueError("Only the entries of a list or tuple can be traversed.")
        return ty(fn(x) for x in inputs)

    def iterate(self, inputs):
        yield from (inputs.values() if isinstance(inputs, dict) else inputs)


class TraverseTree(Traversal):
    """Every leaf of a pytree."""

    def update(self, fn, inputs):
        return tree_map(fn, inputs)

    def iterate(self, inputs):
        yield from tree_leaves(inputs)


def _get_params_dict(inputs):
    if isinstance(inputs, (dict, FrozenDict)):
        return unfreeze(inputs)
    raise ValueError("Can only traverse a flax Model instance or a nested dict, not "
                     f"{type(inputs)}")


class ModelParamTraversal(Traversal):
    """The parameters of a nested dict whose ``'/a/b/name'`` path and value pass
    ``filter_fn(path, value)``, visited in sorted path order.

    >>> params = {'Dense_0': {'kernel': 1, 'bias': 2}}
    >>> t = ModelParamTraversal(lambda path, _: 'bias' not in path)
    >>> t.update(lambda x: x * 10, params)
    {'Dense_0': {'bias': 2, 'kernel': 10}}
    """

    def __init__(self, filter_fn):
        self._filter_fn = filter_fn

    def iterate(self, inputs):
        flat = flatten_dict(_get_params_dict(inputs))
        for key, value in sorted(flat.items(), key=lambda kv: kv[0]):
            if self._filter_fn("/" + "/".join(key), value):
                yield value

    def update(self, fn, inputs):
        flat = flatten_dict(_get_params_dict(inputs), keep_empty_nodes=True)
        new_dict = {}
        for key, value in sorted(flat.items(), key=lambda kv: kv[0]):
            if value is not empty_node and self._filter_fn("/" + "/".join(key), value):
                value = fn(value)
            new_dict[key] = value
        new_params = unflatten_dict(new_dict)
        return FrozenDict(new_params) if isinstance(inputs, FrozenDict) else new_params
