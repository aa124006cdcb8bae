"""State dicts and Flax's msgpack format (``flax.serialization``): objects become nested
dicts of arrays (``to_state_dict``) and back against a template (``from_state_dict``);
``to_bytes``/``from_bytes`` write and read exactly the bytes Flax does."""
import contextlib
import enum
import threading

import ml_dtypes
import msgpack
import numpy as np

from xform.core.array import Array
from xform.core.tree_util import Partial, tree_map

__all__ = ["MAX_CHUNK_SIZE", "current_path", "from_bytes", "from_state_dict",
           "is_serializable", "msgpack_restore", "msgpack_serialize",
           "register_serialization_state", "to_bytes", "to_state_dict"]

_STATE_DICT_REGISTRY = {}


class _ErrorContext(threading.local):
    """The state-dict path being restored, for error messages."""

    def __init__(self):
        self.path = []


_error_context = _ErrorContext()


@contextlib.contextmanager
def _record_path(name):
    _error_context.path.append(name)
    try:
        yield
    finally:
        _error_context.path.pop()


def current_path():
    """The ``/``-joined state-dict path being restored (for error messages).

    >>> current_path()
    ''
    """
    return "/".join(_error_context.path)


class _NamedTuple:
    """Registry key standing for every namedtuple class."""


def _registry_type(x):
    return _NamedTuple if isinstance(x, tuple) and hasattr(x, "_fields") else type(x)


def from_state_dict(target, state, name="."):
    """Restores ``target``'s structure with the values of ``state``.

    Only the structure of ``target`` is used (registered containers are rebuilt, every
    other leaf is replaced by the state's value).

    Args:
        target: a template, e.g. freshly initialized params or a ``TrainState``.
        state: a state dict as made by :func:`to_state_dict`.
        name: this branch's name in error messages.

    Returns:
        A copy of ``target`` holding ``state``'s values.

    Raises:
        ValueError: ``state``'s keys do not match ``target``'s (the message names the path).

    >>> from_state_dict({'a': 0, 'b': [0, 0]}, {'a': 1, 'b': {'0': 2, '1': 3}})
    {'a': 1, 'b': [2, 3]}
    """
    ty = _registry_type(target)
    if ty not in _STATE_DICT_REGISTRY:
        return state
    with _record_path(name):
        return _STATE_DICT_REGISTRY[ty][1](target, state)


def to_state_dict(target):
    """``target`` as a state dict: registered containers become ``str``-keyed dicts.

    >>> import collections
    >>> P = collections.namedtuple('P', 'x y')
    >>> to_state_dict({'p': P(1, [2, 3])})
    {'p': {'x': 1, 'y': {'0': 2, '1': 3}}}
    """
    ty = _registry_type(target)
    if ty not in _STATE_DICT_REGISTRY:
        return target
    state_dict = _STATE_DICT_REGISTRY[ty][0](target)
    if isinstance(state_dict, dict):
        for key in state_dict:
            assert isinstance(key, str), "A state dict must only have string keys."
    return state_dict


def is_serializable(target):
    """Whether ``target`` (an object or a type) has a registered state-dict handler.

    >>> is_serializable({}), is_serializable(3)
    (True, False)
    """
    return (target if isinstance(target, type) else type(target)) in _STATE_DICT_REGISTRY


def register_serialization_state(ty, ty_to_state_dict, ty_from_state_dict, override=False):
    """Registers how instances of ``ty`` become state dicts and are restored from them.

    Args:
        ty: the type (exact; subclasses are not covered).
        ty_to_state_dict: ``x -> state dict``.
        ty_from_state_dict: ``(template, state dict) -> restored copy``.
        override: replace an existing registration instead of raising.

    Raises:
        ValueError: ``ty`` is already registered and ``override`` is False.

    >>> class Box:
    ...     def __init__(self, v): self.v = v
    >>> register_serialization_state(Box, lambda b: {'v': to_state_dict(b.v)},
    ...                              lambda b, s: Box(from_state_dict(b.v, s['v'])))
    >>> from_state_dict(Box(0), to_state_dict(Box(5))).v
    5
    """
    if ty in _STATE_DICT_REGISTRY and not override:
        raise ValueError(f'a serialization handler for "{ty.__name__}" is already registered')
    _STATE_DICT_REGISTRY[ty] = (ty_to_state_dict, ty_from_state_dict)


def _list_state_dict(xs):
    return {str(i): to_state_dict(x) for i, x in enumerate(xs)}


def _restore_list(xs, state_dict):
    if len(state_dict) != len(xs):
        raise ValueError("The size of the list and the state dict do not match,"
                         f" got {len(xs)} and {len(state_dict)} at path {current_path()}")
    return [from_state_dict(xs[i], state_dict[str(i)], name=str(i))
            for i in range(len(state_dict))]


def _dict_state_dict(xs):
    str_keys = {str(k) for k in xs}
    if len(str_keys) != len(xs):
        raise ValueError("Dict keys do not have a unique string representation: "
                         f"{str_keys} vs given: {xs}")
    return {str(key): to_state_dict(value) for key, value in xs.items()}


def _check_keys(xs, states):
    diff = set(map(str, xs.keys())).difference(map(str, states.keys()))
    if diff:
        raise ValueError("The target dict keys and state dict keys do not match, target "
                         f"dict contains keys {diff} which are not present in state dict "
                         f"at path {current_path()}")


def _restore_dict(xs, states):
    _check_keys(xs, states)
    return {key: from_state_dict(value, states[str(key)], name=str(key))
            for key, value in xs.items()}


def _namedtuple_state_dict(nt):
    return {key: to_state_dict(getattr(nt, key)) for key in nt._fields}


def _restore_namedtuple(xs, state_dict):
    if set(state_dict) == {"name", "fields", "values"}:   # Flax's pre-2022 layout
        state_dict = {state_dict["fields"][str(i)]: state_dict["values"][str(i)]
                      for i in range(len(state_dict["fields"]))}
    sd_keys, nt_keys = set(state_dict), set(xs._fields)
    if sd_keys != nt_keys:
        raise ValueError("The field names of the state dict and the named tuple do not "
                         f"match, got {sd_keys} and {nt_keys} at path {current_path()}")
    return type(xs)(**{k: from_state_dict(getattr(xs, k), v, name=k)
                       for k, v in state_dict.items()})


register_serialization_state(dict, _dict_state_dict, _restore_dict)
register_serialization_state(list, _list_state_dict, _restore_list)
register_serialization_state(
    tuple, _list_state_dict, lambda xs, sd: tuple(_restore_list(list(xs), sd)))
register_serialization_state(_NamedTuple, _namedtuple_state_dict, _restore_namedtuple)
register_serialization_state(
    Partial,
    lambda x: {"args": to_state_dict(x.args), "keywords": to_state_dict(x.keywords)},
    lambda x, sd: Partial(x.func, *from_state_dict(x.args, sd["args"]),
                          **from_state_dict(x.keywords, sd["keywords"])))


# ---- the msgpack wire format ----
# An array is ext type 1 holding msgpack (shape, dtype name, C-order bytes); a NumPy
# scalar is ext 3 (same payload, 0-d); a Python complex is ext 2 holding (real, imag).
# Arrays over MAX_CHUNK_SIZE bytes (msgpack's per-object limit is 2**31 - 1) are split
# into a dict {'__msgpack_chunked_array__': True, 'shape': {...}, 'chunks': {...}}.

class _MsgpackExtType(enum.IntEnum):
    """Flax's msgpack ext type codes."""
    ndarray = 1
    native_complex = 2
    npscalar = 3


MAX_CHUNK_SIZE = 2**30


def _ndarray_to_bytes(arr):
    if isinstance(arr, Array):
        arr = np.array(arr)
    if arr.dtype.hasobject or arr.dtype.isalignedstruct:
        raise ValueError("Object and structured dtypes not supported for serialization "
                         "of ndarrays.")
    return msgpack.packb((arr.shape, arr.dtype.name, arr.tobytes("C")), use_bin_type=True)


def _dtype_from_name(name):
    name = name.decode() if isinstance(name, bytes) else name
    # ml_dtypes' types (bfloat16, float8_*, int4) have no NumPy name lookup
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def _ndarray_from_bytes(data):
    shape, dtype_name, buffer = msgpack.unpackb(data, raw=True)
    return np.frombuffer(buffer, dtype=_dtype_from_name(dtype_name)).reshape(shape)


def _msgpack_ext_pack(x):
    if isinstance(x, (np.ndarray, Array)):
        return msgpack.ExtType(_MsgpackExtType.ndarray, _ndarray_to_bytes(x))
    if isinstance(x, np.generic):
        return msgpack.ExtType(_MsgpackExtType.npscalar, _ndarray_to_bytes(np.asarray(x)))
    if isinstance(x, complex):
        return msgpack.ExtType(_MsgpackExtType.native_complex,
                               msgpack.packb((x.real, x.imag)))
    return x


def _msgpack_ext_unpack(code, data):
    if code == _MsgpackExtType.ndarray:
        return _ndarray_from_bytes(data)
    if code == _MsgpackExtType.native_complex:
        re, im = msgpack.unpackb(data)
        return complex(re, im)
    if code == _MsgpackExtType.npscalar:
        return _ndarray_from_bytes(data)[()]
    return msgpack.ExtType(code, data)


def _tuple_to_dict(tpl):
    return {str(i): x for i, x in enumerate(tpl)}


def _dict_to_tuple(dct):
    return tuple(dct[str(i)] for i in range(len(dct)))


def _chunk(arr):
    chunksize = max(1, int(MAX_CHUNK_SIZE / arr.dtype.itemsize))
    flat = arr.reshape(-1)
    chunks = [flat[i:i + chunksize] for i in range(0, flat.size, chunksize)]
    return {"__msgpack_chunked_array__": True, "shape": _tuple_to_dict(arr.shape),
            "chunks": _tuple_to_dict(chunks)}


def _unchunk(data):
    flat = np.concatenate(_dict_to_tuple(data["chunks"]))
    return flat.reshape(_dict_to_tuple(data["shape"]))


def _to_numpy_and_chunk(d):
    """Device arrays -> NumPy and oversized arrays -> chunk dicts, in place, through
    nested dicts only (Flax's two passes in one; lists' arrays are packed as they are)."""
    if isinstance(d, dict):
        for k, v in d.items():
            d[k] = _to_numpy_and_chunk(v)
        return d
    if isinstance(d, Array):
        d = np.array(d)
    if isinstance(d, np.ndarray) and d.size * d.dtype.itemsize > MAX_CHUNK_SIZE:
        return _chunk(d)
    return d


def _unchunk_in_place(d):
    if isinstance(d, dict):
        if "__msgpack_chunked_array__" in d:
            return _unchunk(d)
        for k, v in d.items():
            d[k] = _unchunk_in_place(v)
    return d


def msgpack_serialize(pytree, in_place=False):
    """A tree of dicts, lists, tuples, Python scalars and arrays as Flax's msgpack bytes.

    Args:
        pytree: the tree; for other objects use :func:`to_bytes`.
        in_place: allow converting ``pytree``'s dicts in place (no copy first).

    Returns:
        The msgpack bytes; arrays over ``MAX_CHUNK_SIZE`` bytes are written in chunks.

    >>> import numpy as np
    >>> msgpack_restore(msgpack_serialize({'w': np.arange(3), 'z': 1j}))
    {'w': array([0, 1, 2]), 'z': 1j}
    """
    if not in_place:
        pytree = tree_map(lambda x: x, pytree)
    pytree = _to_numpy_and_chunk(pytree)
    return msgpack.packb(pytree, default=_msgpack_ext_pack, strict_types=True)


def msgpack_restore(encoded_pytree):
    """The tree written by :func:`msgpack_serialize` (arrays come back as NumPy arrays).

    >>> msgpack_restore(msgpack_serialize([1, [2.5, 'a']]))
    [1, [2.5, 'a']]
    """
    state_dict = msgpack.unpackb(encoded_pytree, ext_hook=_msgpack_ext_unpack, raw=False,
                                 strict_map_key=False)
    return _unchunk_in_place(state_dict)


def from_bytes(target, encoded_bytes):
    """Restores ``target`` (a template, e.g. fresh params or a ``TrainState``) from bytes
    written by :func:`to_bytes` or Flax's ``flax.serialization.to_bytes``.

    >>> import xform.numpy as jnp
    >>> from_bytes({'w': jnp.zeros(2)}, to_bytes({'w': jnp.ones(2)}))
    {'w': array([1., 1.], dtype=float32)}
    """
    return from_state_dict(target, msgpack_restore(encoded_bytes))


def to_bytes(target):
    """``target``'s state dict as msgpack bytes, byte for byte what Flax writes.

    >>> len(to_bytes({'step': 3}))
    7
    """
    return msgpack_serialize(to_state_dict(target), in_place=True)
