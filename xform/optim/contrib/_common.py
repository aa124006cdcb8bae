"""Pytree helpers the contributed optimizers share (kept private to this package)."""
import functools

import xform.numpy as jnp
from xform import tree_util as tu


def _lower(a, b):
    return a if jnp.promote_types(a, b) == b else b


def _higher(a, b):
    return b if jnp.promote_types(a, b) == b else a


def tree_dtype(tree, which):
    """The lowest or highest dtype among the leaves (``optax.tree.dtype(tree, which)``)."""
    leaves = tu.tree_leaves(tree)
    if not leaves:
        return jnp.asarray([]).dtype
    return functools.reduce(_lower if which == "lowest" else _higher,
                            [jnp.asarray(x).dtype for x in leaves])


def tree_vdot(tree_x, tree_y):
    """Inner product of two pytrees (complex leaves of ``x`` conjugated)."""
    out = 0
    for x, y in zip(tu.tree_leaves(tree_x), tu.tree_leaves(tree_y)):
        x, y = jnp.asarray(x), jnp.asarray(y)
        if jnp.iscomplexobj(x):
            x = jnp.conj(x)
        out = out + jnp.tensordot(x, y, x.ndim)
    return out


def tree_sum_abs(tree):
    """The L1 norm of a pytree: the sum of ``|x|`` over every element of every leaf."""
    out = 0
    for x in tu.tree_leaves(tree):
        out = out + jnp.sum(jnp.abs(x))
    return out


def value_or_schedule(v, count):
    """``v(count)`` for a schedule, ``v`` itself for a constant."""
    return v(count) if callable(v) else v
