"""``flax.cursor``: edit one leaf of a nested immutable structure (dicts, FrozenDicts,
lists, tuples, namedtuples, dataclasses, e.g. a TrainState) and get the rebuilt
whole back, the original untouched.

A ``Cursor`` wraps an object and records changes per key; reading a key gives a child
cursor (kept, so later writes under it are seen), writing replaces it.  ``build()``
rebuilds bottom-up, copying only the containers on changed paths.

>>> from xform.nn.cursor import cursor
>>> cursor({'a': {'b': 1}, 'c': [2, 3]})['a']['b'].set(10)
{'a': {'b': 10}, 'c': [2, 3]}
"""
import dataclasses
import enum
import operator
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from xform.nn.core.frozen_dict import FrozenDict
from xform.nn.errors import CursorFindError, TraverseTreeError

__all__ = ["AccessType", "Cursor", "cursor"]


@runtime_checkable
class Indexable(Protocol):
    def __getitem__(self, key) -> Any: ...


class AccessType(enum.Enum):
    ITEM = enum.auto()   # obj[key]
    ATTR = enum.auto()   # obj.key


@dataclasses.dataclass
class ParentKey:
    parent: "Cursor"
    key: Any
    access_type: AccessType


def is_named_tuple(obj):
    return isinstance(obj, tuple) and all(
        hasattr(obj, a) for a in ("_fields", "_asdict", "_replace"))


def _children(obj):
    """``(items, access_type)`` of a container the cursor can rebuild, else None."""
    if isinstance(obj, (FrozenDict, dict)):
        return obj.items(), AccessType.ITEM
    if is_named_tuple(obj):
        return ((n, getattr(obj, n)) for n in obj._fields), AccessType.ATTR
    if isinstance(obj, (list, tuple)):
        return enumerate(obj), AccessType.ITEM
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.init), AccessType.ATTR
    return None


def _traverse_tree(path, obj, *, update_fn=None, cond_fn=None):
    """Depth first over ``obj``; ``update_fn(path_str, value)``: yields ``(path,
    new)`` where it returned a new object (not descending there); ``cond_fn``: yields
    the paths where it holds (not descending there). Exactly one must be given."""
    if not bool(update_fn) ^ bool(cond_fn):
        raise TraverseTreeError(update_fn, cond_fn)
    if path:
        str_path = "/".join(str(key) for key, _ in path)
        if update_fn:
            new = update_fn(str_path, obj)
            if new is not obj:
                yield path, new
                return
        elif cond_fn(str_path, obj):
            yield path
            return
    found = _children(obj)
    if found is not None:
        items, access = found
        for key, value in items:
            yield from _traverse_tree(path + ((key, access),), value,
                                      update_fn=update_fn, cond_fn=cond_fn)


class Cursor:
    """A view of ``obj`` (see the module docstring): index or get attributes to move
    down, assign or ``set`` to change, ``build`` for the new object."""

    def __init__(self, obj, parent_key):
        vars(self).update(_obj=obj, _parent_key=parent_key, _changes={})

    @property
    def _root(self):
        return self if self._parent_key is None else self._parent_key.parent._root

    @property
    def _path(self):
        """Python-syntax path from the root, e.g. ``['params'].layers[0]``."""
        pk = self._parent_key
        if pk is None:
            return ""
        if pk.access_type == AccessType.ITEM:
            key = f"'{pk.key}'" if isinstance(pk.key, str) else str(pk.key)
            return f"{pk.parent._path}[{key}]"
        return f"{pk.parent._path}.{pk.key}"

    def _child(self, key, access):
        child = Cursor(self._obj[key] if access is AccessType.ITEM
                       else getattr(self._obj, key), ParentKey(self, key, access))
        self._changes[key] = child
        return child

    def __getitem__(self, key):
        if key in self._changes:
            return self._changes[key]
        if not isinstance(self._obj, Indexable):
            raise TypeError(f"Cannot index into {self._obj}")
        if isinstance(self._obj, Mapping) and key not in self._obj:
            raise KeyError(f"Key {key} not found in {self._obj}")
        if is_named_tuple(self._obj):
            return getattr(self, self._obj._fields[key])
        return self._child(key, AccessType.ITEM)

    def __getattr__(self, name):
        if name in self._changes:
            return self._changes[name]
        if not hasattr(self._obj, name):
            raise AttributeError(f"Attribute {name} not found in {self._obj}")
        return self._child(name, AccessType.ATTR)

    def __setitem__(self, key, value):
        if is_named_tuple(self._obj):
            return setattr(self, self._obj._fields[key], value)
        self._changes[key] = Cursor(value, ParentKey(self, key, AccessType.ITEM))

    def __setattr__(self, name, value):
        self._changes[name] = Cursor(value, ParentKey(self, name, AccessType.ATTR))

    def set(self, value):
        """The root object rebuilt with this cursor's position set to ``value``."""
        if self._parent_key is None:
            return value
        parent = self._parent_key.parent
        parent._changes[self._parent_key.key] = Cursor(value, self._parent_key)
        return parent._root.build()

    def build(self):
        """The object with every change recorded under this cursor applied (copies;
        the original is not modified)."""
        changes = {k: c.build() for k, c in self._changes.items()}
        obj = self._obj
        if isinstance(obj, FrozenDict):
            return obj.copy(changes)
        if isinstance(obj, (dict, list)):
            obj = obj.copy()
            for k, v in changes.items():
                obj[k] = v
            return obj
        if is_named_tuple(obj):
            return obj._replace(**changes)
        if isinstance(obj, tuple):
            items = list(obj)
            for k, v in changes.items():
                items[k] = v
            return tuple(items)
        if dataclasses.is_dataclass(obj):
            return dataclasses.replace(obj, **changes)
        return obj

    def _at(self, path):
        child = self
        for key, access in path:
            child = child[key] if access is AccessType.ITEM else getattr(child, key)
        return child

    def apply_update(self, update_fn):
        """Records ``update_fn(path, value)`` wherever it returns a new object (paths
        are ``/``-joined keys); returns this cursor (call ``build()``)."""
        for path, value in _traverse_tree((), self._obj, update_fn=update_fn):
            parent, (key, access) = self._at(path[:-1]), path[-1]
            if access is AccessType.ITEM:
                parent[key] = value
            else:
                setattr(parent, key, value)
        return self

    def find(self, cond_fn):
        """The one sub-cursor where ``cond_fn(path, value)`` holds (CursorFindError
        when none or several do)."""
        found = self.find_all(cond_fn)
        first = next(found, None)
        if first is None:
            raise CursorFindError()
        second = next(found, None)
        if second is not None:
            raise CursorFindError(first, second)
        return first

    def find_all(self, cond_fn):
        """Sub-cursors wherever ``cond_fn(path, value)`` holds (a generator)."""
        for path in _traverse_tree((), self._obj, cond_fn=cond_fn):
            yield self._at(path)

    def __str__(self):
        return str(self._obj)

    def __repr__(self):
        return self._pretty_repr()

    def _pretty_repr(self, indent=2, _prefix_indent=0):
        pad = " " * (_prefix_indent + indent)
        obj = repr(self._obj).replace("\n", "\n" + pad)
        s = f"Cursor(\n{pad}_obj={obj},\n{pad}_changes={{"
        if self._changes:
            lines = []
            for key, child in self._changes.items():
                prefix = " " * (_prefix_indent + 2 * indent) + repr(key) + ": "
                lines.append(prefix + child._pretty_repr(indent, len(prefix)))
            s += "\n" + ",\n".join(lines) + f"\n{pad}}}\n"
        else:
            s += "}\n"
        return s + " " * _prefix_indent + ")"

    def __len__(self):
        return len(self._obj)

    def __iter__(self):
        if not isinstance(self._obj, (tuple, list)):
            raise NotImplementedError(f"__iter__ method only implemented for tuples and "
                                      f"lists, not type {type(self._obj)}")
        return (self[i] for i in range(len(self._obj)))

    def __reversed__(self):
        if not isinstance(self._obj, (tuple, list)):
            raise NotImplementedError(f"__reversed__ method only implemented for tuples "
                                      f"and lists, not type {type(self._obj)}")
        return (self[i] for i in range(len(self._obj) - 1, -1, -1))


def _forward(op, reflected):
    if reflected:
        return lambda self, other: op(other, self._obj)
    return lambda self, other: op(self._obj, other)


# Arithmetic and comparisons act on the wrapped object, as Flax's Cursor.
for _name in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow",
              "lshift", "rshift", "and", "xor", "or"):
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(Cursor, f"__{_name}__", _forward(_op, False))
    setattr(Cursor, f"__r{_name}__", _forward(_op, True))
Cursor.__divmod__ = _forward(divmod, False)
Cursor.__rdivmod__ = _forward(divmod, True)
for _name in ("lt", "le", "eq", "ne", "gt", "ge"):
    setattr(Cursor, f"__{_name}__", _forward(getattr(operator, _name), False))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(Cursor, f"__{_name}__", (lambda op: lambda self: op(self._obj))(
        getattr(operator, _name)))
Cursor.__round__ = lambda self, ndigits=None: round(self._obj, ndigits)
Cursor.__hash__ = None   # defines __eq__ (as Flax's, which is unhashable too)


def cursor(obj):
    """A ``Cursor`` over ``obj`` (any nesting of dicts, FrozenDicts, lists, tuples,
    namedtuples and dataclasses such as ``TrainState``)."""
    return Cursor(obj, None)
