"""``nn.batch_apply``: Flax's ``BatchApply``, which runs a function on inputs whose
leading ``num_dims`` axes are merged into one, then splits them again."""
import numpy as np

import xform.numpy as jnp
from xform.core.tree_util import tree_leaves, tree_map

__all__ = ["BatchApply"]


def _mergeable(x, num_dims):
    return jnp.ndim(x) >= num_dims


class BatchApply:
    """Wraps ``f`` so it sees inputs with their leading ``num_dims`` axes merged (leaves
    with fewer axes pass unchanged); outputs get those axes back.

    Raises:
      ValueError: when no input has at least ``num_dims`` axes.

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> nn.BatchApply(lambda x: x.sum(-1, keepdims=True))(jnp.ones((2, 3, 4))).shape
    (2, 3, 1)
    """

    def __init__(self, f, num_dims=2):
        self._f = f
        self.num_dims = num_dims

    def __call__(self, *args, **kwargs):
        example = next((x for x in tree_leaves((args, kwargs))
                        if _mergeable(x, self.num_dims)), None)
        if example is None:
            raise ValueError(f"BatchApply requires at least one input with ndim >= "
                             f"{self.num_dims}.")
        lead = tuple(jnp.shape(example)[:self.num_dims])

        def merge(x):
            if not _mergeable(x, self.num_dims):
                return x
            shape = jnp.shape(x)
            return jnp.reshape(x, (int(np.prod(shape[:self.num_dims])),)
                               + tuple(shape[self.num_dims:]))
        args, kwargs = tree_map(merge, (args, kwargs))
        return tree_map(lambda y: jnp.reshape(y, lead + tuple(jnp.shape(y)[1:])),
                        self._f(*args, **kwargs))
