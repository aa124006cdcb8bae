"""``xform.experimental``: the names JAX keeps in ``jax.experimental`` that its tutorials
import: ``io_callback``, the ``enable_x64``/``disable_x64`` context managers, and
``shard_map`` (also as ``xform.experimental.shard_map.shard_map``).
"""
import contextlib

from xform.core.config import config
from xform.experimental import shard_map  # noqa: F401  (the module, as in JAX)
from xform.interpreters.callback import io_callback  # noqa: F401

__all__ = ["disable_x64", "enable_x64", "io_callback", "shard_map"]


@contextlib.contextmanager
def enable_x64(new_val: bool = True):
    """Within the block, ``jax_enable_x64`` is ``new_val`` (restored on exit).

    >>> import xform, xform.numpy as jnp
    >>> with xform.experimental.enable_x64():
    ...   print(jnp.arange(3.0).dtype)
    float64
    """
    old = config.jax_enable_x64
    config.update("jax_enable_x64", new_val)
    try:
        yield
    finally:
        config.update("jax_enable_x64", old)


def disable_x64():
    """Within the block, ``jax_enable_x64`` is False (``enable_x64(False)``)."""
    return enable_x64(False)
