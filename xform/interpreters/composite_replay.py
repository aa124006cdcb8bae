"""Composites under a transformation: the function's equations, traced once per
signature, bound again instead of running its Python.

JAX gets the same from jitting its jnp functions with ``inline=True``: under grad,
vmap, jit or linearize a call traces the function once per (avals, static values) and
afterwards binds the cached equations, skipping canonicalization, dtype promotion and
each lax wrapper. The equations are exactly those the function's Python binds at
those arguments, because the key holds everything the Python can branch on: the avals
of array operands (weak type included) and the type and value of every other argument
(Python scalars are constants here, as they are when the function runs; the eager and
lazy paths make them operands instead, which those paths can do without changing what
a transformation sees). Arguments the key cannot hold (NumPy arrays, dicts, floats
that are NaN), avals the trace cannot be rebuilt at (shard_map's varying axes,
explicit sharding, host memory), functions that cannot be traced there (they need
values) and jaxprs with literal outputs or compute types run the function as it is.
"""
import math

from xform.core import tree_util
from xform.core.array import Array
from xform.core.avals import MemorySpace, canonical_aval
from xform.core.jaxpr import Literal, Var
from xform.core.trace import Tracer, _context
from xform.interpreters.partial_eval import trace_to_jaxpr

_SCALARS = frozenset((bool, int, float, complex))


class _Unkeyable(Exception):
    """An argument the replay key cannot hold."""


class _Slot:
    """Where the i-th operand goes when the function is traced."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def _operand(a, key, ops):
    """A slot for array operand ``a`` (an Array or a tracer), its aval in ``key``."""
    aval = a.aval
    if aval.vma or aval._sharding is not None or \
            aval.memory_space is not MemorySpace.Device:
        raise _Unkeyable
    key.append(aval)
    ops.append(a)
    return _Slot(len(ops) - 1)


def _arg(a, key, ops):
    t = type(a)
    if t is Array or isinstance(a, Tracer):
        return _operand(a, key, ops)
    if t in _SCALARS:
        if a != a:
            raise _Unkeyable  # (NaN: no key finds it again)
        key.append(t)
        key.append(a)
        if t is float and a == 0.0:  # (0.0 == -0.0)
            key.append(math.copysign(1.0, a))
        return a
    if a is None:
        key.append(None)
        return None
    if t is list or t is tuple:
        key.append((t, len(a)))
        return t(_arg(x, key, ops) for x in a)
    raise _Unkeyable


def _fill(template, tracers):
    if type(template) is _Slot:
        return tracers[template.i]
    if type(template) is list or type(template) is tuple:
        return type(template)(_fill(t, tracers) for t in template)
    return template


class _Replay:
    __slots__ = ("jaxpr", "consts", "out_tree")


def replayer(fun, static_pos, static_names, as_is, caches):
    """``replay(args, kwargs)``: ``fun(*args, **kwargs)`` under a transformation (see
    the module docstring). ``as_is``: static keyword parameters whose value other than
    None runs the function as it is (as on the eager path); ``caches`` collects the
    cache, cleared with the composites' when a flag that changes tracing does."""
    cache = {}
    caches.append(cache)

    def replay(args, kwargs):
        if _context.vma is not None:  # (shard_map's body: tracing needs its context)
            return fun(*args, **kwargs)
        key, ops = [], []
        try:
            targs = []
            for i, a in enumerate(args):
                if i in static_pos:  # (typed: 1 == True == 1.0 hash equal)
                    key.append(type(a))
                    key.append(a)
                    targs.append(a)
                else:
                    targs.append(_arg(a, key, ops))
            tkwargs = {}
            for k, v in kwargs.items():
                if k in as_is and v is not None:
                    return fun(*args, **kwargs)
                key.append(k)
                if k in static_names:
                    key.append(type(v))
                    key.append(v)
                    tkwargs[k] = v
                else:
                    tkwargs[k] = _arg(v, key, ops)
            key = tuple(key)
            r = cache.get(key)
        except (_Unkeyable, TypeError, AttributeError):  # (an unhashable static value;
            # a tracer of no ShapedArray: a ref, a token)
            return fun(*args, **kwargs)
        if r is None:
            if len(cache) >= 1024:
                cache.clear()
            r = cache[key] = _trace(fun, targs, tkwargs, ops)
        if r is False:
            return fun(*args, **kwargs)
        env = {}   # (core.eval_jaxpr would cite the first call's source: bound plainly)
        for v, x in zip(r.jaxpr.constvars, r.consts):
            env[v] = x
        for v, x in zip(r.jaxpr.invars, ops):
            env[v] = x
        for eqn in r.jaxpr.eqns:
            outs = eqn.primitive.bind(*[a.val if type(a) is Literal else env[a]
                                        for a in eqn.invars], **eqn.params)
            if eqn.primitive.multiple_results:
                for v, x in zip(eqn.outvars, outs):
                    env[v] = x
            else:
                env[eqn.outvars[0]] = outs
        return tree_util.tree_unflatten(r.out_tree, [env[v] for v in r.jaxpr.outvars])

    return replay


def trace_filled(fun, targs, tkwargs, avals):
    """``fun`` traced with ``targs``/``tkwargs``' slots filled by tracers of ``avals``:
    ``(ClosedJaxpr, output treedef)``, or None where it cannot be traced there (it needs
    values, or a user error the plain call raises again with its own message)."""
    store = []

    def flat(*tracers):
        out = fun(*_fill(targs, tracers), **{k: _fill(v, tracers) for k, v in tkwargs.items()})
        leaves, tree = tree_util.tree_flatten(out)
        store.append(tree)
        return leaves

    try:
        closed = trace_to_jaxpr(flat, [canonical_aval(a) for a in avals])
    except Exception:  # noqa: BLE001
        return None
    return closed, store[0]


def _trace(fun, targs, tkwargs, ops):
    """The _Replay of ``fun`` at these arguments, or False where it cannot be one."""
    traced = trace_filled(fun, targs, tkwargs, [a.aval for a in ops])
    if traced is None:
        return False
    j = traced[0].jaxpr
    if any(type(v) is not Var for v in j.outvars) or any(
            e.compute_type is not None for e in j.eqns):
        return False  # (literal outputs: the function returns an Array there)
    r = _Replay()
    r.jaxpr, r.consts, r.out_tree = j, traced[0].consts, traced[1]
    return r
