"""``custom_vmap``: a function with a user-defined vmap rule.

The wrapper only (argument resolution, pytrees, the rule's tree checks with JAX's
messages); the primitive and its rules are in ``xform.interpreters.custom_batching``.
"""
import functools

from xform.core import tree_util
from xform.core.trace import current_trace, eval_trace, get_aval
from xform.interpreters import partial_eval as pe
from xform.interpreters.custom_batching import custom_vmap_p
from xform.transforms.custom_derivatives import _name, _resolve_kwargs, forward_attr


class custom_vmap:
    """Customize how a function behaves under :func:`xform.vmap`.

    Outside vmap the function runs as written (and so does its differentiation: JVP and
    grad differentiate the function, with the rule's JVP under vmap). Under vmap, the rule
    set with :meth:`def_vmap` computes the batched result.

    Args:
      fun: the function.

    >>> import xform, xform.numpy as jnp
    >>> @xform.custom_batching.custom_vmap
    ... def f(x, y):
    ...   return x + y
    >>> @f.def_vmap
    ... def f_vmap_rule(axis_size, in_batched, xs, ys):
    ...   return xs * ys, True
    >>> xform.vmap(f)(jnp.arange(3), jnp.arange(1, 4))
    Array([0, 2, 6], dtype=int32)
    """

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule = None

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    __getattr__ = forward_attr

    def def_vmap(self, vmap_rule):
        """Set ``vmap_rule(axis_size, in_batched, *args) -> (out, out_batched)``.

        ``in_batched`` is a list, one pytree of bools per argument (batched arguments carry
        the batch axis first, of size ``axis_size``); ``out_batched`` is a pytree of bools
        with ``out``'s structure. Usable as a decorator; returns ``vmap_rule``."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs):
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vmap")
        if self.vmap_rule is None:
            raise AttributeError(f"No batching rule defined for custom_vmap function "
                                 f"{_name(self.fun)} using def_vmap.")
        if current_trace() is eval_trace:
            return self.fun(*args)
        flat, in_tree = tree_util.tree_flatten(args)
        closed, consts, out_tree = pe.trace_to_subjaxpr(self.fun, in_tree,
                                                         [get_aval(x) for x in flat])
        rule = _FlatRule(self.vmap_rule, len(consts), in_tree, out_tree)
        outs = custom_vmap_p.bind(*consts, *flat, call=closed, rule=rule)
        return tree_util.tree_unflatten(out_tree, outs)


class _FlatRule:
    """The user's rule on flat operands (closed-over values first, never batched)."""

    def __init__(self, rule, num_consts, in_tree, out_tree):
        self.rule, self.num_consts = rule, num_consts
        self.in_tree, self.out_tree = in_tree, out_tree

    def __repr__(self):
        return _name(self.rule)

    def __call__(self, axis_size, batched, vals):
        nc = self.num_consts
        if any(batched[:nc]):
            raise ValueError(
                f"custom_vmap function closes over a value batched by this vmap; pass it to "
                f"the function as an argument instead, so that its rule ({self}) sees it")
        args = tree_util.tree_unflatten(self.in_tree, vals[nc:])
        in_batched = tree_util.tree_unflatten(self.in_tree, batched[nc:])
        out, out_batched = self.rule(axis_size, list(in_batched), *args)
        flat_out, tree1 = tree_util.tree_flatten(out)
        flat_b, tree2 = tree_util.tree_flatten(out_batched)
        if tree1 != tree2:
            raise ValueError(
                "structure of output value and output batching specification returned by "
                f"custom vmap rule ({self}) do not match.\nOutput values: {tree1}\n"
                f"Batching spec: {tree2}")
        if tree1 != self.out_tree:
            raise ValueError(
                f"structure of output returned by custom vmap rule ({self}) does not match "
                f"that of original custom-vmapped function.\nOriginal output: "
                f"{self.out_tree}\nRule output: {tree1}")
        return flat_out, [bool(b) for b in flat_b]
