"""Pytree arithmetic used by optimizers (``optax.tree_utils``; also ``optax.tree`` with
the ``tree_`` prefix dropped)."""
import dataclasses
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


# ---- complex parts and lookups by field name (used by the linesearches) ----

__all__ += ["tree_real", "tree_conj", "tree_get", "tree_get_all_with_path"]


def tree_real(tree):
    """The real part of every leaf."""
    return tu.tree_map(jnp.real, tree)


def tree_conj(tree):
    """The complex conjugate of every leaf."""
    return tu.tree_map(jnp.conj, tree)


@dataclasses.dataclass(frozen=True)
class NamedTupleKey:
    """Path entry for the field ``name`` of a NamedTuple of class ``tuple_name``."""
    tuple_name: str
    name: str

    def __str__(self):
        return f"{self.tuple_name}.{self.name}"


def _is_named_tuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _has_key(node, key):
    if _is_named_tuple(node):
        return key in node._fields or type(node).__name__ == key
    return isinstance(node, dict) and key in node


def _fields(path, node):
    """(path, child) for the fields of a NamedTuple or the items of a dict."""
    if _is_named_tuple(node):
        name = type(node).__name__
        return [((*path, NamedTupleKey(name, f)), getattr(node, f)) for f in node._fields]
    return [((*path, tu.DictKey(k)), v) for k, v in node.items()]


def _get_all(node, key, path):
    found = []
    if _has_key(node, key):
        if _is_named_tuple(node):
            name = type(node).__name__
            found.append((path, node) if key == name else
                         ((*path, NamedTupleKey(name, key)), getattr(node, key)))
        else:
            found.append(((*path, tu.DictKey(key)), node[key]))
        kids = _fields(path, node)
    elif _is_named_tuple(node):
        kids = _fields(path, node)
    else:  # any other container: down to the next NamedTuple or node holding `key`
        stop = lambda x: _is_named_tuple(x) or _has_key(x, key)  # noqa: E731
        kids = [((*path, *p), v) for p, v in tu.tree_leaves_with_path(node, is_leaf=stop)
                if stop(v)]
    for p, child in kids:
        found += _get_all(child, key, p)
    return found


def tree_get_all_with_path(tree, key, filtering=None):
    """All ``(path, value)`` pairs of ``tree`` found under ``key``: a dict key, a
    NamedTuple field, or a NamedTuple's class name (then the value is the tuple).

    Paths name NamedTuple fields with :class:`NamedTupleKey` (class and field), so a
    ``filtering(path, value) -> bool`` can tell apart equal names in different states.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> state = optax.adam(1e-3).init(jnp.zeros(2))
        >>> [str(p[-1]) for p, _ in optax.tree_utils.tree_get_all_with_path(state, 'count')]
        ['ScaleByAdamState.count']
    """
    found = _get_all(tree, key, ())
    if filtering is not None:
        found = [(p, v) for p, v in found if filtering(p, v)]
    return found


def tree_get(tree, key, default=None, filtering=None):
    """The one value of ``tree`` under ``key`` (see :func:`tree_get_all_with_path`).

    Returns ``default`` when ``key`` is absent.

    Raises:
        KeyError: when several values match.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.tree_utils.tree_get(optax.adam(1e-3).init(jnp.zeros(2)), 'count')
        Array(0, dtype=int32)
    """
    found = tree_get_all_with_path(tree, key, filtering=filtering)
    if len(found) > 1:
        raise KeyError(f"Found multiple values for '{key}' in {tree}.")
    return found[0][1] if found else default
