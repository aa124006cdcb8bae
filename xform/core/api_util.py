"""Flattening user functions: pytrees in and out become flat lists of leaves.

Every transformation runs a user function on flat lists of tracers, so each wraps it
with ``flatten_fun``: the wrapper unflattens its arguments, calls the function, and
flattens the result, leaving the output tree (and, with ``has_aux``, the auxiliary
output) in a ``store`` to read once the wrapper has run (JAX's ``api_util.flatten_fun``
with its ``store``; xform has no ``linear_util``, so the store is a plain object).
"""
from xform.core import tree_util


class Store:
    """Filled by a flattened function when it runs: ``out_tree`` and ``aux``."""
    __slots__ = ("_out_tree", "_aux")

    @property
    def out_tree(self):
        try:
            return self._out_tree
        except AttributeError:
            raise AssertionError("the flattened function has not run yet") from None

    @property
    def aux(self):
        return self._aux


def flatten_fun(fun, in_tree, has_aux=False, kwargs=False):
    """``(flat_fun, store)``: ``flat_fun(*leaves)`` calls ``fun`` on the arguments
    ``tree_unflatten(in_tree, leaves)`` (a tuple of positional arguments, or with
    ``kwargs=True`` an ``(args, kwargs)`` pair) and returns the output's leaves.

    With ``has_aux``, ``fun`` returns ``(output, aux)``; ``aux`` lands in ``store.aux``
    unflattened.
    """
    store = Store()

    def flat_fun(*leaves):
        args = tree_util.tree_unflatten(in_tree, leaves)
        out = fun(*args[0], **args[1]) if kwargs else fun(*args)
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("has_aux=True requires the function to return a pair "
                                f"(output, auxiliary data), got {type(out).__name__}")
            out, store._aux = out
        out_leaves, store._out_tree = tree_util.tree_flatten(out)
        return out_leaves
    return flat_fun, store
