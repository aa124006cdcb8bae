"""Shared machinery of the control-flow primitives: tracing user functions to
jaxprs ("initial style") and checking that their output types agree.

Control-flow primitives hold closed jaxprs in their params. A user function is
traced once to a jaxpr; the values it closes over (possibly tracers of enclosing
transformations) become explicit leading operands, so every interpreter sees them.
"""
from xform.core.avals import ShapedArray
from xform.core.trace import _context
from xform.interpreters import partial_eval as pe

trace_jaxpr = pe.trace_to_subjaxpr   # pytree function -> (jaxpr, consts, out_tree)


def _type_str(avals):
    return ", ".join(a.str_short() for a in avals)


def check_same_types(what, names, trees, aval_lists):
    """Raise a TypeError naming ``names`` unless all output trees and avals agree.

    Weak types may differ (the result is then strong, as in JAX); shapes, dtypes and
    shardings (explicit mode, where both are typed) may not.
    """
    first_tree, first_avals = trees[0], aval_lists[0]
    for name, tree, avals in zip(names[1:], trees[1:], aval_lists[1:]):
        if tree != first_tree:
            raise TypeError(f"{what}: {names[0]} and {name} must have the same output "
                            f"structure, got {first_tree} and {tree}.")
        if [(a.shape, a.dtype) for a in avals] != [(a.shape, a.dtype) for a in first_avals]:
            raise TypeError(f"{what}: {names[0]} and {name} must have identical output "
                            f"types, got\n  {_type_str(first_avals)}\nand\n"
                            f"  {_type_str(avals)}.")
        for a, b in zip(first_avals, avals):
            sa, sb = getattr(a, "_sharding", None), getattr(b, "_sharding", None)
            if sa is not None and sb is not None and sa != sb:  # (explicit mode's types)
                raise TypeError(
                    f"{what} branches must have equal output types but they differ.\n\n"
                    f"The output of {names[0]} has type {a.str_short(False)} but the "
                    f"corresponding output of {name} has type {b.str_short(False)}.\n\n"
                    f"Revise {names[0]} and/or {name} so that all output types match.")
            if a.vma != b.vma and _context.vma is not None:  # in shard_map(check_vma)
                lo = names[0] if len(a.vma) < len(b.vma) else name
                raise TypeError(
                    f"{what} branches must have equal output types but they differ.\n\n"
                    f"The output of {names[0]} has type {a.str_short()} but the "
                    f"corresponding output of {name} has type {b.str_short()}, so the "
                    f"manual axis types do not match.\n\nThis might be fixed by applying "
                    f"`jax.lax.pcast(..., {tuple(sorted(a.vma ^ b.vma))}, to='varying')` "
                    f"to the output of {lo}.\n\nRevise {names[0]} and/or {name} so that "
                    "all output types match.")


def join_weak_types(aval_lists):
    """Output avals of several branches: weak only where every branch is weak; typed
    (explicit mode) where every branch has the same type."""
    return [ShapedArray(col[0].shape, col[0].dtype, all(b.weak_type for b in col),
                        frozenset().union(*(b.vma for b in col)),
                        col[0]._sharding if all(b._sharding == col[0]._sharding for b in col)
                        else None)
            for col in zip(*aval_lists)]
