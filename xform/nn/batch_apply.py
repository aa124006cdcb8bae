"""``nn.batch_apply``: Flax's ``BatchApply``, which runs a function on inputs whose
leading ``num_dims`` axes are merged into one, then splits them again."""
import numpy as np

import xform.numpy as jnp
from xform.core.tree_util import tree_leaves, tree_map

__all__ = ["BatchApply", "arbitrary_mergeable_leaf", "merge_leading_dims",
           "ndim_at_least", "split_leading_dim"]


def ndim_at_least(x, num_dims):
    return jnp.ndim(x) >= num_dims


def arbitrary_mergeable_leaf(min_num_dims, args, kwargs):
    """The first leaf of ``args`` then ``kwargs`` with ``min_num_dims`` axes, or None."""
    return next((x for x in tree_leaves((args, kwargs))
                 if ndim_at_least(x, min_num_dims)), None)


def merge_leading_dims(x, num_dims):
    """``x`` with its leading ``num_dims`` axes merged into one (unchanged when it has
    fewer axes)."""
    if not ndim_at_least(x, num_dims):
        return x
    shape = jnp.shape(x)
    return jnp.reshape(x, (int(np.prod(shape[:num_dims])),) + tuple(shape[num_dims:]))


def split_leading_dim(x, to_dim):
    """``x`` with its leading axis split back into the axes ``to_dim``."""
    return jnp.reshape(x, tuple(to_dim) + tuple(jnp.shape(x)[1:]))


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
        example = arbitrary_mergeable_leaf(self.num_dims, args, kwargs)
        if example is None:
            raise ValueError(f"BatchApply requires at least one input with ndim >= "
                             f"{self.num_dims}.")
        lead = tuple(jnp.shape(example)[:self.num_dims])
        args, kwargs = tree_map(lambda x: merge_leading_dims(x, self.num_dims),
                                (args, kwargs))
        return tree_map(lambda y: split_leading_dim(y, lead), self._f(*args, **kwargs))
