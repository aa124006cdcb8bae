"""Pytree arithmetic used by optimizers (``optax.tree_utils``; also ``optax.tree`` with
the ``tree_`` prefix dropped)."""
import operator

import xform.numpy as jnp
from xform import tree_util as tu
from xform.optim._base import (bias_correction as tree_bias_correction, tree_cast,
                               tree_cast_like, tree_full_like, tree_norm, tree_sum,
                               tree_zeros_like,
                               update_infinity_moment as tree_update_infinity_moment,
                               update_moment as tree_update_moment,
                               update_moment_per_elem_norm as tree_update_moment_per_elem_norm)

__all__ = ["tree_add", "tree_sub", "tree_mul", "tree_div", "tree_scale", "tree_add_scale",
           "tree_vdot", "tree_sum", "tree_norm", "tree_zeros_like", "tree_ones_like",
           "tree_full_like", "tree_where", "tree_cast", "tree_cast_like", "tree_bias_correction",
           "tree_update_moment", "tree_update_moment_per_elem_norm",
           "tree_update_infinity_moment", "tree_l2_norm"]


def tree_add(tree_x, tree_y, *others):
    """Leafwise sum of two or more pytrees.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.tree_utils.tree_add({'a': jnp.ones(1)}, {'a': jnp.ones(1)})
        {'a': Array([2.], dtype=float32)}
    """
    return tu.tree_map(lambda *xs: sum(xs[1:], xs[0]), tree_x, tree_y, *others)


def tree_sub(tree_x, tree_y):
    """Leafwise difference."""
    return tu.tree_map(operator.sub, tree_x, tree_y)


def tree_mul(tree_x, tree_y):
    """Leafwise product."""
    return tu.tree_map(operator.mul, tree_x, tree_y)


def tree_div(tree_x, tree_y):
    """Leafwise quotient."""
    return tu.tree_map(operator.truediv, tree_x, tree_y)


def tree_scale(scalar, tree):
    """``scalar * leaf`` for every leaf."""
    return tu.tree_map(lambda x: scalar * x, tree)


def tree_add_scale(tree_x, scalar, tree_y):
    """``x + scalar * y`` leafwise."""
    scalar = jnp.asarray(scalar)
    return tu.tree_map(lambda x, y: None if x is None else x + scalar * y, tree_x, tree_y,
                       is_leaf=lambda x: x is None)


def tree_vdot(tree_x, tree_y):
    """Inner product of two pytrees seen as flat vectors."""
    out = 0
    for x, y in zip(tu.tree_leaves(tree_x), tu.tree_leaves(tree_y)):
        out = out + jnp.vdot(x, y)
    return out


def tree_ones_like(tree, dtype=None):
    """Ones shaped like every leaf."""
    return tu.tree_map(lambda x: jnp.ones_like(x, dtype=dtype), tree)


def tree_where(condition, tree_x, tree_y):
    """``where(condition, x, y)`` leafwise."""
    return tu.tree_map(lambda x, y: jnp.where(condition, x, y), tree_x, tree_y)


def tree_l2_norm(tree, squared=False):
    """The L2 norm of a pytree (Optax's older name for ``tree_norm``)."""
    return tree_norm(tree, squared=squared)
