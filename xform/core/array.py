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
    __slots__ = ("_buf", "aval", "_npy")
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

    def _value(self) -> np.ndarray:
        """The host copy (fetched once, read-only)."""
        if self._npy is None:
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

    def block_until_ready(self):
        backend.block_until_ready(self._buf)
        return self

    def is_deleted(self):
        """Whether the buffer was deleted (e.g. donated to a jitted computation)."""
        return backend.is_deleted(self._buf)

    def devices(self):
        return {backend.buffer_device(self._buf)}

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
        from xform.interpreters.dispatch import device_put_value
        weak = self.aval.weak_type
        return (device_put_value(row, weak_type=weak) for row in self._value())

    def __hash__(self):
        raise TypeError("unhashable type: 'Array'")

    def __format__(self, spec):
        if not self.aval.shape:
            return format(self._value().item(), spec)
        return format(str(self), spec)

    def __str__(self):
        return str(self._value())

    def __repr__(self):
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


def _reconstruct(value, weak_type):
    from xform.interpreters.dispatch import device_put_value
    return device_put_value(value, weak_type=weak_type)
