"""Checkpoints: save and restore any pytree of arrays and scalars (params, optimizer
state, a ``TrainState``) in one **safetensors** file, never pickle.

The arrays are the file's tensors (named by leaf index); the tree structure, each leaf's
dtype and shape, its SHA-256, and Python scalars go in JSON under the safetensors header's
``__metadata__``. Loading parses that header and checks every tensor against it before
anything is returned, so a truncated, corrupted or foreign file (a pickle included, which
is never executed) gives :class:`CheckpointError` and loads nothing. Saving writes a
temporary file in the same folder, fsyncs it and renames it over the target, so a crash
mid-save never leaves a half-written checkpoint under the real name.

Example:
    >>> import os, tempfile, xform.numpy as jnp
    >>> from xform import checkpoint
    >>> path = os.path.join(tempfile.mkdtemp(), 'ckpt.safetensors')
    >>> checkpoint.save(path, {'w': jnp.ones(2, jnp.bfloat16), 'step': 3})
    >>> checkpoint.restore(path)
    {'step': 3, 'w': Array([1, 1], dtype=bfloat16)}

NB: ``xform.checkpoint`` is also JAX's ``jax.checkpoint`` (remat): this module object is
callable and forwards calls to :func:`xform.transforms.checkpoint.checkpoint`, so
``xform.checkpoint(f)`` and ``xform.checkpoint.save(...)`` both work.
"""
import collections
import hashlib
import json
import os
import re
import struct
import sys
import tempfile
import types

import numpy as np

from xform.core import tree_util as tu
from xform.core import dtypes
from xform.transforms.checkpoint import checkpoint as _remat
import xform.numpy as jnp
import xform.random
from xform.random import _keys

__all__ = ["save", "restore", "save_sharded", "restore_sharded", "CheckpointError",
           "CheckpointManager"]

_FORMAT = "xform.checkpoint"
_VERSION = 1
_META_KEY = "xform"
# dtypes safetensors stores natively; any other dtype is stored as raw bytes (U8)
_NATIVE = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
           "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint64": "U64",
           "uint32": "U32", "uint16": "U16", "uint8": "U8", "bool": "BOOL",
           "complex64": "C64"}
_EXTRA = ("complex128", "float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz",
          "float8_e4m3fnuz", "float8_e5m2fnuz", "int4", "uint4")


class CheckpointError(ValueError):
    """A checkpoint file is missing pieces, corrupted, not a checkpoint, or does not fit
    the ``target`` it is restored into. The message names the file and, for a mismatch,
    the key path and both shapes/dtypes. Nothing is loaded when it is raised."""


def _np_dtype(name):
    if name in _NATIVE or name in _EXTRA:
        if name in ("bfloat16",) + _EXTRA and name != "complex128":
            import ml_dtypes
            return np.dtype(getattr(ml_dtypes, name))
        return np.dtype(name)
    raise KeyError(name)


# ---------------------------------------------------------------- structure encoding

def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _encode_key(k, path):
    if isinstance(k, str):
        return ["s", k]
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
        return ["i", int(k)]
    raise TypeError(f"checkpoint: dict key {k!r} at {tu.keystr(path) or 'the root'} has type "
                    f"{type(k).__name__}; checkpoints support str and int keys")


def _encode(x, path, leaves):
    """JSON skeleton of ``x``; appends ``(path, leaf)`` in ``tree_flatten`` order."""
    if x is None:
        return {"t": "none"}
    one_level = lambda y: y is not x  # noqa: E731
    td = tu.tree_structure(x, is_leaf=one_level)
    if td.num_nodes == 1 and td.num_leaves == 1:
        leaves.append((path, x))
        return {"t": "leaf"}
    pairs = tu.tree_flatten_with_path(x, is_leaf=one_level)[0]
    keys = [p[0] for p, _ in pairs]
    kids = [_encode(c, path + (k,), leaves) for k, (_, c) in zip(keys, pairs)]
    if _is_namedtuple(x):
        return {"t": "namedtuple", "name": type(x).__name__, "fields": list(x._fields),
                "c": kids}
    if type(x) in (dict, collections.OrderedDict, collections.defaultdict):
        t = "odict" if type(x) is collections.OrderedDict else "dict"
        return {"t": t, "keys": [_encode_key(k.key, path) for k in keys], "c": kids}
    if type(x) in (list, tuple):
        return {"t": type(x).__name__, "c": kids}
    return {"t": "node", "type": f"{type(x).__module__}.{type(x).__qualname__}",
            "keys": [str(k) for k in keys], "c": kids}


_NT_CACHE = {}


def _decode(sk, leaves, file):
    """Rebuild a tree from its skeleton without a target: containers as saved,
    NamedTuples as namedtuples of the same name and fields, other nodes as dicts."""
    t = sk["t"]
    if t == "none":
        return None
    if t == "leaf":
        return next(leaves)
    kids = [_decode(c, leaves, file) for c in sk["c"]]
    if t == "namedtuple":
        key = (sk["name"], tuple(sk["fields"]))
        if key not in _NT_CACHE:
            try:
                _NT_CACHE[key] = collections.namedtuple(*key)
            except (ValueError, TypeError) as e:
                raise CheckpointError(f"{file}: bad NamedTuple in the structure: {e}") from None
        return _NT_CACHE[key](*kids)
    if t in ("dict", "odict"):
        d = dict(zip((k for _, k in sk["keys"]), kids))
        return collections.OrderedDict(d) if t == "odict" else d
    if t == "list":
        return kids
    if t == "tuple":
        return tuple(kids)
    return dict(zip(sk["keys"], kids))


def _describe(sk):
    t = sk["t"]
    if t == "leaf":
        return "a leaf"
    if t == "none":
        return "None"
    if t == "namedtuple":
        return f"NamedTuple {sk['name']}({', '.join(sk['fields'])})"
    if t in ("dict", "odict"):
        return f"a dict with keys {sorted((k for _, k in sk['keys']), key=repr)}"
    if t in ("list", "tuple"):
        return f"a {t} of length {len(sk['c'])}"
    return f"a {sk['type']} with fields {sk['keys']}"


def _child_key(sk, i):
    t = sk["t"]
    if t == "namedtuple":
        return tu.GetAttrKey(sk["fields"][i])
    if t in ("dict", "odict"):
        return tu.DictKey(sk["keys"][i][1])
    if t in ("list", "tuple"):
        return tu.SequenceKey(i)
    return tu.GetAttrKey(sk["keys"][i].lstrip("."))


def _match(saved, want, path, file):
    same = saved["t"] == want["t"] and all(
        saved.get(f) == want.get(f) for f in ("name", "fields", "keys", "type"))
    same = same and len(saved.get("c", ())) == len(want.get("c", ()))
    if not same:
        where = tu.keystr(path) or "the root"
        raise CheckpointError(f"{file}: the checkpoint's structure differs from the target's "
                              f"at {where}: the checkpoint has {_describe(saved)}, the target "
                              f"has {_describe(want)}")
    for i, (s, w) in enumerate(zip(saved.get("c", ()), want.get("c", ()))):
        _match(s, w, path + (_child_key(saved, i),), file)


# ---------------------------------------------------------------- leaves

def _leaf_record(path, x):
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return {"kind": "py", "type": type(x).__name__, "value": x}, None
    if isinstance(x, complex):
        return {"kind": "py", "type": "complex", "value": [x.real, x.imag]}, None
    if isinstance(x, (str, bytes)) or not (hasattr(x, "shape") and hasattr(x, "dtype")) \
            and not isinstance(x, np.generic):
        raise TypeError(f"checkpoint: the leaf at {tu.keystr(path) or 'the root'} is a "
                        f"{type(x).__name__}; checkpoints hold arrays and numbers")
    if dtypes.is_extended(getattr(x, "dtype", None)) and hasattr(x, "physical_value"):
        # typed PRNG keys: their uint32 data, and the key dtype to wrap it back in
        rec, stored = _leaf_record(path, np.asarray(x.physical_value()))
        return {**rec, "extended": str(x.dtype)}, stored
    try:
        arr = np.asarray(x, order="C")   # (ascontiguousarray would make 0-d arrays 1-d)
    except Exception as e:  # noqa: BLE001  (tracers, ...)
        raise TypeError(f"checkpoint: the leaf at {tu.keystr(path) or 'the root'} "
                        f"({type(x).__name__} of dtype {getattr(x, 'dtype', '?')}) has no "
                        f"NumPy value to save ({type(e).__name__}: {e}); save concrete "
                        "arrays (outside jit)") from None
    name = arr.dtype.name
    if name not in _NATIVE and name not in _EXTRA:
        raise TypeError(f"checkpoint: the leaf at {tu.keystr(path) or 'the root'} has dtype "
                        f"{name}, which checkpoints do not support")
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    data = arr.tobytes()
    rec = {"kind": "array", "dtype": name, "shape": list(arr.shape),
           "sha256": hashlib.sha256(data).hexdigest()}
    stored = arr if name in _NATIVE else np.frombuffer(data, np.uint8)
    return rec, stored


def _serialize(tree):
    from safetensors import TensorSpec, serialize
    leaves = []
    skeleton = _encode(tree, (), leaves)
    records, specs, keep = [], {}, []
    for i, (path, x) in enumerate(leaves):
        rec, arr = _leaf_record(path, x)
        records.append(rec)
        if arr is not None:
            keep.append(arr)
            specs[str(i)] = TensorSpec(dtype=arr.dtype.name, shape=arr.shape,
                                       data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    meta = {"format": _FORMAT, "version": _VERSION, "tree": skeleton, "leaves": records}
    data = bytes(serialize(specs, metadata={_META_KEY: json.dumps(meta)}))
    del keep
    return data


# ---------------------------------------------------------------- reading

def _read_header(data, file):
    """The safetensors header of ``data`` and our metadata, or CheckpointError."""
    if len(data) < 8:
        raise CheckpointError(f"{file} is not an xform checkpoint (only {len(data)} bytes; "
                              "truncated or empty)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8 or n < 2 or data[8:9] != b"{":
        hint = " (it looks like a pickle, which is never loaded)" \
            if data[:1] == b"\x80" else ""
        if data[8:9] == b"{" and n > len(data) - 8:
            raise CheckpointError(f"{file} is truncated: its header says {n} header bytes but "
                                  f"the file has {len(data) - 8} after the length")
        raise CheckpointError(f"{file} is not an xform checkpoint: it does not start with a "
                              f"safetensors header{hint}")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
        meta = json.loads(header["__metadata__"][_META_KEY])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise CheckpointError(f"{file} is not an xform checkpoint: its safetensors header "
                              f"has no valid '{_META_KEY}' metadata") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise CheckpointError(f"{file} is not an xform checkpoint (format "
                              f"{meta.get('format') if isinstance(meta, dict) else None!r})")
    if meta.get("version") != _VERSION:
        raise CheckpointError(f"{file}: checkpoint format version {meta.get('version')!r} is "
                              f"not supported (this xform reads version {_VERSION})")
    return header, meta, 8 + n


def _load_leaves(data, header, meta, start, file):
    """Every leaf of the file as numpy arrays / Python scalars, each checked."""
    out = []
    body = len(data) - start
    try:
        records = list(meta["leaves"])
        for i, rec in enumerate(records):
            if rec["kind"] == "py":
                typ, v = rec["type"], rec["value"]
                conv = {"bool": bool, "int": int, "float": float}
                out.append(complex(*v) if typ == "complex" else conv[typ](v))
                continue
            info = header[str(i)]
            dtype = _np_dtype(rec["dtype"])
            if info["dtype"] != _NATIVE.get(rec["dtype"], "U8"):
                raise CheckpointError(f"{file} is corrupted: tensor {i} is stored as "
                                      f"{info['dtype']} but its metadata says {rec['dtype']}")
            shape = tuple(int(s) for s in rec["shape"])
            lo, hi = (int(o) for o in info["data_offsets"])
            if hi > body or lo > hi:
                raise CheckpointError(f"{file} is truncated: tensor {i} ends at byte {hi} of "
                                      f"the data section, which has only {body} bytes")
            raw = data[start + lo:start + hi]
            if len(raw) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
                raise CheckpointError(f"{file} is corrupted: tensor {i} has {len(raw)} bytes "
                                      f"for shape {shape} dtype {dtype.name}")
            if hashlib.sha256(raw).hexdigest() != rec["sha256"]:
                raise CheckpointError(f"{file} is corrupted: the bytes of tensor {i} do not "
                                      "match their SHA-256 checksum")
            arr = np.frombuffer(raw, dtype).reshape(shape).copy()
            out.append(arr if "extended" not in rec else _wrap_extended(rec["extended"], arr))
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, IndexError):
        raise CheckpointError(f"{file} is corrupted: its metadata does not describe its "
                              "tensors") from None
    return out


def _read(path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path!r} does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"checkpoint {path!r} is a directory; pass the file (or use "
                                "CheckpointManager for a directory of checkpoints)")
    with open(path, "rb") as f:
        data = f.read()
    header, meta, start = _read_header(data, path)
    return meta, _load_leaves(data, header, meta, start, path)


def _is_checkpoint_file(path):
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            (n,) = struct.unpack("<Q", head)
            if n > 100_000_000:
                return False
            header = json.loads(f.read(n))
        return json.loads(header["__metadata__"][_META_KEY]).get("format") == _FORMAT
    except Exception:  # noqa: BLE001  (any failure means "not one of ours")
        return False


# ---------------------------------------------------------------- public API

def save(path, tree, *, overwrite=True):
    """Save ``tree`` to the file ``path`` atomically.

    Args:
        path: the file to write (conventionally ``*.safetensors``).
        tree: a pytree of arrays (any dtype, including bfloat16, float16, ints, bools and
            0-d), Python numbers and None; dicts, lists, tuples, NamedTuples and registered
            nodes such as ``TrainState``.
        overwrite: replace an existing checkpoint at ``path``; a file there that is not an
            xform checkpoint is never replaced.

    Raises:
        TypeError: a leaf is not an array or a number (the message names its key path).
        FileExistsError: ``path`` exists and ``overwrite`` is False or it is not a
            checkpoint.

    Example:
        >>> import os, tempfile, xform.numpy as jnp
        >>> from xform import checkpoint
        >>> path = os.path.join(tempfile.mkdtemp(), 'params.safetensors')
        >>> checkpoint.save(path, [jnp.zeros(2), None])
        >>> checkpoint.restore(path)
        [Array([0., 0.], dtype=float32), None]
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"checkpoint.save: {path!r} is a directory; pass a file name")
    if os.path.exists(path):
        if not overwrite:
            raise FileExistsError(f"checkpoint.save: {path!r} exists (pass overwrite=True to "
                                  "replace it)")
        if not _is_checkpoint_file(path):
            raise FileExistsError(f"checkpoint.save: {path!r} exists and is not an xform "
                                  "checkpoint; refusing to overwrite it")
    data = _serialize(tree)   # fails before touching the disk
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    _write_atomic(path, data)
    _fsync_dir(folder)   # make the rename itself durable


def _write_atomic(path, data):
    """Write ``data`` to ``path`` through a temporary file and a rename, so a reader (or
    a crash) sees the old file or the whole new one, never a partial write."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fsync_dir(folder):
    """Make renames in ``folder`` durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def _wrap_extended(name, data):
    impl = next((i for i, t in _keys.KEY_DTYPES.items() if t.name == name), None)
    if impl is None:
        raise CheckpointError(f"unknown extended dtype {name!r} in the checkpoint")
    return xform.random.wrap_key_data(data, impl=impl)


def _dtype_name(dt):
    return str(dt) if dtypes.is_extended(dt) else np.dtype(dt).name


def _leaf_desc(x):
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return f"a Python {type(x).__name__}"
    return f"shape {tuple(np.shape(x))} dtype {_dtype_name(x.dtype)}"


def _exact_scalar(value, dt):
    """``value`` (a Python number) as a 0-d array of ``dt``, or None where that would
    wrap an integer or overflow a finite float to inf."""
    with np.errstate(over="ignore"):
        try:
            out = np.asarray(value, dtype=dt)
        except OverflowError:
            return None
    if out.dtype.kind in "iub":
        return out if out.item() == value else None
    finite = np.isfinite(np.asarray(value, dtype=np.complex128 if isinstance(
        value, complex) else np.float64))
    return out if not finite or np.isfinite(out.astype(np.complex128)) else None


def _fit_leaf(stored, want, path, file):
    """``stored`` as the target leaf ``want`` expects, or CheckpointError."""
    where = tu.keystr(path) or "the root"
    py = (bool, int, float, complex)
    w_py = isinstance(want, py) and not isinstance(want, np.generic)
    s_py = isinstance(stored, py) and not isinstance(stored, np.generic)
    if w_py or s_py:
        kind = lambda v: np.dtype(type(v) if isinstance(v, py) and not isinstance(  # noqa
            v, np.generic) else v.dtype).kind
        ok_shape = (w_py or np.shape(want) == ()) and (s_py or np.shape(stored) == ())
        if ok_shape and (kind(stored) == kind(want) or {kind(stored), kind(want)} <= {"i", "u"}):
            if w_py:
                return type(want)(stored.item() if hasattr(stored, "item") else stored)
            out = _exact_scalar(stored, want.dtype)
            if out is not None:
                return out
            raise CheckpointError(f"{file}: the leaf {where} holds {stored!r} in the "
                                  f"checkpoint, which dtype {_dtype_name(want.dtype)} of "
                                  "the target cannot represent")
    elif tuple(stored.shape) == tuple(np.shape(want)) and \
            _dtype_name(stored.dtype) == _dtype_name(want.dtype):
        return stored
    hint = ""
    if not (w_py or s_py) and not _holds_exactly(stored.dtype) and \
            _dtype_name(want.dtype) == dtypes.canonicalize_dtype(stored.dtype).name:
        hint = (f" (without jax_enable_x64 xform holds {_dtype_name(stored.dtype)} as "
                f"{_dtype_name(want.dtype)}: enable jax_enable_x64, or restore into a NumPy "
                "array target or with no target, to get the saved data back exactly)")
    raise CheckpointError(f"{file}: the leaf {where} has {_leaf_desc(stored)} in the "
                          f"checkpoint but {_leaf_desc(want)} in the target{hint}")


def _holds_exactly(dt):
    """Whether an xform Array keeps dtype ``dt`` as it is (not float64 etc. without x64,
    not a dtype xform lacks such as float8 or int4)."""
    try:
        return dtypes.canonicalize_dtype(dt) == dt
    except TypeError:
        return False


def _to_array(x, like=None):
    """A leaf from the file as an xform Array, unless the target holds a NumPy array
    there or an Array would change its dtype: then the NumPy array, never narrowed."""
    if isinstance(x, np.ndarray) and not isinstance(like, np.ndarray) \
            and _holds_exactly(x.dtype):
        return jnp.asarray(x)
    return x


def restore(path, target=None):
    """Load the checkpoint at ``path``.

    Args:
        path: a file written by :func:`save`.
        target: optional pytree with the saved structure (e.g. a freshly created
            ``TrainState``, or ``xform.eval_shape`` of one): the result takes its
            structure, static fields and container types, and every leaf must match the
            target's shape and dtype. Without it, containers come back as saved
            (NamedTuples as namedtuples of the same name, other nodes as dicts).

    Returns:
        The restored pytree, every leaf with the dtype it was saved with: arrays are
        ``xform`` Arrays, except NumPy arrays where the target has NumPy arrays and
        where an Array could not hold the saved dtype (float64, int64, uint64 and
        complex128 when ``jax_enable_x64`` is off; float8, int4): those come back as
        NumPy arrays of the saved dtype, never narrowed. Python numbers stay Python
        numbers.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        CheckpointError: the file is truncated, corrupted or not a checkpoint, or it does
            not fit ``target`` (the message names the key path, and for a leaf both
            shapes and dtypes; a float32 target leaf for saved float64 data is such a
            mismatch, not a conversion), or a saved Python number does not fit the
            target's dtype (an int that would wrap, a float that would overflow).

    Example:
        >>> import os, tempfile, xform.numpy as jnp, xform.optim as optax
        >>> from xform import checkpoint
        >>> params = {'w': jnp.ones(3)}
        >>> state = optax.adam(0.1).init(params)
        >>> path = os.path.join(tempfile.mkdtemp(), 'opt.safetensors')
        >>> checkpoint.save(path, state)
        >>> type(checkpoint.restore(path, target=state)[0]).__name__
        'ScaleByAdamState'
    """
    meta, leaves = _read(path)
    file = os.fspath(path)
    if target is None:
        try:
            it = iter(leaves)
            tree = _decode(meta["tree"], it, file)
        except (KeyError, TypeError, StopIteration):
            raise CheckpointError(f"{file} is corrupted: its structure does not match its "
                                  "leaves") from None
        return tu.tree_map(_to_array, tree)
    want_leaves = []
    want = _encode(target, (), want_leaves)
    _match(meta["tree"], want, (), file)
    if len(want_leaves) != len(leaves):
        raise CheckpointError(f"{file} is corrupted: its structure has {len(want_leaves)} "
                              f"leaves but it stores {len(leaves)}")
    fitted = [_to_array(_fit_leaf(s, w, p, file), w) for s, (p, w) in zip(leaves, want_leaves)]
    return tu.tree_unflatten(tu.tree_structure(target), fitted)


class CheckpointManager:
    """Numbered checkpoints in one directory: ``ckpt_<step>.safetensors``.

    Args:
        directory: where the checkpoints live (created if missing).
        max_to_keep: keep only this many most recent checkpoints (None keeps all).
        save_interval_steps: :meth:`save` writes only steps that are multiples of it.
        sharded: each step is a folder ``ckpt_<step>`` of :func:`save_sharded` (every
            process calls ``save``; ``restore`` takes ``shardings=``).

    Example:
        >>> import tempfile, xform.numpy as jnp
        >>> from xform.checkpoint import CheckpointManager
        >>> mgr = CheckpointManager(tempfile.mkdtemp(), max_to_keep=2, save_interval_steps=2)
        >>> [mgr.save(s, {'x': jnp.full(1, s)}) for s in range(1, 7)]
        [False, True, False, True, False, True]
        >>> mgr.all_steps(), mgr.latest_step(), mgr.restore()['x']
        ([4, 6], 6, Array([6], dtype=int32))
    """

    _PATTERN = re.compile(r"^ckpt_(\d+)(\.safetensors)?$")

    def __init__(self, directory, max_to_keep=None, save_interval_steps=1, sharded=False):
        if max_to_keep is not None and (not isinstance(max_to_keep, int) or max_to_keep < 1):
            raise ValueError(f"CheckpointManager: max_to_keep must be a positive int or None, "
                             f"got {max_to_keep!r}")
        if not isinstance(save_interval_steps, int) or save_interval_steps < 1:
            raise ValueError(f"CheckpointManager: save_interval_steps must be a positive int, "
                             f"got {save_interval_steps!r}")
        self.directory = os.fspath(directory)
        if os.path.exists(self.directory) and not os.path.isdir(self.directory):
            raise NotADirectoryError(f"CheckpointManager: {self.directory!r} is not a directory")
        os.makedirs(self.directory, exist_ok=True)
        self.max_to_keep = max_to_keep
        self.save_interval_steps = save_interval_steps
        self.sharded = bool(sharded)

    def _path(self, step):
        return os.path.join(self.directory, f"ckpt_{step}" + (
            "" if self.sharded else ".safetensors"))

    def all_steps(self):
        """The steps that have a checkpoint (sharded: a committed index), ascending."""
        return sorted(int(m.group(1)) for m in map(self._PATTERN.match, os.listdir(
            self.directory)) if m and (m.group(2) is None) == self.sharded and (
            not self.sharded or os.path.exists(os.path.join(self._path(m.group(1)),
                                                            "index.json"))))

    def latest_step(self):
        """The highest saved step, or None."""
        steps = self.all_steps()
        return steps[-1] if steps else None

    def should_save(self, step):
        """Whether :meth:`save` would write ``step``."""
        return step % self.save_interval_steps == 0 and step not in self.all_steps()

    def save(self, step, tree, *, force=False):
        """Save ``tree`` as ``step`` if the interval says so (or ``force``), then drop the
        oldest checkpoints beyond ``max_to_keep``.

        Returns:
            True if a checkpoint was written.
        """
        step = int(step)
        if step < 0:
            raise ValueError(f"CheckpointManager.save: step must be >= 0, got {step}")
        if not force and not self.should_save(step):
            return False
        (save_sharded if self.sharded else save)(self._path(step), tree)
        if self.max_to_keep is not None:
            for old in self.all_steps()[:-self.max_to_keep]:
                (remove_sharded if self.sharded else os.unlink)(self._path(old))
        return True

    def restore(self, step=None, target=None, *, shardings=None):
        """Restore ``step`` (default: the latest) into ``target`` (see :func:`restore`;
        sharded: :func:`restore_sharded`, with its ``shardings``)."""
        if shardings is not None and not self.sharded:
            raise ValueError("CheckpointManager.restore: shardings= needs sharded=True")
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"CheckpointManager: no checkpoint in "
                                        f"{self.directory!r}")
        elif int(step) not in self.all_steps():
            raise FileNotFoundError(f"CheckpointManager: no checkpoint for step {step} in "
                                    f"{self.directory!r} (saved steps: {self.all_steps()})")
        if self.sharded:
            return restore_sharded(self._path(int(step)), target, shardings=shardings)
        return restore(self._path(int(step)), target=target)


# sharded checkpoints (a directory, each process writing its own shards) reuse this
# module's encoding and checks: imported last, once those are defined (a real cycle)
from xform._sharded_checkpoint import (  # noqa: E402
    remove_sharded, restore_sharded, save_sharded)


class _CallableModule(types.ModuleType):
    """This module, callable as ``jax.checkpoint`` (remat)."""

    def __call__(self, *args, **kwargs):
        return _remat(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
