"""Sharded checkpoints: a directory where each process writes only the shards it holds
(``replica_id == 0`` of its addressable shards; nothing is gathered to one host) and a
small ``index.json`` ties them together. Restoring onto any sharding (the saved one, or
another mesh and spec) makes each device's piece from just the saved shards that overlap
it, so a process reads only what its devices hold.

Layout of ``directory``::

    index.json                              the tree, leaf dtypes/shapes, where each
                                            shard lives (written last: the commit)
    g<gen>-p<proc>-of-<n>.safetensors       one file per process per save

Atomicity: every file is written to a temporary name, fsynced and renamed; a save gets
the next generation number and only once every process has written its file (a barrier
across processes) does process 0 replace ``index.json``, then delete the files of other
generations. A crash mid-save leaves the previous index (and its files) in force. Every
process must see the same directory (a shared filesystem when there are several hosts).
Each shard carries its SHA-256, checked when it is read.
"""
import hashlib
import itertools
import json
import math
import os
import re
import shutil

import numpy as np

from xform import backend
from xform.core import tree_util as tu
from xform.checkpoint import (  # (xform.checkpoint imports this module last: a cycle)
    _META_KEY, CheckpointError, _child_key, _decode, _dtype_name, _encode, _fit_leaf,
    _fsync_dir, _holds_exactly, _leaf_record, _match, _np_dtype, _wrap_extended,
    _write_atomic)
from xform.core.sharding import Sharding, SingleDeviceSharding
from xform.core.transfer import device_put_value
from xform.transforms.devices import device_put, make_array_from_single_device_arrays

__all__ = ["save_sharded", "restore_sharded", "remove_sharded"]

_FORMAT = "xform.checkpoint.sharded"
_VERSION = 1
_INDEX = "index.json"
_FILE = re.compile(r"^g(\d+)-p(\d+)-of-(\d+)\.safetensors$")
_calls = itertools.count()   # save_sharded calls: the same count on every process (SPMD)


def _process():
    state = backend.distributed_state()
    return state.process_id, state.num_processes


def _barrier(name):
    backend.distributed_barrier(name, timeout_s=300)


def _norm_index(index, shape):
    """A shard's index (slices, or ints for pmap-style squeezed dims) as [lo, hi] pairs."""
    out = []
    for ix, n in zip(tuple(index) + (slice(None),) * (len(shape) - len(index)), shape):
        if isinstance(ix, slice):
            lo, hi, step = ix.indices(n)
            assert step == 1, index
            out.append([lo, hi])
        else:
            out.append([int(ix), int(ix) + 1])
    return out


def _local_shards(x):
    """``(index, host data, written_here)`` per addressable shard of leaf ``x``: a
    process writes the shards with ``replica_id`` 0, of an array spanning processes;
    process 0 writes those of an array each process holds whole."""
    shape = tuple(np.shape(x))
    shards = getattr(x, "addressable_shards", None)
    if shards is None:   # NumPy arrays and scalars: all on the host
        return [(_norm_index((), shape), x, _process()[0] == 0)]
    everyone = not x.is_fully_addressable   # (its addressable_shards: this process's)
    out = []
    for s in shards:
        index = _norm_index(s.index, shape)
        data = s.data if len(shards) == 1 else np.reshape(np.asarray(s.data),
                                                          [h - lo for lo, h in index])
        out.append((index, data, s.replica_id == 0 and (everyone or _process()[0] == 0)))
    return out


def _is_py(x):
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def _paths(sk, path=()):
    """The key path of every leaf of a saved tree skeleton, in order."""
    if sk["t"] == "leaf":
        return [path]
    return [p for i, c in enumerate(sk.get("c", ()))
            for p in _paths(c, path + (_child_key(sk, i),))]


def _read_index(directory):
    path = os.path.join(directory, _INDEX)
    try:
        with open(path, "rb") as f:
            index = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"sharded checkpoint {directory!r} has no {_INDEX} (not a "
                                "sharded checkpoint, or its first save never finished)"
                                ) from None
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{path} is corrupted: not valid JSON") from None
    if not isinstance(index, dict) or index.get("format") != _FORMAT:
        raise CheckpointError(f"{path} is not the index of an xform sharded checkpoint")
    if index.get("version") != _VERSION:
        raise CheckpointError(f"{path}: sharded checkpoint version "
                                 f"{index.get('version')!r} is not supported (this xform "
                                 f"reads version {_VERSION})")
    return index


def save_sharded(directory, tree, *, overwrite=True):
    """Save ``tree`` to ``directory``, each process writing only its own shards.

    Call it on every process with the same tree (the global arrays). Replicated data is
    written once (by the device with ``replica_id`` 0); arrays each process holds whole
    (``is_fully_addressable``) are written by process 0.

    Args:
        directory: the checkpoint's folder (created if missing).
        tree: as for :func:`xform.checkpoint.save`; its arrays may span devices.
        overwrite: replace a sharded checkpoint already in ``directory``.

    Raises:
        TypeError: a leaf is not an array or a number (the message names its key path).
        FileExistsError: ``directory`` holds a checkpoint and ``overwrite`` is False, or
            it holds other files and no checkpoint.

    Example:
        >>> import tempfile, xform.numpy as jnp
        >>> from xform import checkpoint
        >>> d = tempfile.mkdtemp()
        >>> checkpoint.save_sharded(d, {'w': jnp.arange(4.), 'step': 2})
        >>> checkpoint.restore_sharded(d)
        {'step': 2, 'w': Array([0., 1., 2., 3.], dtype=float32)}
    """
    from safetensors import TensorSpec, serialize
    directory = os.fspath(directory)
    proc, nproc = _process()
    leaves = []
    skeleton = _encode(tree, (), leaves)
    records, specs, shard_meta, keep = [], {}, [], []
    for i, (path, x) in enumerate(leaves):
        if _is_py(x):
            records.append(_leaf_record(path, x)[0])
            continue
        rec = None
        shards = _local_shards(x)
        for k, (index, data, mine) in enumerate(shards):
            if rec is not None and not mine:
                continue
            srec, arr = _leaf_record(path, data)
            if rec is None:
                rec = {key: srec[key] for key in ("kind", "dtype", "extended") if key in srec}
                rec["shape"] = list(np.shape(x))
            if "extended" in srec:   # typed keys: their key data, saved whole
                if len(shards) > 1:
                    raise TypeError(f"save_sharded: the leaf {tu.keystr(path)} holds typed "
                                    "PRNG keys spread over devices; save "
                                    "xform.random.key_data of them instead")
                rec["key_shape"], rec["shape"] = rec["shape"], srec["shape"]
                index = [[0, n] for n in srec["shape"]]
            if mine:
                name = f"{i}.{k}"
                keep.append(arr)
                specs[name] = TensorSpec(dtype=arr.dtype.name, shape=arr.shape,
                                         data_ptr=arr.ctypes.data, data_len=arr.nbytes)
                shard_meta.append({"leaf": i, "tensor": name, "index": index,
                                   "sha256": srec["sha256"], "shape": srec["shape"]})
        records.append(rec or {"kind": "array", "dtype": _dtype_name(x.dtype),
                               "shape": list(np.shape(x))})   # (none on this process)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise FileExistsError(f"checkpoint.save_sharded: {directory!r} exists and is not "
                              "a directory")
    os.makedirs(directory, exist_ok=True)
    index_path = os.path.join(directory, _INDEX)
    if os.path.exists(index_path):
        if not overwrite:
            raise FileExistsError(f"checkpoint.save_sharded: {directory!r} holds a "
                                  "checkpoint (pass overwrite=True to replace it)")
        gen = int(_read_index(directory).get("generation", 0)) + 1
    elif any(not (n.startswith(".tmp-") or _FILE.match(n)) for n in os.listdir(directory)):
        raise FileExistsError(f"checkpoint.save_sharded: {directory!r} holds other files "
                              "and no checkpoint; refusing to write into it")
    else:
        gen = 1
    fname = f"g{gen}-p{proc}-of-{nproc}.safetensors"
    meta = {"format": _FORMAT + ".shards", "generation": gen, "process": proc,
            "shards": shard_meta}
    data = bytes(serialize(specs, metadata={_META_KEY: json.dumps(meta)}))
    del keep
    _write_atomic(os.path.join(directory, fname), data)
    call = next(_calls)
    tag = hashlib.sha256(os.path.abspath(directory).encode()).hexdigest()[:16]
    _barrier(f"xform-ckpt-{tag}-{call}-written")
    if proc == 0:
        files = [f"g{gen}-p{p}-of-{nproc}.safetensors" for p in range(nproc)]
        for f in files:
            header, fmeta, _ = _read_shard_header(os.path.join(directory, f))
            for s in fmeta["shards"]:
                records[s["leaf"]].setdefault("shards", []).append(
                    {"file": f, **{k: s[k] for k in ("tensor", "index", "sha256", "shape")}})
        index = {"format": _FORMAT, "version": _VERSION, "generation": gen,
                 "tree": skeleton, "leaves": records, "files": files}
        _write_atomic(index_path, json.dumps(index).encode("utf-8"))
        _fsync_dir(directory)
        for n in os.listdir(directory):
            m = _FILE.match(n)
            if m and int(m.group(1)) != gen:
                os.unlink(os.path.join(directory, n))
    _barrier(f"xform-ckpt-{tag}-{call}-committed")


def remove_sharded(directory):
    """Delete a sharded checkpoint (process 0 does it; the folder is shared)."""
    if _process()[0] == 0:
        shutil.rmtree(directory)


def _read_shard_header(path):
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else 0
        data = head + f.read(min(n, 100_000_000))
    header, meta, start = _checked_header(data, path)
    return header, meta, start


def _checked_header(data, path):
    if len(data) < 8:
        raise CheckpointError(f"{path} is truncated or empty")
    (n,) = np.frombuffer(data[:8], "<u8")
    try:
        header = json.loads(data[8:8 + int(n)].decode("utf-8"))
        meta = json.loads(header["__metadata__"][_META_KEY])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise CheckpointError(f"{path} is not a shard file of an xform sharded "
                                 "checkpoint (bad or truncated header)") from None
    if meta.get("format") != _FORMAT + ".shards":
        raise CheckpointError(f"{path} is not a shard file of an xform sharded checkpoint")
    return header, meta, 8 + int(n)


class _Reader:
    """Reads saved shards on demand (each at most once), checking size and SHA-256."""

    def __init__(self, directory):
        self.directory, self.headers, self.cache = directory, {}, {}

    def shard(self, rec, srec):
        key = (srec["file"], srec["tensor"])
        if key in self.cache:
            return self.cache[key]
        path = os.path.join(self.directory, srec["file"])
        if srec["file"] not in self.headers:
            if not os.path.exists(path):
                raise CheckpointError(f"{self.directory}: the shard file {srec['file']} "
                                         "named in the index is missing")
            self.headers[srec["file"]] = _read_shard_header(path)
        header, _, start = self.headers[srec["file"]]
        dtype = _np_dtype(rec["dtype"])
        shape = tuple(srec["shape"])
        try:
            lo, hi = (int(o) for o in header[srec["tensor"]]["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path} is corrupted: it lacks tensor "
                                     f"{srec['tensor']}") from None
        with open(path, "rb") as f:
            f.seek(start + lo)
            raw = f.read(hi - lo)
        if len(raw) != hi - lo or len(raw) != math.prod(shape) * dtype.itemsize:
            raise CheckpointError(f"{path} is truncated or corrupted: tensor "
                                     f"{srec['tensor']} has {len(raw)} bytes for shape "
                                     f"{shape} dtype {dtype.name}")
        if hashlib.sha256(raw).hexdigest() != srec["sha256"]:
            raise CheckpointError(f"{path} is corrupted: the bytes of tensor "
                                     f"{srec['tensor']} do not match their SHA-256 checksum")
        out = self.cache[key] = np.frombuffer(raw, dtype).reshape(shape)
        return out


def _check_cover(rec, where, directory):
    """The saved shards of a leaf tile its whole shape exactly once."""
    shape = tuple(rec["shape"])
    total = 0
    for s in rec.get("shards", ()):
        if len(s["index"]) != len(shape) or any(
                not 0 <= lo <= hi <= n for (lo, hi), n in zip(s["index"], shape)):
            raise CheckpointError(f"{directory} is corrupted: a shard of {where} lies "
                                     f"outside its shape {shape}")
        total += math.prod(hi - lo for lo, hi in s["index"])
    if total != math.prod(shape):
        raise CheckpointError(f"{directory} is incomplete: the saved shards of {where} "
                                 f"hold {total} of its {math.prod(shape)} elements (did "
                                 "every process call save_sharded?)")


def _piece(rec, reader, want):
    """The block ``want`` ([lo, hi] per dim) of a leaf, from the saved shards overlapping
    it."""
    dtype = _np_dtype(rec["dtype"])
    out = np.empty([hi - lo for lo, hi in want], dtype)
    for s in rec["shards"]:
        cut = [(max(a, c), min(b, d)) for (a, b), (c, d) in zip(want, s["index"])]
        if any(lo >= hi for lo, hi in cut) and math.prod(hi - lo for lo, hi in want):
            continue
        data = reader.shard(rec, s)
        dst = tuple(slice(lo - w, hi - w) for (lo, hi), (w, _) in zip(cut, want))
        src = tuple(slice(lo - o, hi - o) for (lo, hi), (o, _) in zip(cut, s["index"]))
        out[dst] = data[src]
    return out


def _place(rec, reader, sharding, where):
    """The leaf as an Array with ``sharding`` (None: the default device), each device's
    piece read on its own."""
    shape = tuple(rec["shape"])
    full = [[0, n] for n in shape]
    if sharding is None or isinstance(sharding, SingleDeviceSharding):
        value = _piece(rec, reader, full)
        if "extended" in rec:
            return _wrap_extended(rec["extended"], value)
        if not _holds_exactly(value.dtype):
            return value
        device = None if sharding is None else next(iter(sharding.device_set))
        return device_put_value(value, device)
    if "extended" in rec:
        raise CheckpointError(f"restore_sharded: {where} holds typed PRNG keys, which "
                                 "restore onto one device only (pass no sharding for it)")
    pieces, arrays = {}, []
    try:
        indices = sharding.addressable_devices_indices_map(shape)
    except ValueError as e:
        raise CheckpointError(f"restore_sharded: the leaf {where} (shape {shape}) cannot "
                              f"be placed with {sharding}: {e}") from None
    for device, index in indices.items():
        want = _norm_index(index, shape)
        key = tuple(map(tuple, want))
        if key not in pieces:
            pieces[key] = _piece(rec, reader, want)
        arrays.append(device_put(pieces[key], device))
    return make_array_from_single_device_arrays(shape, sharding, arrays)


def _is_sharding(s):
    return s is None or isinstance(s, Sharding)


def restore_sharded(directory, target=None, *, shardings=None):
    """Load a checkpoint written by :func:`save_sharded`, onto any sharding.

    Args:
        directory: the checkpoint's folder.
        target: optional pytree with the saved structure (live arrays, or
            ``ShapeDtypeStruct`` s); its leaves' ``.sharding`` place the restored arrays
            unless ``shardings`` says otherwise, and their shapes and dtypes must match.
        shardings: a ``Sharding`` for every array, or a pytree of them (None leaves: the
            default device) with the saved structure: where each array goes. It may be
            another mesh or spec than the arrays were saved with (resharding on load);
            each device's piece is made from only the saved shards that overlap it.

    Returns:
        The restored pytree (as :func:`xform.checkpoint.restore` returns it).

    Raises:
        FileNotFoundError: ``directory`` holds no sharded checkpoint.
        CheckpointError: the index or a shard file is corrupted, truncated or missing,
            the saved shards do not cover an array, or the checkpoint does not fit
            ``target``/``shardings`` (the message names the key path and both shapes).
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"sharded checkpoint {directory!r} does not exist")
    index = _read_index(directory)
    try:
        records, skeleton = list(index["leaves"]), index["tree"]
        paths = _paths(skeleton)
    except (KeyError, TypeError, IndexError):
        raise CheckpointError(f"{directory}: its index is corrupted") from None
    if len(paths) != len(records):
        raise CheckpointError(f"{directory}: its index is corrupted (a tree of "
                                 f"{len(paths)} leaves with {len(records)} records)")
    want = []
    if target is not None:
        _match(skeleton, _encode(target, (), want), (), directory)
    if _is_sharding(shardings):
        placed = [shardings] * len(records)
        if shardings is None and target is not None:
            placed = [getattr(w, "sharding", None) for _, w in want]
    else:
        placed = tu.tree_leaves(shardings, is_leaf=_is_sharding)
        if len(placed) != len(records):
            raise CheckpointError(f"restore_sharded: shardings has {len(placed)} leaves "
                                     f"but the checkpoint in {directory} has "
                                     f"{len(records)}; pass one Sharding (or None) per leaf")
    reader, out = _Reader(directory), []
    for i, (rec, path) in enumerate(zip(records, paths)):
        where = tu.keystr(path) or "the root"
        if rec.get("kind") == "py":
            v = rec["value"]
            v = complex(*v) if rec["type"] == "complex" else {
                "bool": bool, "int": int, "float": float}[rec["type"]](v)
            out.append(v if target is None else _fit_leaf(v, want[i][1], path, directory))
            continue
        if target is not None:
            w = want[i][1]
            saved = (tuple(rec.get("key_shape", rec["shape"])),
                     rec.get("extended", rec["dtype"]))
            if saved != (tuple(np.shape(w)), _dtype_name(w.dtype)):
                raise CheckpointError(
                    f"{directory}: the leaf {where} has shape {saved[0]} dtype {saved[1]} "
                    f"in the checkpoint but shape {tuple(np.shape(w))} dtype "
                    f"{_dtype_name(w.dtype)} in the target")
        _check_cover(rec, where, directory)
        if target is not None and isinstance(want[i][1], np.ndarray):   # (as restore)
            out.append(_piece(rec, reader, [[0, n] for n in rec["shape"]]))
        else:
            out.append(_place(rec, reader, placed[i], where))
    if target is not None:
        return tu.tree_unflatten(tu.tree_structure(target), out)
    return _decode(skeleton, iter(out), directory)
