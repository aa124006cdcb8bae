"""Device buffers (jaxlib's single-device arrays): host transfer, copies, deletion,
and jaxlib's C++ flatten over builtin containers."""
import functools

import numpy as np

from jax._src import core as _jcore
from jax._src.sharding_impls import SingleDeviceSharding as _SingleDeviceSharding
from jaxlib import _jax

from ._client import default_device
from ._errors import _xform_errors


@functools.cache
def _sharding(device):
    return _SingleDeviceSharding(device)


@functools.lru_cache(maxsize=4096)
def _jax_aval(shape, dtype):
    return _jcore.ShapedArray(shape, dtype)


@_xform_errors
def device_put(x: np.ndarray, device=None):
    """Copy a host NumPy array (already of a canonical dtype) to ``device``.

    ``enable_x64=True``: xform canonicalizes dtypes itself, so jaxlib must not narrow
    64-bit data according to jax's own x64 flag.
    """
    device = device or default_device()
    return _jax.batched_device_put(_jax_aval(x.shape, x.dtype), _sharding(device),
                                   [x], [device], True, False,
                                   _jax.HostBufferSemantics.ZERO_COPY, True)


@_xform_errors
def to_numpy(buf) -> np.ndarray:
    """Fetch a buffer to the host (blocks until it is ready). Read-only."""
    return np.asarray(buf)


def buffer_device(buf):
    return next(iter(buf.devices()))


@_xform_errors
def copy_to_device(buf, device):
    """Move a buffer to another device (via the host: fine for CPU devices)."""
    if buffer_device(buf) == device:
        return buf
    return device_put(np.asarray(buf), device)


@_xform_errors
def block_until_ready(buf):
    buf.block_until_ready()
    return buf


def dlpack(buf, **kwargs):
    return buf.__dlpack__(**kwargs)


def dlpack_device(buf):
    return buf.__dlpack_device__()


# ``flatten_builtin(tree) -> (leaves, treedef)``: jaxlib's C++ flatten over the builtin
# containers (None, tuple, namedtuple, list, dict) only, for jit's cache-hit path; other
# nodes come back as leaves (jit then uses xform's flatten). The treedef is hashable
# and has ``unflatten(leaves)``. (The bound method itself: no Python frame.)
_builtin_pytrees = _jax.pytree.PyTreeRegistry(enable_none=True, enable_tuple=True,
                                              enable_namedtuple=True, enable_list=True,
                                              enable_dict=True)
flatten_builtin = _builtin_pytrees.flatten


def is_deleted(buf) -> bool:
    """Whether ``buf`` was deleted (e.g. donated to a computation)."""
    return buf.is_deleted()


def delete(buf):
    """Free ``buf``'s device memory now (later use raises)."""
    buf.delete()
