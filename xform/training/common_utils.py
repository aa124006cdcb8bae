"""Helpers for pmap data-parallel loops (``flax.training.common_utils``): shard a batch
or a key over the local devices, stack per-step metrics, one-hot labels."""
import numpy as np

import xform.numpy as jnp
from xform import lax, random
from xform.core.tree_util import tree_map
from xform.transforms.pmap import local_device_count

__all__ = ["get_metrics", "onehot", "shard", "shard_prng_key", "stack_forest"]


def shard(xs):
    """Reshapes every leaf's leading axis to ``(local_device_count, -1, ...)`` for pmap.

    >>> import xform
    >>> shard({'x': xform.numpy.ones((16, 3))})['x'].shape[0] == xform.local_device_count()
    True
    """
    n = local_device_count()
    return tree_map(lambda x: x.reshape((n, -1) + x.shape[1:]), xs)


def shard_prng_key(prng_key):
    """``prng_key`` split into one key per local device.

    >>> import xform
    >>> shard_prng_key(xform.random.PRNGKey(0)).shape[0] == xform.local_device_count()
    True
    """
    return random.split(prng_key, num=local_device_count())


def stack_forest(forest):
    """Stacks the leaves of a sequence of same-structure pytrees.

    >>> stack_forest([{'a': 1.}, {'a': 2.}])
    {'a': Array([1., 2.], dtype=float32, weak_type=True)}
    """
    return tree_map(lambda *args: jnp.stack(args), *forest)


def get_metrics(device_metrics):
    """Device 0's copy of pmap-replicated metrics, on the host, stacked over steps.

    Args:
        device_metrics: a sequence (one per step) of pytrees of replicated arrays.

    Returns:
        One pytree whose leaves are the per-step values stacked.
    """
    # NB: reshape, not Flax's squeeze(0): xform's pmap shards hold no size-1 mapped axis
    first = tree_map(lambda x: x.addressable_shards[0].data.reshape(x.shape[1:]),
                     device_metrics)
    return stack_forest(tree_map(np.asarray, first))


def onehot(labels, num_classes, on_value=1.0, off_value=0.0):
    """A float32 one-hot encoding of integer ``labels`` along a new last axis.

    >>> onehot(jnp.array([0, 2]), 3)
    Array([[1., 0., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    x = labels[..., None] == jnp.arange(num_classes).reshape((1,) * labels.ndim + (-1,))
    x = lax.select(x, jnp.full(x.shape, on_value), jnp.full(x.shape, off_value))
    return x.astype(jnp.float32)
