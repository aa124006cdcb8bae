"""Shared machinery of the control-flow primitives: tracing user functions to
jaxprs ("initial style") and checking that their output types agree.

Control-flow primitives hold closed jaxprs in their params. A user function is
traced once to a jaxpr; the values it closes over (possibly tracers of enclosing
transformations) become explicit leading operands, so every interpreter sees them.
"""
import functools
import types
import weakref

from xform.core import mesh
from xform.core.avals import ShapedArray
from xform.core.config import config
from xform.core.trace import _context, eval_trace
from xform.interpreters import partial_eval as pe


def trace_jaxpr(fun, in_tree, avals):
    """``fun`` (positional pytree arguments of structure ``in_tree``) traced at ``avals``:
    ``(jaxpr, consts, out_tree)`` (``pe.trace_to_subjaxpr``); eagerly, reused for the
    same function and avals (``eager_cached``)."""
    return eager_cached((fun,), (in_tree, tuple(avals)),
                        lambda: pe.trace_to_subjaxpr(fun, in_tree, avals))


# ---- eager calls reuse their traced bodies ----
# JAX caches a body's trace per (function identity, avals) (``pe.trace_to_jaxpr``'s weakref
# LRU), so a loop called eagerly again with the same body skips tracing; the same here.
# Keyed by the functions' identities (weakly: a dead function's entries go, and its id is
# never mistaken for a new one's), what the caller says shapes the trace (trees, avals,
# static params), and a guard: the identities of the values each function reads from its
# closure cells and globals (recursing into closed-over functions and partials), which are
# held while the entry lives. So a recreated closure, an inline lambda, or a rebound
# nonlocal or global retraces; like JAX, a value mutated in place (a dict or NumPy array
# read inside the body) is not seen. Only outside any transformation and mesh context
# (consts are then concrete values); cleared on every flag change.

_traces = {}        # (ids of funs) -> (weakrefs, {(key, guard ids): (result, guard values)})
_MAX_FUNS, _MAX_PER_FUN = 512, 8


def eager_cached(funs, key, compute):
    """``compute()`` (tracing ``funs``), reused for later eager calls with the same
    functions, ``key`` and guard (see above); called as is under a transformation."""
    if _context.trace is not eval_trace or _context.vma is not None or \
            mesh.current_mesh() is not None or mesh._abstract:
        return compute()
    try:
        ids = tuple(map(id, funs))
        refs = _traces.get(ids)
        if refs is None or any(r() is not f for r, f in zip(refs[0], funs)):
            refs = None
        guard = []
        for f in funs:
            _guard(f, guard, 3)
        full_key = (key, tuple(map(id, guard)))
        hit = refs[1].get(full_key) if refs is not None else None
    except TypeError:  # (a function that cannot be weakly referenced, an unhashable key)
        return compute()
    if hit is not None:
        return hit[0]
    result = compute()
    if refs is None:
        if len(_traces) >= _MAX_FUNS:
            _traces.clear()
        try:
            refs = _traces[ids] = ([weakref.ref(f, functools.partial(_forget, ids))
                                    for f in funs], {})
        except TypeError:
            return result
    if len(refs[1]) >= _MAX_PER_FUN:  # (a closure cell rebound on every call)
        refs[1].clear()
    refs[1][full_key] = (result, guard)
    return result


def per_function(make):
    """Decorator: ``make(f)`` once per function ``f`` (weakly keyed by identity), so a
    wrapper built around a user's body keeps its identity across eager calls (JAX's
    ``_fori_scan_body_fun``). ``make`` gets a weakref to ``f`` (so the cache does not
    keep ``f`` alive), or for a callable that has none a function returning it."""
    cache = {}

    def get(f):
        hit = cache.get(id(f))
        if hit is not None and hit[0]() is f:
            return hit[1]
        try:
            ref = weakref.ref(f, lambda r, i=id(f): cache.get(i, (None,))[0] is r
                              and cache.pop(i))
        except TypeError:  # (not weakly referenceable: a new wrapper each call)
            return make(lambda: f)
        if len(cache) >= 4096:
            cache.clear()
        made = cache[id(f)] = (ref, make(ref))
        return made[1]
    return get


def _forget(ids, ref, traces=_traces):  # (bound: module globals are gone at exit)
    entry = traces.get(ids)
    if entry is not None and ref in entry[0]:
        del traces[ids]


def _guard(f, out, depth):
    """Append to ``out`` the values ``f`` reads from its closure and globals."""
    if type(f) is types.FunctionType:
        g = f.__globals__
        for n in _global_names(f.__code__):
            v = g.get(n, _guard)
            if v is not _guard:
                out.append(v)
        for cell in f.__closure__ or ():
            try:
                v = cell.cell_contents
            except ValueError:  # (an empty cell)
                continue
            if type(v) is weakref.ref:  # (a wrapper cached per function, ``per_function``)
                v = v()
            out.append(v)
            if depth and (type(v) is types.FunctionType or type(v) is functools.partial):
                _guard(v, out, depth - 1)
    elif type(f) is functools.partial:
        out.append(f.func)
        out.extend(f.args)
        out.extend(f.keywords.values())
        if depth:
            _guard(f.func, out, depth - 1)
    else:
        out.append(f)  # (a callable object: its identity; its attributes are unguarded)


@functools.lru_cache(maxsize=4096)
def _global_names(code):
    """Names ``code`` (and the code nested in it: lambdas, comprehensions) may read as
    globals."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names.update(_global_names(c))
    return tuple(sorted(names))


config._add_listener(lambda name, value: _traces.clear())


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
