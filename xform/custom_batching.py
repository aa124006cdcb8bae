"""``jax.custom_batching``: ``custom_vmap`` and ``sequential_vmap``.

``sequential_vmap`` is defined here rather than beside ``custom_vmap`` (transforms, L4)
because its rule is a ``lax.map`` (control flow, L5).
"""
from xform.core import tree_util
from xform.lax.control_flow.scan_loops import map as _lax_map
from xform.transforms.custom_batching import custom_vmap

__all__ = ["custom_vmap", "sequential_vmap"]


def sequential_vmap(f):
    """A ``custom_vmap`` whose batched form loops over the batch (``lax.map``).

    For functions with no batched form, e.g. ones calling host code.

    >>> import xform, xform.numpy as jnp
    >>> @xform.custom_batching.sequential_vmap
    ... def f(x):
    ...   return x + 1
    >>> xform.vmap(f)(jnp.arange(3))
    Array([1, 2, 3], dtype=int32)
    """
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        del axis_size
        args = list(args)
        mapped = tree_util.tree_map(lambda b, x: x if b else None, in_batched, args)

        def one(mapped):
            return f(*tree_util.tree_map(lambda b, m, x: m if b else x, in_batched, mapped,
                                         args))
        out = _lax_map(one, mapped)
        return out, tree_util.tree_map(lambda _: True, out)

    return f
