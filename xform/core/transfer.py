"""Host -> device transfer: NumPy values and Python scalars become Arrays / buffers.

Core, not interpreters: Array's own methods (iteration, unpickling) and every layer
above move host data to devices through here.
"""
import math

import numpy as np

from xform import backend
from xform.core import dtypes
from xform.core.array import Array, ShardedArray
from xform.core.avals import ShapedArray, aval_of_value, canonical_aval, memory_space_of
from xform.core.config import config
from xform.core.sharding import SingleDeviceSharding
from xform.core.trace import Tracer, check_not_tracer


def canonical_numpy(x, dtype=None):
    """``x`` as a NumPy array of a canonical dtype (float0 as bool: its i1 in a program)."""
    x = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    if x.dtype == dtypes.float0:  # float0 is i1 in a program (see mlir.dtype_to_ir_type)
        return np.zeros(x.shape, np.bool_)
    dt = dtypes.canonicalize_dtype(x.dtype)
    return x if dt == x.dtype else x.astype(dt)


def committed_to(device):
    """``Array._committed`` of a value committed to ``device``: the device itself where it
    is not the default device (hot paths run such values there directly, see
    ``placement.run_there``), else True. Both are truthy; False is uncommitted."""
    return True if device is None or device is backend.default_device() else device


def committed_device(x):
    """The device of ``x`` if it is a one-device Array committed to it, else None."""
    return backend.buffer_device(x._buf) if type(x) is Array and x._committed else None


def device_put_value(x, device=None, weak_type=None, memory_kind=None) -> Array:
    """An Array holding ``x`` (NumPy array/scalar, Python scalar or Array) on ``device``,
    committed to it (JAX's rule); with no ``device``, host values go to the default
    device uncommitted and an Array stays as it is. A float0 array stays on the host,
    as in JAX: it is all zeros by definition. ``memory_kind``: which of the device's
    memories (None: any, an Array keeps its own; else a buffer elsewhere is copied)."""
    if memory_kind is not None and not isinstance(x, Tracer) and (
            memory_kind != "device" or type(x) is Array and device is not None and
            backend.buffer_memory_kind(x._buf) != "device"):  # (to or from another memory)
        if isinstance(x, Array) and x._committed and x.sharding == \
                SingleDeviceSharding(device, memory_kind=memory_kind):
            return x
        value = x.physical_value() if isinstance(x, Array) else canonical_numpy(x)
        aval = x.aval if isinstance(x, Array) else canonical_aval(aval_of_value(x))
        aval = aval.update(weak_type=weak_type, memory_space=memory_space_of(memory_kind))
        return Array(backend.device_put(value, device, memory_kind), canonical_aval(aval),
                     committed_to(device))
    if isinstance(x, Array):
        if device is None or (x._committed and x.devices() == {device}):
            return x
        if type(x) is Array and type(x._buf) is backend.Buffer and \
                backend.buffer_device(x._buf) == device:  # (not a lazy value's stand-in)
            return Array(x._buf, x.aval, committed_to(device))  # (same buffer, committed)
        buf = x._buf if type(x) is Array else x.one_buffer()  # (gathers a sharded one)
        return Array(backend.copy_to_device(buf, device), x.aval, committed_to(device))
    if isinstance(x, Tracer):  # under a transformation placement is the compiler's job
        return x
    aval = aval_of_value(x)
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    if weak_type is not None:
        aval = aval.update(weak_type=weak_type)
    value = canonical_numpy(x, aval.dtype)
    return Array(backend.device_put(value, device), canonical_aval(aval),
                 device is not None and committed_to(device))


def on_default_device(x):
    """Uncommitted Array ``x`` where an op on it runs, the default device (as a copy of
    it would be: ``jnp.array(x)``, ``x.copy()``); other values as they are."""
    if type(x) is not Array or x._committed or type(x._buf) is not backend.Buffer:
        return x  # (the last: a lazy value's stand-in, computed there; not ``.real``,
        # which a jaxlib buffer answers by computing its real part)
    default = backend.default_device()
    if backend.buffer_device(x._buf) == default:
        return x
    return Array(backend.copy_to_device(x._buf, default), x.aval)


_scalar_cache = {}


def scalar_array(value, dtype, weak_type) -> Array:
    """A cached rank-0 Array: Python scalars in eager ops reuse one device buffer."""
    key = (type(value), value, dtype, weak_type)
    if isinstance(value, float) and (value == 0.0 or value != value):
        # -0.0 == 0.0: zeros are keyed by their sign too; nan != nan: never cached
        key = None if value != value else key + (math.copysign(1.0, value),)
    arr = _scalar_cache.get(key) if key is not None else None
    # (a cached Array can reach the user, e.g. ``jnp.zeros(())``, and be donated: then
    # it is made anew, else every later use of that scalar would fail)
    if arr is None or arr._buf.is_deleted():
        arr = Array(backend.device_put(np.asarray(value, dtype)),
                    canonical_aval(ShapedArray((), dtype, weak_type)))
        if key is not None and len(_scalar_cache) < 4096:
            _scalar_cache[key] = arr
    return arr


HOST_TYPES = frozenset((float, int, bool, np.ndarray))  # what host_leaf may take
_host_leaves = {}  # (type, value) -> (buffer, canonical aval) of a Python scalar argument
_host_avals = {}   # (shape, dtype) -> canonical aval of a NumPy argument


def host_leaf(x):
    """``(buffer, canonical aval)`` of a Python scalar or NumPy array argument, as a
    one-device compiled call takes it (jit's fast path), or None: another type, or a
    value the slow path must report (an int out of range, a non-numeric dtype). Python
    scalars are cached per value (not 0, whose -0.0 would share the entry, nor nan)."""
    t = type(x)
    if t is float or t is int or t is bool:
        hit = _host_leaves.get((t, x))
        if hit is None or hit[0].is_deleted():   # (deleted: as in scalar_array)
            try:
                aval = canonical_aval(aval_of_value(x))
            except OverflowError:
                return None
            hit = (scalar_array(x, aval.dtype, aval.weak_type)._buf, aval)
            if x == x and x != 0 and len(_host_leaves) < 4096:
                _host_leaves[(t, x)] = hit
        return hit
    if t is np.ndarray and x.dtype.kind in "biufc":
        aval = _host_avals.get((x.shape, x.dtype))
        if aval is None:
            aval = _host_avals[(x.shape, x.dtype)] = canonical_aval(aval_of_value(x))
            if len(_host_avals) > 4096:
                _host_avals.clear()
        return backend.device_put(x if x.dtype == aval.dtype else x.astype(aval.dtype)), aval
    return None


def _forget_host(name, value):  # (x64 changes the avals)
    _host_leaves.clear()
    _host_avals.clear()


config._add_listener(_forget_host)


def private_buffer(x):
    """A device buffer of host value ``x`` that nothing else holds, for a donated
    argument: a Python scalar's buffer is cached and shared, a NumPy array's may alias
    the array's memory (a zero-copy transfer)."""
    return backend.device_put(np.array(canonical_numpy(x), copy=True))


def to_buffer(x):
    """The device buffer of an argument to a one-device compiled program."""
    if type(x) is Array:
        return x._buf
    check_not_tracer(x, " (it reached a compiled computation outside any transformation)")
    if isinstance(x, Array):  # an Array over several devices: its one-device copy
        return x.one_buffer()
    if isinstance(x, (bool, int, float, complex)):
        aval = aval_of_value(x)
        return scalar_array(x, aval.dtype, aval.weak_type)._buf
    x = np.asarray(x) if isinstance(x, np.generic) else x
    if isinstance(x, np.ndarray) and x.dtype == dtypes.float0:
        return backend.device_put(canonical_numpy(x))
    return device_put_value(x)._buf


def shard_buffers(x, layout, memory_kind=None):
    """One buffer per device of ``layout`` (in its device order) holding that device's
    block of ``x`` (in its memory of ``memory_kind``): an array already laid out so
    gives its buffers (no transfer); anything else goes through the host, each device
    getting only its block."""
    kind = None if memory_kind == "device" else memory_kind
    if type(x) is ShardedArray and x.layout == layout and \
            getattr(x.layout.named, "memory_kind", "device") == (memory_kind or "device"):
        return x._shards
    # (a mesh spanning processes: this process's devices only)
    devices = [layout.devices[k] for k in layout.local()]
    if type(x) is Array and not any(layout.spec) and kind is None:  # (replicated)
        return [backend.copy_to_device(x._buf, d) for d in devices]
    host = x.physical_value() if isinstance(x, Array) else canonical_numpy(x)
    return [backend.device_put(np.ascontiguousarray(block), d, kind)
            for block, d in zip(layout.split(host), devices, strict=True)]


def put_sharded(x, sharding, what="One of device_put args"):
    """``x`` (Array, NumPy value or scalar) as an Array laid out as ``sharding`` (a
    NamedSharding): each device receives its block, never the whole array."""
    aval = x.aval if isinstance(x, Array) else canonical_aval(aval_of_value(x))
    sharding.check_shape(aval.shape, what)
    layout = sharding.layout()
    if aval._sharding is not None:  # (retyped by the new layout)
        aval = aval.update(sharding=None)
    aval = aval.update(memory_space=memory_space_of(sharding.memory_kind))
    return ShardedArray(shard_buffers(x, layout, sharding.memory_kind), aval, layout)


def results(bufs, avals):
    """A compiled program's outputs as values: Arrays, except float0 outputs, which are
    host zeros (as JAX's; their i1 buffers are dropped)."""
    return [np.zeros(a.shape, dtypes.float0) if a.dtype == dtypes.float0 else Array(b, a)
            for b, a in zip(bufs, avals, strict=True)]


def has_float0(avals):
    """Whether some of ``avals`` is float0: such programs stay off the fast paths, which
    wrap every output buffer as an Array."""
    return any(a.dtype == dtypes.float0 for a in avals)


def clear_scalar_cache():
    _scalar_cache.clear()
