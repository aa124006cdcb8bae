"""Pytree arithmetic used by optimizers (``optax.tree_utils``; also ``optax.tree`` with
the ``tree_`` prefix dropped)."""
import functools
import inspect
import operator

import xform.numpy as jnp
from xform import random
from xform.core import dtypes
from xform.core import tree_util as tu
from xform.optim._base import (bias_correction as tree_bias_correction, tree_cast,
                               tree_cast_like, tree_full_like, tree_norm, tree_sum,
                               tree_zeros_like,
                               update_infinity_moment as tree_update_infinity_moment,
                               update_moment as tree_update_moment,
                               update_moment_per_elem_norm as tree_update_moment_per_elem_norm)
from xform.optim._tree_state import (NamedTupleKey, tree_get, tree_get_all_with_path,
                                     tree_map_params, tree_set)

__all__ = ["tree_add", "tree_sub", "tree_mul", "tree_div", "tree_scale", "tree_add_scale",
           "tree_vdot", "tree_sum", "tree_norm", "tree_zeros_like", "tree_ones_like",
           "tree_full_like", "tree_where", "tree_cast", "tree_cast_like", "tree_bias_correction",
           "tree_update_moment", "tree_update_moment_per_elem_norm",
           "tree_update_infinity_moment", "tree_l2_norm", "tree_allclose", "tree_batch_shape",
           "tree_clip", "tree_conj", "tree_real", "tree_max", "tree_min", "tree_size",
           "tree_dtype", "tree_random_like", "tree_split_key_like",
           "tree_unwrap_random_key_data", "tree_get", "tree_set", "tree_get_all_with_path",
           "tree_map_params", "NamedTupleKey"]


def tree_add(tree_x, tree_y, *other_trees):
    """Leafwise sum of two or more pytrees.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.tree_utils.tree_add({'a': jnp.ones(1)}, {'a': jnp.ones(1)})
        {'a': Array([2.], dtype=float32)}
    """
    return tu.tree_map(lambda *xs: sum(xs[1:], xs[0]), tree_x, tree_y, *other_trees)


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


def tree_real(tree):
    """The real part of every leaf."""
    return tu.tree_map(jnp.real, tree)


def tree_conj(tree):
    """The complex conjugate of every leaf."""
    return tu.tree_map(jnp.conj, tree)


def tree_allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every pair of leaves is ``allclose``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> bool(optax.tree.allclose({'a': jnp.ones(2)}, {'a': jnp.ones(2) + 1e-9}))
        True
    """
    leaves = tu.tree_leaves(tu.tree_map(
        lambda x, y: jnp.allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan), a, b))
    return functools.reduce(operator.and_, leaves, True)


def tree_batch_shape(tree, shape=()):
    """Every leaf broadcast to ``shape + leaf.shape``."""
    return tu.tree_map(lambda x: jnp.broadcast_to(x, (*shape, *jnp.shape(x))), tree)


def tree_clip(tree, min_value=None, max_value=None):
    """``clip(leaf, min_value, max_value)`` for every leaf."""
    return tu.tree_map(lambda g: jnp.clip(g, min_value, max_value), tree)




def _reduce_nonempty(reduce, combine, tree, initializer):
    parts = [reduce(x) for x in tu.tree_leaves(tree) if jnp.size(x) != 0]
    return functools.reduce(combine, parts, initializer)


def tree_max(tree):
    """The largest element over all leaves (``-inf`` for an empty tree).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.tree.max({'a': jnp.array([1., 5.]), 'b': jnp.array(2.)})
        Array(5., dtype=float32)
    """
    return _reduce_nonempty(jnp.max, jnp.maximum, tree, -float("inf"))


def tree_min(tree):
    """The smallest element over all leaves (``inf`` for an empty tree)."""
    return _reduce_nonempty(jnp.min, jnp.minimum, tree, float("inf"))


def tree_size(tree):
    """The total number of elements in all leaves.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.tree.size({'a': jnp.ones((2, 3)), 'b': jnp.ones(4)})
        10
    """
    return sum(jnp.size(x) for x in tu.tree_leaves(tree))


def _lower_dtype(d1, d2):
    if jnp.promote_types(d1, d2) == d1:
        return d2
    if jnp.promote_types(d1, d2) == d2:
        return d1
    raise ValueError(f"Cannot compare dtype of {d1=} and {d2=}. Neither {d1} nor {d2} can "
                     "be promoted to the other.")


def _higher_dtype(d1, d2):
    return d1 if _lower_dtype(d1, d2) == d2 else d2


def tree_dtype(tree, mixed_dtype_handler=None):
    """The dtype of the leaves; with mixed dtypes, an error (``None``), or their
    ``'promote'``-d, ``'highest'`` or ``'lowest'`` dtype.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.tree.dtype({'a': jnp.ones(1), 'b': jnp.ones(1, jnp.bfloat16)}, 'promote')
        dtype('float32')
    """
    leaves = tu.tree_leaves(tree)
    if not leaves:
        return jnp.asarray(leaves).dtype
    ds = [jnp.asarray(x).dtype for x in leaves]
    if mixed_dtype_handler is None:
        errors = [f"Expected dtype={ds[0]} for {tu.keystr(p)} but got {jnp.asarray(x).dtype}."
                  for p, x in tu.tree_leaves_with_path(tree) if jnp.asarray(x).dtype != ds[0]]
        if errors:
            raise ValueError("\n".join(errors))
        return ds[0]
    combine = {"promote": jnp.promote_types, "highest": _higher_dtype,
               "lowest": _lower_dtype}.get(mixed_dtype_handler)
    if combine is None:
        raise ValueError(f"Invalid value for {mixed_dtype_handler=}, possible values are: "
                         'None, "promote", "highest", "lowest".')
    return functools.reduce(combine, ds)


def tree_split_key_like(rng_key, target_tree):
    """One independent key per leaf of ``target_tree``, in its structure."""
    treedef = tu.tree_structure(target_tree)
    keys = random.split(rng_key, treedef.num_leaves)
    return tu.tree_unflatten(treedef, list(keys))


def tree_random_like(rng_key, target_tree, sampler=random.normal, dtype=None):
    """Random leaves shaped like ``target_tree``'s, ``sampler(key, shape, dtype)`` with
    one key per leaf.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> t = optax.tree.random_like(xform.random.key(0), {'a': jnp.zeros(2)})
        >>> t['a'].shape
        (2,)
    """
    keys = tree_split_key_like(rng_key, target_tree)
    takes_sharding = "out_sharding" in inspect.signature(sampler).parameters
    extra = {"out_sharding": None} if takes_sharding else {}
    return tu.tree_map(lambda leaf, key: sampler(key, leaf.shape, dtype or leaf.dtype, **extra),
                       target_tree, keys)


def tree_unwrap_random_key_data(input_tree):
    """Typed PRNG keys replaced by their raw ``key_data``; other leaves unchanged."""
    def unwrap(x):
        if hasattr(x, "dtype") and dtypes.issubdtype(x.dtype, dtypes.prng_key):
            return random.key_data(x)
        return x
    return tu.tree_map(unwrap, input_tree)
