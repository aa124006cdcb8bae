"""``jax.experimental.layout``: ask for (or let XLA choose) the layouts of a jit's
arguments and results, of ``device_put``'s results and of intermediate values.

``Format(Layout(major_to_minor), sharding)`` in jit's ``in_shardings``/``out_shardings``
or as ``device_put``'s target; ``Format(Layout.AUTO)`` lets XLA choose (read the choice
from ``jit(f).lower(...).compile().input_formats``/``output_formats``); ``x.format``
is an array's. See docs/architecture.md, "Layouts".
"""
from xform.core import tree_util
from xform.core.layout import Format, Layout
from xform.core.trace import get_aval
from xform.interpreters.layouts import layout_constraint_p, layout_mode

__all__ = ["Format", "Layout", "with_layout_constraint"]


def with_layout_constraint(x, layouts):
    """``x`` (a pytree) with each leaf laid out as ``layouts`` (a Layout per leaf, or a
    tree prefix of ``x``) says; inside jit a constraint XLA honours, eagerly a copy.

    >>> import xform, xform.numpy as jnp
    >>> from xform.experimental.layout import Layout, with_layout_constraint
    >>> y = xform.jit(lambda a: with_layout_constraint(a * 2, Layout((1, 0))))(jnp.ones((2, 3)))
    >>> y.format.layout.major_to_minor
    (1, 0)
    """
    leaves, tree = tree_util.tree_flatten(x)
    try:
        flat = tree_util.broadcast_prefix(layouts, x, is_leaf=lambda v: isinstance(v, Layout))
    except ValueError as e:
        raise ValueError("with_layout_constraint layouts specification must be a tree "
                         f"prefix of the corresponding value; {e}") from None
    if any(not isinstance(lay, Layout) for lay in flat):
        raise ValueError("layouts passed to `with_layout_constraint` must be of type "
                         f"`Layout`. Got {[type(lay) for lay in flat]}")
    for v, lay in zip(leaves, flat):
        layout_mode(lay, get_aval(v).shape, "with_layout_constraint arguments")
    return tree_util.tree_unflatten(tree, [layout_constraint_p.bind(v, layout=lay)
                                           for v, lay in zip(leaves, flat)])
