"""``serialize(compiled)`` / ``deserialize_and_load(...)``: a compiled program as bytes
and back, in this process or another (``jax.experimental.serialize_executable``).

The payload is PJRT's serialized executable (jaxlib's, through ``xform.backend``)
plus a JSON header with the argument and result avals and the program's hoisted
constants: no pickle, so loading runs no Python code from the bytes. As in JAX, the
bytes are for the same jaxlib, platform and devices; loading anything else fails in
PJRT.
"""
import json
import struct
import types

import numpy as np

from xform import backend as _backend
from xform.core import dtypes, transfer, tree_util
from xform.core.array import Array
from xform.core.avals import MemorySpace, ShapedArray
from xform.transforms.stages import Compiled

_MAGIC = b"XFORMEXE1"


def _aval_json(a):
    return [list(a.shape), np.dtype(a.dtype).name, bool(a.weak_type), a.memory_space.value]


def _aval(j):
    return ShapedArray(tuple(j[0]), dtypes.canonicalize_dtype(np.dtype(j[1])), weak_type=j[2],
                       memory_space=MemorySpace(j[3]))


def serialize(compiled):
    """``(payload, in_tree, out_tree)`` of a ``jit(f).lower(...).compile()`` result.

    ``in_tree`` is the structure of the flat arguments (xform's Compiled flattens a
    call's arguments itself)."""
    if not isinstance(compiled, Compiled):
        raise TypeError(f"serialize expects a Compiled (jit(f).lower(...).compile()), "
                        f"got {type(compiled).__name__}")
    cj = compiled._compiled
    if cj.executable.host_callbacks:
        raise ValueError("A program with host callbacks cannot be serialized")
    consts = [_backend.to_numpy(b) for b in cj.const_bufs]
    header = json.dumps({
        "name": cj.name, "in_avals": [_aval_json(a) for a in compiled._in_avals],
        "out_avals": [_aval_json(a) for a in cj.out_avals],
        "consts": [[list(c.shape), c.dtype.name] for c in consts]}).encode()
    exe = _backend.serialize_executable(cj.executable)
    parts = [header, exe] + [np.ascontiguousarray(c).tobytes() for c in consts]
    payload = _MAGIC + struct.pack("<I", len(parts)) + b"".join(
        struct.pack("<Q", len(p)) + p for p in parts)
    in_tree = tree_util.tree_structure((tuple(compiled._in_avals), {}))
    return payload, in_tree, compiled._out_tree


class _Loaded:
    """A deserialized executable called as ``dispatch.CompiledJaxpr`` is by Compiled."""

    def __init__(self, executable, out_avals, const_bufs, name):
        self.executable = executable
        self.execute = executable.make_execute(out_avals)
        self.out_avals, self.const_bufs, self.name = out_avals, const_bufs, name

    def __call__(self, args):
        bufs = self.const_bufs + [transfer.to_buffer(x) for x in args]
        return [Array(b, a) for b, a in zip(self.execute(bufs), self.out_avals)]


def _split(payload):
    if not isinstance(payload, (bytes, bytearray)) or not payload.startswith(_MAGIC):
        raise ValueError("not a payload of xform.experimental.serialize_executable."
                         "serialize")
    pos = len(_MAGIC)
    (n,), pos = struct.unpack_from("<I", payload, pos), pos + 4
    parts = []
    for _ in range(n):
        (size,) = struct.unpack_from("<Q", payload, pos)
        pos += 8
        if pos + size > len(payload):
            raise ValueError("truncated serialized executable")
        parts.append(bytes(payload[pos:pos + size]))
        pos += size
    return parts


def deserialize_and_load(serialized, in_tree, out_tree, backend=None,
                         execution_devices=None):
    """A ``Compiled`` from ``serialize``'s payload (``in_tree`` is not needed by
    xform; ``out_tree`` rebuilds the results)."""
    header, exe, *const_data = _split(serialized)
    info = json.loads(header)
    consts = [_backend.device_put(np.frombuffer(d, np.dtype(dt)).reshape(shape))
              for d, (shape, dt) in zip(const_data, info["consts"])]
    out_avals = [_aval(j) for j in info["out_avals"]]
    executable = _backend.deserialize_executable(exe, None, execution_devices)
    loaded = _Loaded(executable, out_avals, consts, info["name"])
    closed = types.SimpleNamespace(in_avals=[_aval(j) for j in info["in_avals"]])
    return Compiled(loaded, closed, out_tree)
