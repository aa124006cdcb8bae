"""Array: an immutable value living in an XLA device buffer.

Arithmetic operators and NumPy-style methods (``sum``, ``reshape``, ``T``, indexing)
are declared on ``ArrayOps``, the base Array shares with Tracer, so the two behave alike.
"""
import numpy as np

from xform import backend
from xform.core.array_ops import ArrayOps
from xform.core.avals import ShapedArray


class Array(ArrayOps):
    """An immutable array on a device (``jax.Array``'s counterpart).

    >>> import xform.numpy as jnp
    >>> jnp.array([1.0, 2.0])
    Array([1., 2.], dtype=float32)
    """
    __slots__ = ("_buf", "aval", "_npy", "__weakref__")
    __array_priority__ = 100

    def __init__(self, buf, aval: ShapedArray):
        self._buf = buf
        self.aval = aval
        self._npy = None

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

    def __dlpack__(self, **kwargs):
        return backend.dlpack(self._buf, **kwargs)

    def __dlpack_device__(self):
        return backend.dlpack_device(self._buf)

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

    @property
    def sharding(self):
        """Where the array lives: a ``SingleDeviceSharding`` for an ordinary Array."""
        from xform.sharding import SingleDeviceSharding
        return SingleDeviceSharding(self.device)

    @property
    def addressable_shards(self):
        """One :class:`xform.sharding.Shard` per device holding (part of) the array."""
        from xform.sharding import Shard
        return [Shard(self.device, tuple(slice(None) for _ in self.shape), self, 0)]

    is_fully_addressable = property(lambda self: True)

    @property
    def device(self):
        return backend.buffer_device(self._buf)

    def copy_to_host_async(self):
        pass

    def __bool__(self):
        return bool(self._value())

    def __int__(self):
        return int(self._value())

    def __float__(self):
        return float(self._value())

    def __complex__(self):
        return complex(self._value())

    def __index__(self):
        return self._value().__index__()

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
        from xform.interpreters.dispatch import device_put_value
        weak = self.aval.weak_type
        return (device_put_value(row, weak_type=weak) for row in self._value())

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
            return (f"Array({self.aval.shape}, dtype={self.aval.dtype}) overlaying:\n"
                    f"{self.physical_value()}")
        v = self._value()
        prefix = "Array("
        if v.size == 0 and v.shape != (0,):
            body = f"[], shape={v.shape}"
        else:
            body = np.array2string(v, separator=", ", prefix=prefix)
        weak = ", weak_type=True" if self.aval.weak_type else ""
        return f"{prefix}{body}, dtype={self.aval.dtype.name}{weak})"

    def __reduce__(self):
        return (_reconstruct, (np.array(self._value()), self.aval.weak_type))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _no_numpy_value(dtype):
    raise TypeError(f"JAX array with {dtype} dtype cannot be converted to a NumPy array. "
                    "Use jax.random.key_data(arr) if you wish to extract the underlying "
                    "integer array.")


def _reconstruct(value, weak_type):
    from xform.interpreters.dispatch import device_put_value
    return device_put_value(value, weak_type=weak_type)


class ShardedArray(Array):
    """An Array held as one buffer per device (what pmap and shard_map return).

    ``layout`` says how the buffers tile the array: a mesh of devices (``devices`` in
    row-major order over ``sizes``) and, per mesh axis, the array dimension it indexes
    (``dims``; pmap-style: that dimension has the mesh axis's size and each device holds
    one index of it, squeezed) or None (replicated along that mesh axis). Fed back into
    a pmap with the same layout the buffers are used as they are (no host round trip);
    eager ops on it see one assembled single-device buffer (made on first use).
    """
    __slots__ = ("_shards", "layout")

    def __init__(self, shards, aval, layout):
        self._shards = list(shards)
        self.aval = aval
        self.layout = layout
        self._npy = None

    def __getattr__(self, name):
        if name == "_buf":  # assembled on first use by an ordinary (one-device) op
            buf = backend.device_put(self.physical_value())
            self._buf = buf
            return buf
        raise AttributeError(name)

    def physical_value(self):
        """The assembled host array of what XLA holds (key data for typed keys)."""
        if self._npy is None:
            self._npy = self.layout.assemble([backend.to_numpy(b) for b in self._shards])
        return self._npy

    def _value(self):
        if not isinstance(self.aval.dtype, np.dtype):
            _no_numpy_value(self.aval.dtype)
        return self.physical_value()

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
        return self.layout.sharding()

    @property
    def addressable_shards(self):
        from xform.sharding import Shard
        aval = self.aval.update(shape=self.layout.shard_shape(self.aval.shape))
        out = []
        for k, (dev, buf) in enumerate(zip(self.layout.devices, self._shards)):
            index, replica = self.layout.shard_index(k, self.aval.shape)
            out.append(Shard(dev, index, Array(buf, aval), replica))
        return out

    def __reduce__(self):
        return (_reconstruct, (np.array(self._value()), self.aval.weak_type))


class GridLayout:
    """Base of the layouts of per-device buffers over a mesh whose devices are numbered
    row-major (``sizes`` per mesh axis); subclasses set ``_key``, which they compare by."""
    __slots__ = ()

    def __eq__(self, other):
        return type(other) is type(self) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def coords(self, k):
        """Device ``k``'s coordinates on the mesh (major axis first)."""
        out = []
        for size in reversed(self.sizes):
            out.append(k % size)
            k //= size
        return tuple(reversed(out))


class MeshLayout(GridLayout):
    """How per-device buffers tile an array (see :class:`ShardedArray`)."""
    __slots__ = ("devices", "sizes", "dims", "names", "_key")

    def __init__(self, devices, sizes, dims, names):
        self.devices, self.sizes = tuple(devices), tuple(sizes)
        self.dims, self.names = tuple(dims), tuple(names)
        self._key = (self.devices, self.sizes, self.dims)

    def shard_shape(self, shape):
        mapped = {d for d in self.dims if d is not None}
        return tuple(s for i, s in enumerate(shape) if i not in mapped)

    def shard_index(self, k, shape):
        c = self.coords(k)
        index = [slice(None)] * len(shape)
        replica = 0
        for ci, d, size in zip(c, self.dims, self.sizes):
            if d is None:
                replica = replica * size + ci
            else:
                index[d] = ci
        return tuple(index), replica

    def assemble(self, parts):
        """The full host array from the per-device host arrays."""
        stacked = np.stack(parts).reshape(self.sizes + parts[0].shape)
        # drop replicated mesh axes (take index 0), then put mapped ones at their dims
        index = tuple(0 if d is None else slice(None) for d in self.dims)
        stacked = stacked[index]
        mapped = [d for d in self.dims if d is not None]
        n_mapped, body_rank = len(mapped), stacked.ndim - len(mapped)
        full_rank = n_mapped + body_rank
        perm = [None] * full_rank
        for i, d in enumerate(mapped):
            perm[d] = i
        body = iter(range(n_mapped, full_rank))
        perm = [p if p is not None else next(body) for p in perm]
        return np.ascontiguousarray(np.transpose(stacked, perm))

    def sharding(self):
        from xform.sharding import Mesh, NamedSharding, PartitionSpec
        rank = max([d + 1 for d in self.dims if d is not None], default=0)
        spec = [None] * rank
        names = [n if isinstance(n, str) else f"_axis{i}" for i, n in enumerate(self.names)]
        mesh = Mesh(np.array(self.devices, dtype=object).reshape(self.sizes), names)
        for name, d in zip(names, self.dims):
            if d is not None:
                spec[d] = name if spec[d] is None else (
                    (spec[d] if isinstance(spec[d], tuple) else (spec[d],)) + (name,))
        return NamedSharding(mesh, PartitionSpec(*spec))
