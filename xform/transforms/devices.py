"""Device placement and synchronization: ``device_put``, ``device_get``, ``devices``,
``block_until_ready``, and the ``disable_jit`` context manager."""
import contextlib
import math

import numpy as np

from xform import backend
from xform.core import dtypes, transfer, tree_util
from xform.core.array import Array, ShardedArray
from xform.core.avals import MemorySpace
from xform.core.trace import Tracer, get_aval
from xform.core.config import config
from xform.core.mesh import current_mesh
from xform.core.layout import Format, Layout, laid_out
from xform.core.sharding import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding
from xform.interpreters import layouts
from xform.lax import barriers as lax_copy, sharding_constraint as lax_sharding


def _check_backend(name):
    """JAX's RuntimeError for a platform not running: xform runs on one (``"cpu"`` on an
    accelerator run still names its devices, as before)."""
    if name is None or not isinstance(name, str):
        return
    plat = backend.client().platform
    if name in (plat, backend.platform(), "cpu"):
        return
    if name not in ("gpu", "tpu"):
        raise RuntimeError(f"Unknown backend {name}. Available backends are [{plat!r}]")
    raise RuntimeError(f"Unknown backend: '{name}' requested, but no platforms that are "
                       f"instances of {name} are present. Platforms present are: {plat}")


def devices(backend=None):
    """The devices of the platform xform runs on (see ``jax_platforms``)."""
    _check_backend(backend)
    return _xb.devices()


def local_devices(process_index=None, backend=None, host_id=None):
    """The devices of this process (all of them unless running distributed)."""
    _check_backend(backend)
    return _xb.local_devices()


def device_count(backend=None):
    _check_backend(backend)
    return _xb.device_count()


_xb = backend   # (the module, where a parameter is named ``backend`` as in JAX)


def default_backend():
    """The default platform's name, as JAX's: ``"cpu"``, ``"gpu"`` or ``"tpu"``."""
    return backend.client().platform


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """Put every leaf of pytree ``x`` on ``device`` as an Array.

    ``device`` is a Device, a Sharding (a ``NamedSharding`` puts on each device only
    its block; its ``memory_kind`` picks the memory), a ``PartitionSpec`` under a mesh
    context, a ``jax.memory.Space`` (that memory where the value is), or a pytree
    prefix of ``x`` of those; default: the first device.

    Raises:
      ValueError: if a sharding does not fit a leaf (rank, divisibility), or a bare
        PartitionSpec is given with no mesh in context.

    >>> import numpy as np, xform
    >>> xform.device_put(np.ones(2, np.float32))
    Array([1., 1.], dtype=float32)
    """
    del src
    if donate and may_alias:
        raise ValueError("may_alias and donate cannot be True at the same time.")
    leaves, tree = tree_util.tree_flatten(x)
    if device is None or isinstance(device, (backend.Device, Sharding, PartitionSpec,
                                             MemorySpace, Format)):
        targets = [device] * len(leaves)
    else:
        targets = tree_util.broadcast_prefix(
            device, x, is_leaf=lambda d: isinstance(d, (Sharding, PartitionSpec, Format)))
    outs = [_put(v, d) for v, d in zip(leaves, targets)]
    if may_alias is False:  # (a new buffer even where the value is already there)
        outs = [lax_copy._array_copy(o) if type(o) is Array and type(v) is Array and
                o._buf is v._buf else o for o, v in zip(outs, leaves)]
    return tree_util.tree_unflatten(tree, outs)


def _put(v, device):
    if isinstance(device, Format):   # (a layout too: relaid by a program, as JAX's)
        if device.layout is None or isinstance(v, Tracer):
            return _put(v, device.sharding)
        if not isinstance(device.sharding, Sharding) or not isinstance(device.layout, Layout):
            raise ValueError(
                "sharding and layout in `Layout` instance should be concrete. Got layout: "
                f"{device} for input {get_aval(v).str_short(short_dtypes=False)}")
        v = _put(v, device.sharding)
        if device.layout == Layout(tuple(range(v.ndim))):   # the default layout
            return v if laid_out(v) is None else Array(v._buf, v.aval, v._committed)
        if isinstance(device.sharding, NamedSharding):
            raise NotImplementedError("device_put to a Format with a non-default layout: "
                                      "one-device shardings only (xform lays out no "
                                      "sharded arrays)")
        return layouts.put(v, device.layout, device.sharding)
    if isinstance(device, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise ValueError("Please set a mesh via `jax.set_mesh` if a PartitionSpec is "
                             "passed to device_put")
        device = NamedSharding(mesh, device)
    if isinstance(v, Tracer) and isinstance(device, (Sharding, MemorySpace)):
        return lax_sharding.traced_put(v, device)
    if isinstance(device, MemorySpace):  # (jax.memory.Space: that memory, where v is)
        s = v.sharding if isinstance(v, Array) else SingleDeviceSharding(backend.default_device())
        device = s.with_memory_kind(device.value)
    if isinstance(device, NamedSharding):
        return transfer.put_sharded(v, device)
    if isinstance(device, Sharding):
        return transfer.device_put_value(v, device._device_assignment[0],
                                         memory_kind=device.memory_kind)
    if device is not None and not isinstance(device, backend.Device):
        raise ValueError(
            "`jax.device_put` only accepts `None`, `jax.sharding.Sharding`, `jax.Device`, "
            "`Format`, `jax.memory.Space` or a pytree of these values. Received invalid "
            f"value: {device}")
    return transfer.device_put_value(v, device)


def device_get(x):
    """Copy every array leaf of pytree ``x`` to the host as a NumPy array (as JAX's):
    typed-key arrays and tracers stay as they are, other leaves pass through.

    >>> import xform, xform.numpy as jnp
    >>> xform.device_get({"a": jnp.ones(2), "n": 3})
    {'a': array([1., 1.], dtype=float32), 'n': 3}
    """
    def get(v):
        if isinstance(v, Tracer) or dtypes.is_extended(getattr(v, "dtype", None)):
            return v
        to_numpy = getattr(v, "__array__", None)
        return v if to_numpy is None else to_numpy()
    return tree_util.tree_map(get, x)


def block_until_ready(x):
    """Wait until every array in pytree ``x`` is computed; returns ``x``."""
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


def copy_to_host_async(x):
    """Start copying every array leaf of pytree ``x`` to the host; returns ``x``.

    NB: xform's arrays are fetched on first use (``np.asarray``), so this only calls each
    leaf's ``copy_to_host_async`` (a no-op), as JAX calls it where it exists."""
    for leaf in tree_util.tree_leaves(x):
        copy = getattr(leaf, "copy_to_host_async", None)
        if copy is not None:
            copy()
    return x


@contextlib.contextmanager
def disable_jit(disable=True):
    """Run jitted functions op by op inside this block (for debugging with print)."""
    prev = config.jax_disable_jit
    config.update("jax_disable_jit", disable)
    try:
        yield
    finally:
        config.update("jax_disable_jit", prev)


def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """An Array of ``shape`` laid out as ``sharding`` whose device ``d`` holds
    ``data_callback(index)`` for its index (a tuple of slices) into the whole array.

    Raises:
      ValueError: if a block has the wrong shape, or the sharding does not fit.

    >>> import numpy as np, xform
    >>> from xform.sharding import NamedSharding, PartitionSpec as P
    >>> s = NamedSharding(xform.make_mesh((2,), ('x',)), P('x'))
    >>> x = xform.make_array_from_callback((4,), s, lambda i: np.arange(4.0)[i])
    >>> [sh.data.shape for sh in x.addressable_shards]
    [(2,), (2,)]
    """
    shape = tuple(shape)
    if not isinstance(sharding, NamedSharding):
        index = tuple(slice(None) for _ in shape)
        dev = sharding._device_assignment[0]
        return transfer.device_put_value(_block(data_callback(index), shape, dtype), dev)
    sharding.check_shape(shape, "make_array_from_callback's sharding")
    layout = sharding.layout()
    want = layout.shard_shape(shape)
    blocks = []
    for k in layout.local():  # (across processes: this process's devices only)
        block = _block(data_callback(layout.shard_index(k, shape)[0]), want, dtype)
        blocks.append(transfer.device_put_value(block, layout.devices[k]))
    return make_array_from_single_device_arrays(shape, sharding, blocks)


def _block(value, shape, dtype):
    value = transfer.canonical_numpy(value if dtype is None else np.asarray(value, dtype))
    if value.shape != tuple(shape):
        raise ValueError(f"make_array_from_callback: the callback returned a block of shape "
                         f"{value.shape}; the sharding's blocks have shape {tuple(shape)}")
    return value


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
    """An Array of ``shape`` laid out as ``sharding`` from one single-device Array per
    device of this process (each that device's block; matched to devices by where
    they live). Across processes the result is a global array holding only these.

    Raises:
      ValueError: if a device's block is missing or has the wrong shape.
    """
    shape = tuple(shape)
    if not isinstance(sharding, NamedSharding):
        (a,) = arrays
        return a
    sharding.check_shape(shape, "make_array_from_single_device_arrays's sharding")
    layout = sharding.layout()
    want = layout.shard_shape(shape)
    by_device = {next(iter(a.devices())): a for a in arrays}
    bufs, aval = [], None
    for dev in (layout.devices[k] for k in layout.local()):
        a = by_device.get(dev)
        if a is None:
            raise ValueError(f"make_array_from_single_device_arrays: no array on {dev}, "
                             f"which the sharding {sharding} places a block on")
        if tuple(a.shape) != want:
            raise ValueError(f"make_array_from_single_device_arrays: the array on {dev} has "
                             f"shape {tuple(a.shape)}; expected the block shape {want} of "
                             f"global shape {shape} under {sharding}")
        bufs.append(a._buf)
        aval = a.aval
    return ShardedArray(bufs, aval.update(shape=shape, weak_type=False), layout)


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """An Array laid out as ``sharding`` from this process's part of the data (in
    one process: all of it). Across processes ``local_data`` is the block of the global
    array that this process's devices cover (contiguous along each dimension, as in
    JAX); ``global_shape`` defaults to scaling each dimension by how many such blocks
    the sharding has along it."""
    local_shape = np.shape(local_data)
    if backend.process_count() == 1 or not isinstance(sharding, NamedSharding) \
            or sharding.is_fully_addressable:
        if global_shape is not None and tuple(global_shape) != local_shape:
            raise ValueError(f"make_array_from_process_local_data: global_shape "
                             f"{tuple(global_shape)} differs from the local data's shape "
                             f"{local_shape} when one process holds the whole array")
        if isinstance(sharding, NamedSharding):
            return transfer.put_sharded(local_data, sharding)
        return device_put(local_data, sharding)
    layout, local_data = sharding.layout(), np.asarray(local_data)
    if global_shape is None:  # per dim: local size x (all blocks / this process's)
        probe = tuple(math.prod(layout.sizes) for _ in local_shape)  # (divisible by all)
        def blocks(ks, i):
            return len({layout.shard_index(k, probe)[0][i].start for k in ks})
        global_shape = tuple(n * blocks(range(len(layout.devices)), i)
                             // blocks(layout.local(), i) for i, n in enumerate(local_shape))
    global_shape = tuple(global_shape)
    sharding.check_shape(global_shape, "make_array_from_process_local_data's sharding")
    mine = [layout.shard_index(k, global_shape)[0] for k in layout.local()]
    starts = [min(ix[i].start or 0 for ix in mine) for i in range(len(global_shape))]
    want = tuple(max(ix[i].stop or n for ix in mine) - o
                 for i, (o, n) in enumerate(zip(starts, global_shape)))
    if local_shape != want:
        raise ValueError(f"make_array_from_process_local_data: local_data has shape "
                         f"{local_shape}; this process's devices hold the block of shape "
                         f"{want} of global_shape {global_shape} under {sharding}")

    def local_block(index):
        return local_data[tuple(slice((s.start or 0) - o, (s.stop or n) - o)
                                for s, o, n in zip(index, starts, global_shape))]
    return make_array_from_callback(global_shape, sharding, local_block)
