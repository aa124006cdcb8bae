"""Array: an immutable value living in an XLA device buffer.

Arithmetic operators and NumPy-style methods (``sum``, ``reshape``, ``T``, indexing)
are declared on ``ArrayOps``, the base Array shares with Tracer, so the two behave alike.
"""
import math

import numpy as np

from xform import backend
from xform.core import sharding_types
from xform.core.array_ops import ArrayOps
from xform.core.avals import ShapedArray, aval_of_value, canonical_aval
from xform.core.layout import array_format
from xform.core.sharding import MeshLayout, Shard, SingleDeviceSharding


class Array(ArrayOps):
    """An immutable array on a device (``jax.Array``'s counterpart).

    >>> import xform.numpy as jnp
    >>> jnp.array([1.0, 2.0])
    Array([1., 2.], dtype=float32)
    """
    __slots__ = ("_buf", "aval", "_npy", "_committed", "__weakref__")
    __array_priority__ = 100

    def __init__(self, buf, aval: ShapedArray, committed=False):
        self._buf = buf
        self.aval = aval
        self._npy = None
        self._committed = committed  # placed explicitly (see interpreters/placement.py)

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)
    itemsize = property(lambda self: self.aval.dtype.itemsize)
    nbytes = property(lambda self: self.aval.size * self.aval.dtype.itemsize)

    def physical_value(self) -> np.ndarray:
        """The host copy of what XLA holds (for typed keys: their uint32 data)."""
        return backend.to_numpy(self._buf)

    def _value(self) -> np.ndarray:
        """The host copy (fetched once, read-only)."""
        if self._npy is None:
            if not isinstance(self.aval.dtype, np.dtype):
                _no_numpy_value(self.aval.dtype)
            self._npy = backend.to_numpy(self._buf)
        return self._npy

    def __array__(self, dtype=None, copy=None):
        v = self._value()
        if copy:
            return np.array(v, dtype=dtype, copy=True)
        return v if dtype is None else v.astype(dtype, copy=False)

    def __dlpack__(self, **kwargs):  # (the buffer's: jaxlib's, or a lazy value's)
        return self._buf.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._buf.__dlpack_device__()

    def item(self, *args):
        return self._value().item(*args)

    def tolist(self):
        return self._value().tolist()

    def tobytes(self, order="C"):
        return self._value().tobytes(order)

    def block_until_ready(self):
        self._buf.block_until_ready()  # (backend's Buffer method, called directly: hot)
        return self

    def is_deleted(self):
        """Whether the buffer was deleted (e.g. donated to a jitted computation)."""
        return backend.is_deleted(self._buf)

    def delete(self):
        """Free the device buffer now (as JAX's ``Array.delete``); later use raises."""
        backend.delete(self._buf)

    def devices(self):
        return {backend.buffer_device(self._buf)}

    def unsafe_buffer_pointer(self):
        """The device address of the array's buffer (an int; for interop, e.g. dlpack)."""
        return self._buf.unsafe_buffer_pointer()

    @property
    def committed(self):
        """Whether the array was placed explicitly (``device_put`` to a device or
        sharding, or computed from such arrays): ops then run where it is, and two
        committed to different devices raise. Uncommitted ones follow committed ones,
        else the default device."""
        return bool(self._committed)   # (it holds the device where not the default one)

    @property
    def sharding(self):
        """Where the array lives: a ``SingleDeviceSharding`` for an ordinary Array (with
        its buffer's memory kind)."""
        return SingleDeviceSharding(self.device,
                                    memory_kind=backend.buffer_memory_kind(self._buf))

    @property
    def format(self):
        """The array's :class:`~xform.experimental.layout.Format`: its buffer's layout
        (as the runtime reports it) and its sharding."""
        return array_format(self)

    @property
    def addressable_shards(self):
        """One :class:`xform.sharding.Shard` per device holding (part of) the array."""
        return [Shard(self.device, tuple(slice(None) for _ in self.shape), self, 0)]

    global_shards = addressable_shards
    is_fully_addressable = property(lambda self: True)
    is_fully_replicated = property(lambda self: True)

    def on_device_size_in_bytes(self):
        """The bytes its buffer takes on the device."""
        return self.nbytes

    def addressable_data(self, index):
        """Shard ``index``'s data: the array itself (it has one shard)."""
        if index != 0:
            raise IndexError(f"this Array has one shard; got index {index}")
        return self

    @property
    def device(self):
        return backend.buffer_device(self._buf)

    def copy_to_host_async(self):
        pass

    def __bool__(self):
        return bool(self._value())

    # (NumPy refuses what JAX refuses: on its TypeError, JAX's message)
    def __int__(self):
        try:
            return int(self._value())
        except TypeError:
            _check_scalar(self)
            raise

    def __float__(self):
        try:
            return float(self._value())
        except TypeError:
            _check_scalar(self)
            raise

    def __complex__(self):
        try:
            return complex(self._value())
        except TypeError:
            _check_scalar(self)
            raise

    def __index__(self):
        try:
            return self._value().__index__()
        except TypeError:
            raise TypeError("Only integer scalar arrays can be converted to a scalar "
                            "index.") from None

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of unsized object")
        return self.aval.shape[0]

    def __iter__(self):
        # Unstack through the host: one transfer per row instead of compiling a slice
        # program per index.
        if not self.aval.shape:
            raise TypeError("iteration over a 0-d array")
        if not isinstance(self.aval.dtype, np.dtype):
            return (self[i] for i in range(self.aval.shape[0]))
        weak, value = self.aval.weak_type, self._value()
        # (rows of a committed array stay there, as JAX's)
        device = self.device if type(self) is Array and self._committed else None
        return (_from_host(row, weak, device) for row in value)

    def __hash__(self):
        raise TypeError("unhashable type: 'Array'")

    def __format__(self, spec):
        # As jax.Array: NumPy's formatting of the value (a 0-d array as its NumPy scalar,
        # so f"{x:.3f}" works and f"{x}" prints float32 digits); typed keys as str().
        if not isinstance(self.aval.dtype, np.dtype):
            return object.__format__(self, spec)
        v = self._value()
        return format(v if v.ndim else v[()], spec)

    def __str__(self):
        if not isinstance(self.aval.dtype, np.dtype):
            return repr(self)
        return str(self._value())

    def __repr__(self):
        if not isinstance(self.aval.dtype, np.dtype):  # typed keys, as JAX prints them
            if not self.aval.dtype.itemsize:  # a token (core/tokens.py): no data to show
                return f"Array({self.aval.shape}, dtype={self.aval.dtype})"
            return (f"Array({self.aval.shape}, dtype={self.aval.dtype}) overlaying:\n"
                    f"{self.physical_value()}")
        v = self._value()
        prefix = "Array("
        if v.size == 0:
            body = f"[], shape={v.shape}"
        else:
            body = np.array2string(v, separator=", ", prefix=prefix)
        weak = ", weak_type=True" if self.aval.weak_type else ""
        return f"{prefix}{body}, dtype={self.aval.dtype.name}{weak})"

    def __reduce__(self):
        return (_reconstruct, (np.array(self._value()), self.aval.weak_type))

    def __copy__(self):   # (a new buffer, as JAX's: see ``lax._array_copy``)
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()


def _check_scalar(x):
    if x.ndim:
        raise TypeError(f"Only scalar arrays can be converted to Python scalars; got "
                        f"arr.ndim={x.ndim}") from None


def _no_numpy_value(dtype):
    raise TypeError(f"JAX array with {dtype} dtype cannot be converted to a NumPy array. "
                    "Use jax.random.key_data(arr) if you wish to extract the underlying "
                    "integer array.")


def _from_host(value, weak_type, device=None):
    """A one-device Array of a host NumPy value of a canonical dtype, committed to
    ``device`` if given (``core.transfer`` has the general conversion; this is what
    Array's own methods need)."""
    value = np.asarray(value)
    aval = canonical_aval(aval_of_value(value).update(weak_type=weak_type))
    return Array(backend.device_put(value, device), aval, device is not None)


_reconstruct = _from_host  # (the name pickles refer to)


class ShardedArray(Array):
    """An Array held as one buffer per device (device_put to a NamedSharding, jit over
    a mesh, pmap and shard_map return these).

    ``layout`` (``core.sharding``) says how the buffers, in ``layout.devices`` order,
    tile the array: a ``TiledLayout`` (a NamedSharding's blocks) or pmap's
    ``MeshLayout``. Compiled programs take the buffers as they are; eager ops run as
    SPMD programs over the mesh (``interpreters.spmd``); ``_buf``, one assembled
    single-device copy, is made only where a one-device program needs it.
    """
    __slots__ = ("_shards", "layout", "_one")

    def __init__(self, shards, aval, layout):
        self._shards = list(shards)
        named = getattr(layout, "named", None)
        # explicit sharding mode: a layout over Explicit axes is part of the type
        self.aval = aval if named is None or aval._sharding is not None else \
            sharding_types.typed(aval, named)
        self.layout = layout
        self._npy = None
        self._one = None
        self._committed = True

    def __getattr__(self, name):
        # pmap's arrays: one-device ops see the assembled array. A NamedSharding's have
        # no ``_buf``: eager ops then take dispatch's slow path, which runs them SPMD.
        if name == "_buf" and type(self.layout) is MeshLayout:
            buf = self._buf = self.one_buffer()
            return buf
        raise AttributeError(name)

    def one_buffer(self):
        """The whole array in one buffer on the first device (made once, on demand: for
        one-device programs, e.g. a jit whose other arguments live on one device)."""
        if self._one is None:
            self._one = backend.device_put(self.physical_value(), self.layout.devices[0])
        return self._one

    def physical_value(self):
        """The assembled host array of what XLA holds (key data for typed keys); across
        processes only when this process's shards cover it (e.g. replicated), as JAX."""
        if self._npy is None:
            local = self.layout.local()
            if len(local) == len(self.layout.devices):
                self._npy = self.layout.assemble([backend.to_numpy(b) for b in self._shards])
            else:
                self._npy = _assemble_local(self.layout, local, self._shards, self.aval)
        return self._npy

    def _value(self):
        if not isinstance(self.aval.dtype, np.dtype):
            _no_numpy_value(self.aval.dtype)
        return self.physical_value()

    def __iter__(self):
        if not (self.aval.shape and isinstance(self.aval.dtype, np.dtype) and
                len(self._shards) > 1 and self.is_fully_replicated):
            return super().__iter__()
        return (self._replicated(row) for row in self._value())  # (as JAX: rows stay so)

    def _replicated(self, value):
        """``value`` (host) laid out as this replicated array is."""
        aval = canonical_aval(aval_of_value(value).update(weak_type=self.aval.weak_type))
        devices = [self.layout.devices[k] for k in self.layout.local()]
        out = ShardedArray([backend.device_put(value, d) for d in devices], aval, self.layout)
        if type(self.layout) is MeshLayout:
            out._buf = out._shards[0]
        return out

    def block_until_ready(self):
        for b in self._shards:
            backend.block_until_ready(b)
        return self

    def devices(self):
        return set(self.layout.devices)

    @property
    def device(self):
        raise ValueError(f"This Array lives on {len(self.layout.devices)} devices "
                         "(it has no single .device); see .devices() or .sharding")

    @property
    def sharding(self):
        """The layout's sharding, in the memory its buffers are in (XLA's choice for a
        program's results, as JAX reports it)."""
        s = self.layout.sharding()
        kind = backend.buffer_memory_kind(self._shards[0]) if self._shards else None
        if kind is None or getattr(s, "memory_kind", kind) in (kind, None):
            return s
        return s.with_memory_kind(kind)

    @property
    def addressable_shards(self):
        return [self._shard(k, buf)
                for k, buf in zip(self.layout.local(), self._shards, strict=True)]

    @property
    def global_shards(self):
        """A Shard per device of the layout (data None on other processes' devices)."""
        local = dict(zip(self.layout.local(), self._shards))
        return [self._shard(k, local.get(k)) for k in range(len(self.layout.devices))]

    def _shard(self, k, buf):
        dev = self.layout.devices[k]
        index, replica = self.layout.shard_index(k, self.aval.shape)
        c = True if dev is backend.default_device() else dev  # (transfer.committed_to)
        data = None if buf is None else \
            Array(buf, self.aval.update(shape=self.layout.shard_shape(self.aval.shape)), c)
        if any(type(i) is int for i in index):  # pmap's squeezed blocks: JAX 0.10.2's pmap
            # is a shard_map, its shards keep the mapped dims (size 1; on the device)
            shape = tuple(1 if type(i) is int else n for i, n in zip(index, self.aval.shape))
            data = None if data is None else data.reshape(shape)
            index = tuple(slice(i, i + 1) if type(i) is int else i for i in index)
        return Shard(dev, index, data, replica)

    def __repr__(self):
        if self.is_fully_addressable or self.is_fully_replicated:
            return super().__repr__()
        weak = ", weak_type=True" if self.aval.weak_type else ""  # (no value here, as JAX)
        return f"Array(shape={self.aval.shape}, dtype={self.aval.dtype.name}{weak})"

    def __reduce__(self):
        return (_reconstruct, (np.array(self._value()), self.aval.weak_type))

    def addressable_data(self, index):
        """Shard ``index``'s data (a single-device Array)."""
        return self._shard(self.layout.local()[index], self._shards[index]).data

    def on_device_size_in_bytes(self):
        """The bytes all its shards take on their devices."""
        return len(self._shards) * math.prod(self.layout.shard_shape(self.aval.shape)) * \
            self.aval.dtype.itemsize

    @property
    def is_fully_replicated(self):
        return self.sharding.is_fully_replicated

    @property
    def is_fully_addressable(self):
        return len(self.layout.local()) == len(self.layout.devices)

    def is_deleted(self):
        return any(backend.is_deleted(b) for b in self._shards)

    def unsafe_buffer_pointer(self):
        if len(self._shards) != 1:
            raise ValueError("unsafe_buffer_pointer() is supported only for unsharded "
                             "arrays.")
        return self._shards[0].unsafe_buffer_pointer()

    def delete(self):
        for b in self._shards:
            backend.delete(b)


def _assemble_local(layout, local, bufs, aval):
    """The host array from this process's shards of an array spanning processes;
    JAX's error unless they cover every element (a replicated value does)."""
    out = np.empty(aval.shape, backend.to_numpy(bufs[0]).dtype)
    seen = np.zeros(aval.shape, bool)
    for k, b in zip(local, bufs):
        index, _ = layout.shard_index(k, aval.shape)
        out[index], seen[index] = backend.to_numpy(b), True
    if not seen.all():
        raise RuntimeError(
            "Fetching value for `jax.Array` that spans non-addressable (non process local) "
            "devices is not possible. You can use `jax.experimental.multihost_utils."
            "process_allgather` to print the global array or use `.addressable_shards` "
            "method of jax.Array to inspect the addressable (process local) shards.")
    return out
