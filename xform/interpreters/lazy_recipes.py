"""Recipes: a composite (``interpreters/composite.py``) recorded in lazy mode from its
traced equations, appended to the pending graph in one go: none of the function's
Python (canonicalization, promotion), no bind or abstract evaluation per primitive.
The graph then holds exactly the equations recording the function would have appended.
See docs/architecture.md, "Lazy eager mode"."""
import math

import numpy as np

from xform.core import dtypes, transfer
from xform.core.array import Array
from xform.core.avals import aval_of_value, canonical_aval
from xform.core.config import config
from xform.core.jaxpr import Literal
from xform.core.trace import _context
from xform.interpreters.lazy import (LazyTrace, _Graph, _Pending, _after_record, _input, _new,
                                     _is_literal, _limit, _maybe_effects, _ref, _tls)


class _Recipe:
    """A composite's equations at some operand avals. In ``eqns``' refs, j >= 0 is the
    recipe's j-th variable, -k-1 its k-th operand, a tuple a literal; ``one`` is
    ``(prim, params key)`` when the recipe is one equation of the operands in order;
    ``scalars``: per operand, Python scalar value -> its Array (a graph input)."""
    __slots__ = ("eqns", "avals", "out", "one", "scalars")


# Primitives (convert_element_type) whose equation is a value no-op when its output's
# dtype is its operand's: only the weak type changes, which the values lazy mode
# computes never see. A traced composite has one where a Python scalar's weak slot meets
# a strong operand (JAX's weak-to-strong cast, which JAX folds into its literal); the
# recipe forwards the operand, as recording the function on Arrays would.
WEAK_CASTS = set()


def recipe(closed, n_operands):
    """The _Recipe of a composite traced to ``closed``, or None where recording it needs
    more than appending its equations (consts, an output that is no new variable,
    equations lazy mode does not record as they are, effects, float0, unhashable
    params, NaN/inf checks, jit disabled)."""
    j = closed.jaxpr
    if closed.consts or j.constvars or len(j.outvars) != 1 or _limit() == 1 \
            or config.jax_disable_jit:
        return None
    index = {v: -k - 1 for k, v in enumerate(j.invars)}
    eqns, avals = [], []
    try:
        for e in j.eqns:
            prim, params = e.primitive, e.params
            if prim in WEAK_CASTS and type(e.invars[0]) is not Literal and \
                    e.invars[0].aval.dtype == e.outvars[0].aval.dtype:
                index[e.outvars[0]] = index[e.invars[0]]
                continue
            if prim.lazy_kind != "record" or (params and _maybe_effects(prim, params)):
                return None
            refs = tuple(_literal(v) if type(v) is Literal else index[v]
                         for v in e.invars)
            pkey = tuple(params.items()) if params else ()
            hash(pkey)
            for v in e.outvars:
                if v.aval.dtype == dtypes.float0:
                    return None
                index[v] = len(avals)
                avals.append(canonical_aval(v.aval))
            eqns.append((prim, pkey, refs, len(e.outvars)))
        out = index[j.outvars[0]]
    except (KeyError, TypeError, ValueError):  # (a literal output; unhashable params;
        return None                                # a literal no key can hold)
    if out < 0:  # (an operand passed through)
        return None
    r = _Recipe()
    r.eqns, r.avals, r.out = eqns, avals, out
    r.scalars = [{} for _ in range(n_operands)]
    ops = tuple(-k - 1 for k in range(n_operands))
    r.one = eqns[0][:2] if len(eqns) == 1 and eqns[0][3] == 1 and eqns[0][2] == ops \
        else None
    return r


def _literal(v):
    """A literal as graph keys hold one, ``(Python scalar, aval)``; ValueError for one
    that would make keys equal to another's (-0.0 to 0.0). A float NaN becomes the one
    shared ``_NAN`` object: keys compare and hash their elements by identity first, so
    every NaN constant (var's where no values remain) keys the same program."""
    val = v.val
    if type(val) not in _PY_SCALARS:
        if v.aval.shape != ():
            raise ValueError
        val = np.asarray(val).item()  # (a rank-0 constant; .item() is exact)
    if val != val:
        if type(val) is not float:
            raise ValueError   # (a complex NaN: rare, recorded op by op)
        return (_NAN, v.aval)
    if type(val) is float and val == 0 and math.copysign(1.0, val) < 0:
        raise ValueError
    return (val, v.aval)


_NAN = float("nan")
_PY_SCALARS = (bool, int, float, complex)


def _scalar_ref(g, r, k, y):
    """The reference to Python scalar operand ``k`` of recipe ``r``: 0 and 1 literals
    (as recording makes them), other values inputs, their Arrays cached per value in
    ``r.scalars[k]`` (the hot path looks there first: no literal is cached)."""
    if _is_literal(y):
        return (y, aval_of_value(y))
    cache = r.scalars[k]
    a = cache.get(y)
    if a is None:
        aval = aval_of_value(y)
        a = transfer.scalar_array(y, aval.dtype, aval.weak_type)
        if y == y and y != 0:  # (nan: no lookup would find it; -0.0: 0.0 would)
            if len(cache) >= 256:
                cache.clear()
            cache[y] = a
    i = g.in_index.get(id(a))
    return -i if i is not None else _input(g, a)


def _splice(g, r, refs, committed):
    """Append recipe ``r``'s equations on operand ``refs`` to ``g``; its lazy output
    (``committed`` if an operand is: see interpreters/placement.py)."""
    arrays, keys = g.arrays, g.keys
    one = r.one
    if one is not None:  # (the objects built as LazyTrace's hot path builds them,
        p = _new(_Pending)  # without their __init__ frames)
        p.graph = g
        p.var = len(arrays)
        p.real = None
        out = _new(Array)
        out._buf = p
        out.aval = r.avals[0]
        out._npy = None
        out._committed = committed
        arrays.append(out)
        keys.append((one[0], one[1], refs))
    else:
        base = len(arrays)
        for a in r.avals:
            arrays.append(Array(_Pending(g, len(arrays)), a, committed))
        for prim, pkey, local, n in r.eqns:
            if n != 1:
                g.multi[len(keys)] = n
            keys.append((prim, pkey, tuple(
                x if type(x) is tuple else base + x if x >= 0 else refs[-x - 1]
                for x in local)))
        out = arrays[base + r.out]
    if len(keys) >= g.limit:
        _after_record(g, False)
    return out


def operand_key(x):
    """A recipe key part for operand ``x``: its aval's id (an Array), its type (a Python
    scalar, weakly typed; an int also by bit length and sign, as composites key it), or
    None (anything else: the function runs as it is)."""
    t = type(x)
    if t is Array:
        return id(x.aval)
    if t is float or t is bool:
        return t
    if t is int:
        return (t, x.bit_length() if x >= 0 else ~(~x).bit_length())
    return None


def record(r, operands):
    """Append recipe ``r`` on ``operands`` (Arrays and Python scalars, in the order of
    its traced inputs) to this thread's graph; its lazy output."""
    g = _tls.graph
    if g is None or g.closed:
        g = _tls.graph = _Graph()
    refs, committed = [], False
    for k, a in enumerate(operands):
        if type(a) is Array:
            b = a._buf
            refs.append(b.var if type(b) is _Pending and b.graph is g else _ref(g, a))
            committed = committed or a._committed
        else:
            refs.append(_scalar_ref(g, r, k, a))
    return _splice(g, r, tuple(refs), committed)


def entries(fun, trace, recipes, keep, replay):
    """``(one, two)``: ``fun(x)`` and ``fun(x, y)`` while the eval trace is not current.
    In lazy mode a call appends ``fun``'s recipe (``trace(args)``: ``fun`` traced at the
    operands' avals, a ClosedJaxpr or None) to the graph, found by the ids of the
    operands' canonical avals and the types of scalar operands (``recipes``; ``keep``
    holds those avals, so their ids are not reused); a call no recipe serves runs
    ``fun``, and under a transformation ``replay`` (``composite_replay.py``) runs."""

    def miss(args):
        parts, held = [], []
        for a in args:
            if type(a) is Array:
                c = canonical_aval(a.aval)
                held.append(c)
                parts.append(id(c))
            else:
                parts.append(operand_key(a))
        if None in parts:
            return None
        key = parts[0] if len(parts) == 1 else tuple(parts)
        r = recipes.get(key)
        if r is None:
            if len(recipes) >= 1024:
                recipes.clear()
                keep.clear()
            closed = trace(args)
            r = recipes[key] = (closed is not None and recipe(closed, len(args))) or False
            keep.extend(held)
        return r

    def one(x):
        if type(_context.trace) is LazyTrace and type(x) is Array:
            r = recipes.get(id(x.aval)) or miss((x,))
            if r:
                g = _tls.graph
                if g is None or g.closed:
                    g = _tls.graph = _Graph()
                b = x._buf
                return _splice(g, r, (b.var if type(b) is _Pending and b.graph is g
                                      else _ref(g, x),), x._committed)
            return fun(x)
        return replay((x,), {})

    def two(x, y):
        if type(_context.trace) is LazyTrace:
            tx, ty = type(x), type(y)
            r = recipes.get((id(x.aval) if tx is Array else operand_key(x),
                             id(y.aval) if ty is Array else
                             ty if ty is float else operand_key(y))) or miss((x, y))
            if r:
                g = _tls.graph
                if g is None or g.closed:
                    g = _tls.graph = _Graph()
                if tx is Array:
                    b = x._buf
                    rx = b.var if type(b) is _Pending and b.graph is g else _ref(g, x)
                else:
                    rx = _scalar_ref(g, r, 0, x)
                if ty is Array:
                    b = y._buf
                    ry = b.var if type(b) is _Pending and b.graph is g else _ref(g, y)
                else:
                    a = r.scalars[1].get(y)
                    if a is None:
                        ry = _scalar_ref(g, r, 1, y)
                    else:
                        ry = g.in_index.get(id(a))
                        ry = -ry if ry is not None else _input(g, a)
                return _splice(g, r, (rx, ry), (tx is Array and x._committed) or
                               (ty is Array and y._committed))
            return fun(x, y)
        return replay((x, y), {})

    return one, two
