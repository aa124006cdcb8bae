"""Device placement and synchronization: ``device_put``, ``device_get``, ``devices``,
``block_until_ready``, and the ``disable_jit`` context manager."""
import contextlib

from xform import backend
from xform.core import dtypes, tree_util
from xform.core.trace import Tracer
from xform.core.config import config
from xform.core.transfer import device_put_value


def devices(backend_name=None):
    """The devices of the platform xform runs on (see ``jax_platforms``)."""
    return backend.devices()


def local_devices(process_index=None, backend_name=None):
    """The devices of this process (all of them unless running distributed)."""
    return backend.local_devices()


def device_count(backend_name=None):
    return backend.device_count()


def default_backend():
    """The default platform's name, as JAX's: ``"cpu"``, ``"gpu"`` or ``"tpu"``."""
    return backend.client().platform


def device_put(x, device=None):
    """Put every leaf of pytree ``x`` on ``device`` (default: the first device) as an Array.

    >>> import numpy as np, xform
    >>> xform.device_put(np.ones(2, np.float32))
    Array([1., 1.], dtype=float32)
    """
    from xform import sharding as _sharding
    if isinstance(device, _sharding.SingleDeviceSharding):
        device = next(iter(device.device_set))
    elif isinstance(device, _sharding.Sharding):
        # NB: a NamedSharding places the whole array on one device (values are the same;
        # pmap/shard_map split their inputs themselves).
        device = None
    return tree_util.tree_map(lambda v: device_put_value(v, device), x)


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


@contextlib.contextmanager
def disable_jit(disable=True):
    """Run jitted functions op by op inside this block (for debugging with print)."""
    prev = config.jax_disable_jit
    config.update("jax_disable_jit", disable)
    try:
        yield
    finally:
        config.update("jax_disable_jit", prev)
