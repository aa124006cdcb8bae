"""Registering pytree node types (``register_pytree_node`` and friends), the standard
library's containers that need it (OrderedDict, defaultdict), and ``Partial``.
"""
import collections
import dataclasses
import functools
import operator

from xform.core.pytree import (_CUSTOM, _LEAFK, _NAMEDTUPLE, DictKey, GetAttrKey, _Node,
                                _dispatch, _sorted_keys)
from xform.core.pytree import keystr, tree_leaves, tree_leaves_with_path  # noqa: F401  (examples)


def _register(node):
    old = _dispatch.get(node.type)
    if old is not None and old.kind not in (_LEAFK, _NAMEDTUPLE):
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {node.type}.")
    _dispatch[node.type] = node


def register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func=None):
    """Registers ``nodetype`` as a pytree node.

    Args:
      nodetype: the exact type to register (subclasses are not covered).
      flatten_func: ``x -> (children, aux_data)``; aux_data must be hashable.
      unflatten_func: ``(aux_data, children) -> x``.
      flatten_with_keys_func: optional ``x -> ([(key, child), ...], aux_data)``.

    >>> class Pair:
    ...     def __init__(self, a, b): self.a, self.b = a, b
    >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    >>> tree_leaves(Pair(1, [2]))
    [1, 2]
    """
    _register(_Node(nodetype, _CUSTOM, flatten_func, unflatten_func, flatten_with_keys_func))


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """Registers ``nodetype`` with a flatten function that also names its children.

    Args:
      nodetype: the exact type to register.
      flatten_with_keys: ``x -> ([(key, child), ...], aux_data)``.
      unflatten_func: ``(aux_data, children) -> x``.
      flatten_func: optional faster ``x -> (children, aux_data)``.

    >>> class Box:
    ...     def __init__(self, v): self.v = v
    >>> register_pytree_with_keys(Box, lambda b: ([(GetAttrKey('v'), b.v)], None),
    ...                           lambda _, c: Box(*c))
    >>> keystr(tree_leaves_with_path(Box(1))[0][0])
    '.v'
    """
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    _register(_Node(nodetype, _CUSTOM, flatten_func, unflatten_func, flatten_with_keys))


def register_pytree_node_class(cls):
    """Class decorator registering ``cls`` via its ``tree_flatten``/``tree_unflatten`` methods.

    >>> @register_pytree_node_class
    ... class Wrap:
    ...     def __init__(self, x): self.x = x
    ...     def tree_flatten(self): return (self.x,), None
    ...     @classmethod
    ...     def tree_unflatten(cls, aux, children): return cls(*children)
    >>> tree_leaves(Wrap(3))
    [3]
    """
    register_pytree_node(cls, operator.methodcaller("tree_flatten"), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls):
    """Class decorator registering ``cls`` via its ``tree_flatten_with_keys`` method (and
    ``tree_flatten``, if defined) and ``tree_unflatten`` classmethod."""
    flat = operator.methodcaller("tree_flatten") if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, operator.methodcaller("tree_flatten_with_keys"),
                              cls.tree_unflatten, flat)
    return cls


def register_static(cls):
    """Class decorator registering ``cls`` as a pytree with no leaves: an instance is
    node data (so it must be hashable), static to jit and other transformations.

    >>> @register_static
    ... class Mode(str):
    ...     pass
    >>> tree_leaves([1, Mode("train")])
    [1]
    """
    register_pytree_node(cls, lambda x: ((), x), lambda x, _: x)
    return cls


def register_dataclass(nodetype, data_fields=None, meta_fields=None, drop_fields=()):
    """Registers a dataclass: ``data_fields`` are children, ``meta_fields`` go in the treedef.

    With ``data_fields=None``, init fields with ``metadata={'static': True}`` are meta fields.

    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Pt:
    ...     x: int
    ...     n: int = dataclasses.field(default=0, metadata={'static': True})
    >>> tree_leaves(Pt(1, 2))
    [1]
    """
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: data_fields and meta_fields must both be "
                            "specified when either is specified. Got "
                            f"{data_fields=} {meta_fields=}.")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required "
                            f"when nodetype is not a dataclass. Got {nodetype=}.")
        fields = dataclasses.fields(nodetype)
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    _check_dataclass_fields(nodetype, data_fields, meta_fields, drop_fields)
    register_pytree_with_keys(
        nodetype,
        lambda x: ([(GetAttrKey(n), getattr(x, n)) for n in data_fields],
                   tuple(getattr(x, n) for n in meta_fields)),
        lambda aux, kids: nodetype(**dict(zip(meta_fields, aux)), **dict(zip(data_fields, kids))))
    return nodetype


def _check_dataclass_fields(nodetype, data_fields, meta_fields, drop_fields):
    """JAX's checks: a dataclass's init fields (less ``drop_fields``) are exactly the
    data and meta fields (unflattening passes them all to ``__init__``), with no overlap."""
    given = {*meta_fields, *data_fields}
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if given != init:
            msg = ("data_fields and meta_fields must include all dataclass fields with "
                   "``init=True`` and only them.")
            if missing := init - given:
                msg += (f" Missing fields: {missing}. Add them to drop_fields to suppress "
                        "this error.")
            if unexpected := given - init:
                msg += f" Unexpected fields: {unexpected}."
            raise ValueError(msg)
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError("data_fields and meta_fields must not overlap. Overlapping "
                         f"fields: {overlap}.")


def _defaultdict_flatten_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], (d.default_factory, keys)


register_pytree_with_keys(
    collections.OrderedDict, lambda d: ([(DictKey(k), v) for k, v in d.items()], tuple(d)),
    lambda keys, vals: collections.OrderedDict(zip(keys, vals)),
    lambda d: (list(d.values()), tuple(d)))
register_pytree_with_keys(
    collections.defaultdict, _defaultdict_flatten_with_keys,
    lambda aux, vals: collections.defaultdict(aux[0], zip(aux[1], vals)))


class _PartialShim:
    """Wraps a partial so that ``Partial(partial(...))`` does not merge their arguments."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __eq__(self, other):
        return isinstance(other, _PartialShim) and self.fn == other.fn

    def __hash__(self):
        return hash(self.fn)

    def __repr__(self):
        return f"_PartialShim({self.fn!r})"


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: args/kwargs are leaves, the function is static.

    >>> add1 = Partial(operator.add, 1)
    >>> add1(2), tree_leaves(add1)
    (3, [1])
    """

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            func = _PartialShim(func)
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, kids: Partial(func, *kids[0], **kids[1]))
