"""The scope machinery under ``xform.nn.Module``: variables by collection and path,
rng streams derived as Flax 0.12.8 derives them, and mutability filters.

A ``Scope`` is one node of the module tree. The variables live in ONE nested dict per
collection at the root (``{'params': {'Dense_0': {'kernel': ...}}}``); a child scope
holds references to its sub-dicts, so writes anywhere land in the root's dicts.

Rng derivation (bit-compatible with ``flax.core.scope``, ``flax_fix_rng_separator``
False): a stream is a base key plus a *suffix* of static data. Pushing child ``name``
appends ``name``; each ``make_rng(stream)`` bumps that scope's per-stream counter ``c``
and appends ``c``. The key is then ``fold_in(base, h)`` with ``h`` the first 4 bytes
(big endian) of the SHA-1 of the concatenated suffix (strings as UTF-8, ints as their
minimal big-endian bytes). Counters persist across calls of the same child (they are
stored in the parent, keyed by child name) so a module called twice draws new keys.
"""
import contextlib
import functools
import hashlib
import typing
from collections.abc import Collection, Mapping

import numpy as np

import xform.numpy as jnp
from xform import random
from xform.core.avals import ShapedArray
from xform.core.dtypes import canonicalize_dtype
from xform.core.tree_util import (tree_flatten, tree_leaves, tree_map, tree_structure,
                                  tree_unflatten)
from xform.interpreters import partial_eval as pe
from xform.nn import _meta as meta, errors
from xform.nn.configurations import config
from xform.transforms.jit import ShapeDtypeStruct, eval_shape, jit
from xform.transforms.runtime import named_scope

_CHILD = "__child__"   # key prefix for child counters in ``rng_counters``


class DenyList:
    """A collection filter matching everything except ``deny`` (Flax's ``DenyList``)."""

    def __init__(self, deny):
        self.deny = deny

    def __repr__(self):
        return f"DenyList({self.deny!r})"

    def __eq__(self, other):
        return isinstance(other, DenyList) and self.deny == other.deny

    def __hash__(self):
        return hash(("DenyList", str(self.deny)))

    def __lt__(self, other):   # sorts after strings, as Flax's
        if isinstance(other, str):
            return False
        return str(self.deny) < str(other.deny) if isinstance(other, DenyList) \
            else NotImplemented

    def __gt__(self, other):
        if isinstance(other, str):
            return True
        return str(self.deny) > str(other.deny) if isinstance(other, DenyList) \
            else NotImplemented


# a collection / rng stream filter: True, False, a name, a collection of names, DenyList
Filter = typing.Union[bool, str, Collection, DenyList]
CollectionFilter = PRNGSequenceFilter = Filter


def in_filter(filter_like, col):
    """Whether collection ``col`` matches a filter (bool, str, collection, DenyList)."""
    if isinstance(filter_like, str):
        return col == filter_like
    if isinstance(filter_like, Collection):
        return col in filter_like
    if isinstance(filter_like, bool):
        return filter_like
    if isinstance(filter_like, DenyList):
        return not in_filter(filter_like.deny, col)
    raise errors.InvalidFilterError(filter_like)


def is_filter_empty(filter_like):
    """Whether the filter matches nothing (``False``, an empty collection, or a
    ``DenyList`` matching everything)."""
    if isinstance(filter_like, str):
        return False
    if isinstance(filter_like, Collection):
        return not filter_like
    if isinstance(filter_like, bool):
        return not filter_like
    if isinstance(filter_like, DenyList):   # a stub name is denied only by "deny all"
        return in_filter(filter_like.deny, "__flax_internal_stub__")
    raise errors.InvalidFilterError(filter_like)


def filter_to_set(x):
    """The collections a finite filter matches (not ``True`` nor a ``DenyList``)."""
    if x is True or isinstance(x, DenyList):
        raise AssertionError("Infinite set")
    if x is False:
        return set()
    if isinstance(x, str):
        return {x}
    if isinstance(x, Collection):
        return set(x)
    raise errors.InvalidFilterError(x)


def union_filters(a, b):
    """The filter matching what ``a`` or ``b`` matches."""
    if a is True or b is True:
        return True
    if isinstance(a, DenyList) and isinstance(b, DenyList):
        return DenyList(intersect_filters(a.deny, b.deny))
    if isinstance(b, DenyList):
        a, b = b, a
    if isinstance(a, DenyList):
        return DenyList(subtract_filters(a.deny, b))
    return filter_to_set(a) | filter_to_set(b)


def subtract_filters(a, b):
    """The filter matching what ``a`` matches and ``b`` does not."""
    if b is True:
        return False
    if a is True:
        return DenyList(b)
    if isinstance(a, DenyList) and isinstance(b, DenyList):
        return subtract_filters(b.deny, a.deny)
    if isinstance(a, DenyList):
        return DenyList(union_filters(a.deny, b))
    if isinstance(b, DenyList):
        return intersect_filters(a, b.deny)
    return filter_to_set(a) - filter_to_set(b)


def intersect_filters(a, b):
    """The filter matching what both ``a`` and ``b`` match."""
    if a is True:
        return b
    if b is True:
        return a
    if isinstance(a, DenyList) and isinstance(b, DenyList):
        return DenyList(union_filters(b.deny, a.deny))
    if isinstance(b, DenyList):
        a, b = b, a
    if isinstance(a, DenyList):
        return subtract_filters(b, a.deny)
    return filter_to_set(a) & filter_to_set(b)


def group_collections(xs, col_filters):
    """Splits dict ``xs`` by filters, each key into the first group whose filter
    matches it (nested dicts copied, arrays shared)."""
    cols, groups = list(xs), []
    for f in col_filters:
        groups.append({c: _copy_plain(xs[c]) for c in cols if in_filter(f, c)})
        cols = [c for c in cols if not in_filter(f, c)]
    return tuple(groups)


class _DefaultSentinel:
    """``Scope.get_flag``'s default: no default given."""


_NO_FLAG = _DefaultSentinel()


class _Broadcast:
    def __repr__(self):
        return "nn.broadcast"


broadcast = _Broadcast()   # scan in_axes/out_axes marker: same value at every step


def fold_in_static(key, data):
    """Folds static strings/ints into ``key`` through their SHA-1 (Flax's scheme)."""
    if not data:
        return key
    m = hashlib.sha1()
    for x in data:
        if config.flax_fix_rng_separator:   # b'\0' between parts: ('ab', 'c') != ('a', 'bc')
            m.update(b"\00")
        if isinstance(x, str):
            m.update(x.encode("utf-8"))
        elif isinstance(x, int):
            m.update(x.to_bytes((x.bit_length() + 7) // 8, byteorder="big"))
        else:
            raise ValueError(f"Expected int or string, got: {x}")
    h = int.from_bytes(m.digest()[:4], byteorder="big")
    return random.fold_in(key, np.uint32(h))


class LazyRng:
    """A base key plus the static suffix still to be folded into it."""
    __slots__ = ("rng", "suffix")

    def __init__(self, rng, suffix):
        self.rng, self.suffix = rng, tuple(suffix)

    @staticmethod
    def create(rng, *suffix):
        if isinstance(rng, LazyRng):
            return LazyRng(rng.rng, rng.suffix + suffix)
        return LazyRng(rng, suffix)

    def as_jax_rng(self):
        return fold_in_static(self.rng, self.suffix)

    def clear_suffix(self):
        return LazyRng(self.rng, ())

    def replace(self, **updates):
        return LazyRng(updates.get("rng", self.rng), updates.get("suffix", self.suffix))


def is_valid_rng(rng):
    """A raw ``uint32[2]`` key, a typed key scalar or a ``LazyRng``."""
    if isinstance(rng, LazyRng):
        return True
    shape, dtype = getattr(rng, "shape", None), getattr(rng, "dtype", None)
    if shape is None or dtype is None:
        return False
    if "key" in str(dtype):
        return tuple(shape) == ()
    return tuple(shape) == (2,) and np.dtype(dtype) == np.uint32


def is_valid_rngs(rngs):
    return isinstance(rngs, dict) and all(
        isinstance(k, str) and is_valid_rng(v) for k, v in rngs.items())


class Variable:
    """A handle on one variable: read and (if its collection is mutable) write ``.value``
    (``unbox``: read/write through ``Partitioned``-style metadata boxes)."""
    __slots__ = ("scope", "collection", "name", "unbox")

    def __init__(self, scope, collection, name, unbox):
        self.scope, self.collection, self.name = scope, collection, name
        self.unbox = unbox

    @property
    def value(self):
        v = self.scope.get_variable(self.collection, self.name)
        return meta.unbox(v) if self.unbox else v

    @value.setter
    def value(self, value):
        if self.unbox:   # keep the metadata boxes when the structure is unchanged
            cur = self.scope.get_variable(self.collection, self.name)
            is_box = meta.is_axis_metadata
            if (any(map(is_box, tree_leaves(cur, is_leaf=is_box))) and tree_structure(
                    cur, is_leaf=is_box) == tree_structure(value, is_leaf=is_box)):
                value = meta.replace_boxed(cur, value)
        self.scope.put_variable(self.collection, self.name, value)

    def is_mutable(self):
        return self.scope.is_mutable_collection(self.collection)

    def __repr__(self):
        return f"Variable({self.collection}/{self.name}={self.value!r})"


def _put_variable(target, key, val):
    """``target[key] = val``, merging a mapping into an existing dict (as Flax)."""
    if key in target and isinstance(target[key], dict) and isinstance(val, Mapping):
        for k, v in val.items():
            _put_variable(target[key], k, v)
    else:
        target[key] = val


class Scope:
    """One node of the variable tree (Flax's ``flax.core.Scope``): its variables, rng
    streams and reserved names. ``debug_path`` is ``path`` with the lifted
    transformations a scope went through (``vmap(Dense_0)``), for error messages."""

    def __init__(self, variables, rngs=None, name=None, mutable=False, parent=None,
                 path=(), debug_path=(), flags=None):
        self._variables = variables
        self.rngs = {k: LazyRng.create(v) for k, v in (rngs or {}).items()}
        self.name, self.mutable, self.parent = name, mutable, parent
        self.path = tuple(path)
        self.debug_path = tuple(debug_path) or self.path
        self.flags = dict(flags or {})
        self._root = parent.root if parent is not None else None
        self.rng_counters = {k: 0 for k in self.rngs}
        self.reservations = {}
        self._invalid = False

    def __eq__(self, other):
        """Scopes are equal when they view the same variables at the same path with
        the same rng counters (e.g. a scope and its ``rewound()`` copy)."""
        if not isinstance(other, Scope):
            return False
        return self is other or (self.root._variables is other.root._variables
                                 and self.path == other.path
                                 and self.rng_counters is other.rng_counters)

    def __hash__(self):
        return hash((id(self.root._variables), self.path, id(self.rng_counters)))

    @property
    def root(self):
        return self._root or self

    @property
    def path_text(self):
        return "/" + "/".join(self.debug_path)

    # ---- validity (``apply`` invalidates its root scope on return) ----
    @property
    def invalid(self):
        return self._invalid

    def invalidate(self):
        self._invalid = True

    @contextlib.contextmanager
    def temporary(self):
        """A context in which this scope is valid; invalidated on leaving it."""
        try:
            yield self
        finally:
            self.invalidate()

    def _check_valid(self):
        if self._invalid:
            raise errors.InvalidScopeError(self.name)

    def rewound(self, rewind_rngs=False):
        """The same node with its name reservations cleared (rng counters kept unless
        ``rewind_rngs``)."""
        self._check_valid()
        s = Scope(self._variables, None, self.name, self.mutable, self.parent,
                  self.path, self.debug_path, self.flags)
        s.rngs = self.rngs
        s.rng_counters = {k: 0 for k in self.rngs} if rewind_rngs else self.rng_counters
        return s

    # ---- names ----
    def name_reserved(self, name, col=None):
        cols = self.reservations.get(name)
        return cols is not None and (None in cols or col is None or col in cols)

    def reserve(self, name, col=None):
        if not isinstance(name, str):
            raise TypeError(f'The type of scope "{name}" should be string but it is '
                            f'{type(name)}')
        if self.name_reserved(name, col):
            raise ValueError(f'Duplicate use of scope name: "{name}" in '
                             f'"{self.path_text}"')
        self.reservations.setdefault(name, set()).add(col)

    def default_name(self, prefix):
        i = 0
        while f"{prefix}{i}" in self.reservations:
            i += 1
        return f"{prefix}{i}"

    def push(self, name=None, prefix="", reuse=False):
        """The child scope ``name`` (``prefix`` + a free number when None); its rng
        streams get ``name`` appended. ``reuse``: an existing child name is fine."""
        self._check_valid()
        if name is None:
            name = self.default_name(prefix)
        if not reuse or name not in self.reservations:
            self.reserve(name)
        rngs = {k: LazyRng.create(r, name) for k, r in self.rngs.items()}
        counters = self.rng_counters.setdefault((_CHILD, name), {k: 0 for k in rngs})
        child = Scope({}, None, name, self.mutable, self, self.path + (name,),
                      self.debug_path + (name,), self.flags)
        child.rngs, child.rng_counters = rngs, counters
        return child

    def child(self, fn, name=None, prefix=None, named_call=True, **partial_kwargs):
        """``fn`` with a child scope bound as its first argument (each call sees the
        same variables, rewound names). The name defaults to ``fn.__name__ + '_'``
        plus a free number; ``named_call`` labels its ops with it."""
        if name is None:
            if prefix is None:
                prefix = fn.__name__ + "_" if hasattr(fn, "__name__") else ""
            name = self.default_name(prefix)
        scope = self.push(name)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            kwargs = dict(partial_kwargs, **kwargs)
            if named_call:
                with named_scope(name):
                    return fn(scope.rewound(), *args, **kwargs)
            return fn(scope.rewound(), *args, **kwargs)
        return wrapper

    # ---- collections ----
    def is_mutable_collection(self, col):
        return in_filter(self.mutable, col)

    def is_collection_empty(self, col):
        return not self.root._variables.get(col)

    def _collection(self, col):
        if col not in self._variables:
            if self.parent is None:
                return {}
            parent_col = self.parent._collection(col)
            if self.name not in parent_col:
                return {}
            self._variables[col] = parent_col[self.name]
        return self._variables[col]

    def _mutable_collection(self, col):
        if col not in self._variables:
            if self.parent is None:
                self._variables[col] = {}
            else:
                parent_col = self.parent._mutable_collection(col)
                if self.name not in parent_col:
                    parent_col[self.name] = {}
                self._variables[col] = parent_col[self.name]
        return self._variables[col]

    def _populate_collections(self):
        for col in list(self.root._variables):
            self._collection(col)

    def variables(self):
        self._populate_collections()
        return self._variables

    def mutable_variables(self):
        return {k: v for k, v in self.variables().items()
                if self.is_mutable_collection(k)}

    # ---- flags ----
    def has_flag(self, key):
        return key in self.flags

    def get_flag(self, key, default=_NO_FLAG):
        if key not in self.flags and default is _NO_FLAG:
            raise ValueError(f"Flag {key} not present on scope.")
        return self.flags.get(key, default)

    # ---- rngs ----
    def has_rng(self, name):
        return name in self.rngs

    def make_rng(self, name="params"):
        """A fresh key from stream ``name`` (falling back to ``params`` as Flax does)."""
        if name not in self.rngs:
            if "params" not in self.rngs:
                raise errors.InvalidRngError(
                    f'{self.path_text} needs PRNG for "{name}": pass it to init/apply, '
                    f'e.g. rngs={{"{name}": key}}.')
            name = "params"
        self._check_valid()
        self.rng_counters[name] += 1
        return LazyRng.create(self.rngs[name], self.rng_counters[name]).as_jax_rng()

    # ---- variables ----
    def get_variable(self, col, name, default=None):
        return self._collection(col).get(name, default)

    def has_variable(self, col, name):
        return name in self._collection(col)

    def put_variable(self, col, name, value):
        self._check_valid()
        if not self.is_mutable_collection(col):
            raise errors.ModifyScopeVariableError(col, name, self.path_text)
        _put_variable(self._mutable_collection(col), name, value)

    def variable(self, col, name, init_fn=None, *init_args, unbox=True, **init_kwargs):
        self.reserve(name, col)
        if not self.has_variable(col, name):
            if not self.is_mutable_collection(col) or init_fn is None:
                if self.is_collection_empty(col):
                    raise errors.ScopeCollectionNotFound(col, name, self.path_text)
                raise errors.ScopeVariableNotFoundError(name, col, self.path_text)
            self.put_variable(col, name, init_fn(*init_args, **init_kwargs))
        return Variable(self, col, name, unbox)

    def param(self, name, init_fn, *init_args, unbox=True, **init_kwargs):
        self.reserve(name, "params")
        if self.has_variable("params", name):
            value = self.get_variable("params", name)
            _check_param_shape(name, self.path_text, value, init_fn, init_args,
                               init_kwargs)
            return meta.unbox(value) if unbox else value
        if not self.is_mutable_collection("params"):
            if self.is_collection_empty("params"):
                raise errors.ScopeCollectionNotFound("params", name, self.path_text)
            raise errors.ScopeParamNotFoundError(name, self.path_text)
        value = init_fn(self.make_rng("params"), *init_args, **init_kwargs)
        self.put_variable("params", name, value)
        return meta.unbox(value) if unbox else value


def _check_param_shape(name, path_text, value, init_fn, init_args, init_kwargs):
    """Compares a stored param with the initializer's abstract output (Flax does too)."""
    abstract = eval_shape(lambda: init_fn(random.PRNGKey(0), *init_args, **init_kwargs))
    for v, a in zip(tree_leaves(value), tree_leaves(abstract)):
        if np.shape(v) != tuple(a.shape):
            raise errors.ScopeParamShapeError(name, path_text, np.shape(v),
                                              tuple(a.shape))


def bind(variables, rngs=None, mutable=False, flags=None):
    """A root scope over ``variables`` (the mutable collections copied, so the caller's
    dicts are never written)."""
    if not isinstance(variables, Mapping) or not all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in variables.items()):
        raise errors.ApplyScopeInvalidVariablesTypeError()
    if rngs is not None and not is_valid_rngs(rngs):
        raise errors.InvalidRngError(
            "rngs should be a dictionary mapping strings to PRNG keys (uint32[2] "
            "arrays from xform.random.PRNGKey).")
    new = {k: (_copy_dicts(v) if in_filter(mutable, k) or not isinstance(v, dict) else v)
           for k, v in variables.items()}
    return Scope(new, rngs=rngs, mutable=mutable, flags=flags)


def _copy_plain(x):
    """Nested plain dicts copied (FrozenDicts and arrays shared)."""
    return {k: _copy_plain(v) for k, v in x.items()} if isinstance(x, dict) else x


def _copy_dicts(x):
    """Nested dicts (FrozenDicts thawed) copied; the arrays are shared."""
    return {k: _copy_dicts(v) for k, v in x.items()} if isinstance(x, Mapping) else x


def lazy_eval(fn):
    """``fn`` callable with ``ShapeDtypeStruct`` leaves among its arguments (Flax's
    ``partial_eval.lazy_init``): it runs compiled on zeros of those shapes with only
    its outputs kept, so XLA drops the computation they do not need. As Flax, it first
    partially evaluates ``fn`` with those arguments unknown: an output that depends on
    one raises ``LazyInitError``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _check_known_outputs(fn, args, kwargs)
        concrete = lambda x: (jnp.zeros(x.shape, x.dtype)
                              if isinstance(x, ShapeDtypeStruct) else x)
        args, kwargs = tree_map(concrete, (args, kwargs))
        return jit(lambda args, kwargs: fn(*args, **kwargs))(args, kwargs)
    return wrapper


def _check_known_outputs(fn, args, kwargs):
    leaves, tree = tree_flatten((args, kwargs))
    where = [i for i, x in enumerate(leaves) if isinstance(x, ShapeDtypeStruct)]
    if not where:
        return

    def flat(*xs):   # the other arguments are known: closed over, as Flax's PartialVals
        vals = list(leaves)
        for i, x in zip(where, xs):
            vals[i] = x
        a, k = tree_unflatten(tree, vals)
        return tree_leaves(fn(*a, **k))
    closed = pe.trace_to_jaxpr(flat, [ShapedArray(leaves[i].shape, canonicalize_dtype(
        leaves[i].dtype)) for i in where])
    _, _, out_unknown, _ = pe.partial_eval_jaxpr(closed, [True] * len(where), False)
    for aval, u in zip(closed.out_avals, out_unknown):
        if u:
            raise errors.LazyInitError(aval)
