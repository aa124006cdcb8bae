"""``FrozenDict`` (``flax.core.frozen_dict``): an immutable, hashable nested mapping that
is a pytree (children in sorted key order, as Flax), with ``freeze``/``unfreeze`` and the
``copy``/``pop``/``pretty_repr`` helpers that work on plain dicts too."""
import collections.abc
from types import MappingProxyType

from xform.core.tree_util import DictKey, register_pytree_with_keys, tree_map
from xform.nn import serialization

__all__ = ["FrozenDict", "copy", "freeze", "pop", "pretty_repr", "unfreeze"]


class FrozenKeysView(collections.abc.KeysView):
    """A ``FrozenDict``'s keys."""

    def __repr__(self):
        return f"frozen_dict_keys({list(self)})"


class FrozenValuesView(collections.abc.ValuesView):
    """A ``FrozenDict``'s values."""

    def __repr__(self):
        return f"frozen_dict_values({list(self)})"


def _indent(x, num_spaces):
    lines = x.split("\n")
    return "\n".join(" " * num_spaces + line for line in lines[:-1]) + "\n"


def _pretty_dict(x, num_spaces):
    if not isinstance(x, dict):
        return repr(x)
    rep = "".join(f"{k}: {_pretty_dict(v, num_spaces)},\n" for k, v in x.items())
    return "{\n" + _indent(rep, num_spaces) + "}" if rep else "{}"


class FrozenDict(collections.abc.Mapping):
    """An immutable variant of the Python dict; nested dicts are frozen too.

    A pytree whose children are the values in sorted key order (Flax's choice; iteration
    keeps insertion order). Equal to any mapping with the same items; hashable when its
    values are.

    >>> from xform.nn.core import FrozenDict
    >>> v = FrozenDict({'params': {'w': 1}, 'stats': {}})
    >>> v['params']
    FrozenDict({
        w: 1,
    })
    >>> v2, params = v.pop('params')
    >>> v2.copy({'x': 2})
    FrozenDict({
        stats: {},
        x: 2,
    })
    """

    __slots__ = ("_dict", "_hash")

    def __init__(self, *args, __unsafe_skip_copy__=False, **kwargs):  # noqa: N803
        xs = dict(*args, **kwargs)
        self._dict = xs if __unsafe_skip_copy__ else _prepare_freeze(xs)
        self._hash = None

    def __getitem__(self, key):
        v = self._dict[key]
        return FrozenDict(v) if isinstance(v, dict) else v

    def __setitem__(self, key, value):
        raise ValueError("FrozenDict is immutable.")

    def __contains__(self, key):
        return key in self._dict

    def __iter__(self):
        return iter(self._dict)

    def __len__(self):
        return len(self._dict)

    def __repr__(self):
        return self.pretty_repr()

    def __reduce__(self):
        return FrozenDict, (self.unfreeze(),)

    def __hash__(self):
        if self._hash is None:
            h = 0
            for item in self.items():
                h ^= hash(item)
            self._hash = h
        return self._hash

    def get(self, key, default=None):
        """``self[key]`` if present, else ``default``."""
        return self[key] if key in self._dict else default

    def pretty_repr(self, num_spaces=4):
        """An indented, one-entry-per-line representation (Flax's text)."""
        return f"FrozenDict({_pretty_dict(self._dict, num_spaces)})"

    def copy(self, add_or_replace=MappingProxyType({})):
        """A new FrozenDict with the entries of ``add_or_replace`` added or replaced."""
        return type(self)({**self, **unfreeze(add_or_replace)})

    def keys(self):
        return FrozenKeysView(self)

    def values(self):
        return FrozenValuesView(self)

    def items(self):
        for key in self._dict:
            yield (key, self[key])

    def pop(self, key):
        """``(new FrozenDict without key, its value)``."""
        value = self[key]
        new_dict = dict(self._dict)
        new_dict.pop(key)
        return type(self)(new_dict), value

    def unfreeze(self):
        """A mutable (nested) dict copy."""
        return unfreeze(self)

    def tree_flatten_with_keys(self):
        keys = tuple(sorted(self._dict))
        return [(DictKey(k), self._dict[k]) for k in keys], keys

    def tree_flatten(self):
        keys = tuple(sorted(self._dict))
        return [self._dict[k] for k in keys], keys

    @classmethod
    def tree_unflatten(cls, keys, values):
        return cls(dict(zip(keys, values)), __unsafe_skip_copy__=True)


register_pytree_with_keys(FrozenDict, FrozenDict.tree_flatten_with_keys,
                          FrozenDict.tree_unflatten, FrozenDict.tree_flatten)


def _prepare_freeze(xs):
    """Copies nested plain dicts so no caller-held dict is shared."""
    if isinstance(xs, FrozenDict):
        return xs._dict
    if not isinstance(xs, dict):
        return xs
    return {key: _prepare_freeze(val) for key, val in xs.items()}


def freeze(xs):
    """Makes a nested dict immutable (a :class:`FrozenDict`).

    >>> freeze({'a': {'b': 1}})['a']
    FrozenDict({
        b: 1,
    })
    """
    return FrozenDict(xs)


def unfreeze(x):
    """A mutable nested-dict copy of ``x`` (a FrozenDict or a dict); other values as is.

    A FrozenDict's nested dicts come back with sorted keys, as Flax's (which copies
    through ``tree_map``).

    >>> unfreeze(freeze({'b': 1, 'a': {'c': 2}}))
    {'a': {'c': 2}, 'b': 1}
    """
    if isinstance(x, FrozenDict):
        return tree_map(lambda y: y, x._dict)
    if isinstance(x, dict):
        return {key: unfreeze(value) for key, value in x.items()}
    return x


def copy(x, add_or_replace=FrozenDict({})):
    """``x`` (a FrozenDict or dict) copied with entries added or replaced.

    Raises:
        TypeError: ``x`` is neither.

    >>> copy({'a': 1}, {'b': 2})
    {'a': 1, 'b': 2}
    """
    if isinstance(x, FrozenDict):
        return x.copy(add_or_replace)
    if isinstance(x, dict):
        new_dict = tree_map(lambda y: y, x)
        new_dict.update(add_or_replace)
        return new_dict
    raise TypeError(f"Expected FrozenDict or dict, got {type(x)}")


def pop(x, key):
    """``(x without key, the value)`` for a FrozenDict or dict ``x`` (not modified).

    Raises:
        TypeError: ``x`` is neither.

    >>> pop({'params': 1, 'stats': 2}, 'params')
    ({'stats': 2}, 1)
    """
    if isinstance(x, FrozenDict):
        return x.pop(key)
    if isinstance(x, dict):
        new_dict = tree_map(lambda y: y, x)
        return new_dict, new_dict.pop(key)
    raise TypeError(f"Expected FrozenDict or dict, got {type(x)}")


def pretty_repr(x, num_spaces=4):
    """An indented representation of a nested (Frozen)dict; ``repr(x)`` for other values.

    >>> print(pretty_repr({'a': {'b': 1}, 'c': {}}))
    {
        a: {
            b: 1,
        },
        c: {},
    }
    """
    if isinstance(x, FrozenDict):
        return x.pretty_repr()
    return _pretty_dict(x, num_spaces)


def _restore_frozen_dict(xs, states):
    serialization._check_keys(xs, states)
    return FrozenDict({key: serialization.from_state_dict(value, states[str(key)], name=key)
                       for key, value in xs.items()})


serialization.register_serialization_state(
    FrozenDict, serialization._dict_state_dict, _restore_frozen_dict)
