"""The IR: typed variables, equations, jaxprs; typecheck, evaluation and printing.

Grammar (as printed, JAX's format)::

    jaxpr ::= { lambda constvar* ; invar* . let eqn* in ( atom* ) }
    eqn   ::= outvar* = primitive[param=value ...] atom*
    atom  ::= var | literal            (literals print as 1.0:f32[])

``eval_jaxpr`` calls ``bind``, so evaluating a jaxpr under a trace transforms it.
"""
import contextlib
import itertools
import threading

import numpy as np

from xform.core import source_info_util
from xform.core.avals import ShapedArray
from xform.core.config import config


class Var:
    """A variable of a jaxpr. Named only when printed (a, b, ..., ba, ...)."""
    __slots__ = ("aval", "count")
    _counter = itertools.count()

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.count = next(Var._counter)

    def __repr__(self):
        return f"Var({self.count}):{self.aval.str_short()}"


class Literal:
    """A scalar constant inlined in an equation."""
    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val})"


class _ComputeType(threading.local):
    current = None


_compute_type = _ComputeType()


def current_compute_type():
    """The compute type (``compute_on``'s: ``"device_host"``, ...) equations staged now
    are marked with, or None."""
    return _compute_type.current


def compute_type_context(compute_type):
    """Mark equations staged in the block with ``compute_type`` (None: leave as is).
    JAX's ``JaxprEqnContext.compute_type``: lowering tags each one's ops for XLA. A
    change is told to config's listeners (as ``"compute_on"``): cache-hit paths keyed on
    avals alone forget what was traced outside it, as JAX keys them on the context."""
    return _UNCHANGED if compute_type is None else _ComputeTypeContext(compute_type)


class _ComputeTypeContext:
    __slots__ = ("compute_type", "prev")

    def __init__(self, compute_type):
        self.compute_type = compute_type

    def __enter__(self):
        self.prev = _compute_type.current
        _switch(self.compute_type)

    def __exit__(self, *exc):
        _switch(self.prev)


_UNCHANGED = contextlib.nullcontext()   # (shared: transformations enter one per equation)


def _switch(compute_type):
    if _compute_type.current != compute_type:
        _compute_type.current = compute_type
        for fn in config._listeners:
            fn("compute_on", compute_type)


class JaxprEqn:
    """``outvars = primitive[params] invars``; ``source`` is the user's ``(code, line)``
    that staged it (or None), ``source_info`` a readable view of it; ``compute_type``
    where ``compute_on`` marked it (or None)."""
    __slots__ = ("invars", "outvars", "primitive", "params", "source", "compute_type")

    def __init__(self, invars, outvars, primitive, params, source=None, compute_type=None):
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.primitive = primitive
        self.params = params
        self.source = source
        self.compute_type = compute_type

    @property
    def source_info(self):
        return None if self.source is None else source_info_util.SourceInfo(*self.source)

    effects = property(lambda self: eqn_effects(self))

    def __repr__(self):
        return _pp_eqn(self, _Names(), 0)


# Effects, minimally: an effectful primitive (a host callback such as debug.print) must
# run even when nothing uses its outputs, so DCE keeps it, and keeps any higher-order
# equation (jit, cond, ...) whose jaxpr params contain one. Effects are unordered; JAX's
# per-effect types, tokens and ordering are not modeled: an equation's effect is named
# by its primitive. (Filled by the layers that declare those primitives.)
effectful_primitives = set()
effectful_params = {}  # primitive -> predicate of its params (ffi_call's has_side_effect)


class Effect:
    """What an effectful primitive does beyond its outputs (``jaxpr.effects`` holds
    them; JAX's ``DebugEffect``, ``IOEffect``... are one kind per primitive here)."""
    __slots__ = ("name",)
    _made = {}

    def __new__(cls, name):
        made = cls._made.get(name)
        if made is None:
            made = cls._made[name] = super().__new__(cls)
            made.name = name
        return made

    def __repr__(self):
        return f"Effect({self.name})"


def param_jaxprs(value):
    """The jaxprs among an equation's param ``value`` (a jaxpr, or tuples of them)."""
    if isinstance(value, ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, Jaxpr):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from param_jaxprs(v)


def eqn_effects(eqn) -> set:
    """The effects of ``eqn``: its primitive's, or those of the jaxprs in its params."""
    if eqn.primitive in effectful_params:
        return {Effect(eqn.primitive.name)} if effectful_params[eqn.primitive](
            eqn.params) else set()
    if eqn.primitive in effectful_primitives:
        return {Effect(eqn.primitive.name)}
    return {e for p in eqn.params.values() for j in param_jaxprs(p) for e in j.effects}


def has_effects(eqn) -> bool:
    if eqn.primitive in effectful_params:
        return effectful_params[eqn.primitive](eqn.params)
    return eqn.primitive in effectful_primitives or any(
        has_effects(e) for p in eqn.params.values() for j in param_jaxprs(p)
        for e in j.eqns)


class Jaxpr:
    """A closed-form program: ``constvars`` (bound by ClosedJaxpr.consts), ``invars``,
    equations in order, ``outvars`` (Vars or Literals)."""
    __slots__ = ("constvars", "invars", "outvars", "eqns")

    def __init__(self, constvars, invars, outvars, eqns):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    @property
    def effects(self) -> set:
        """The effects of its equations (an empty set for a pure program), as JAX's."""
        return {e for eqn in self.eqns for e in eqn_effects(eqn)}

    def __str__(self):
        return pp_jaxpr(self)

    __repr__ = __str__


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""
    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts):
        assert len(jaxpr.constvars) == len(consts)
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)
    effects = property(lambda self: self.jaxpr.effects)

    def __call__(self, *args):
        return eval_jaxpr(self.jaxpr, self.consts, *args)

    def __str__(self):
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__


def eval_jaxpr(jaxpr: Jaxpr, consts, *args):
    """Run ``jaxpr`` by binding each equation's primitive under the current trace."""
    env = {}
    for v, x in zip(jaxpr.constvars, consts, strict=True):
        env[v] = x
    for v, x in zip(jaxpr.invars, args, strict=True):
        env[v] = x
    for eqn in jaxpr.eqns:
        invals = [a.val if type(a) is Literal else env[a] for a in eqn.invars]
        if eqn.source is None and eqn.compute_type is None:
            outs = eqn.primitive.bind(*invals, **eqn.params)
        else:   # equations staged from this one inherit its source (errors cite it)
            ctx = source_info_util._context                 # and its compute type
            prev, ctx.current = ctx.current, eqn.source
            prev_type = _compute_type.current
            if eqn.compute_type is not None:
                _compute_type.current = eqn.compute_type
            try:
                outs = eqn.primitive.bind(*invals, **eqn.params)
            except Exception as e:
                source_info_util.annotate(e, eqn)
                raise
            finally:
                ctx.current = prev
                _compute_type.current = prev_type
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        for v, x in zip(eqn.outvars, outs, strict=True):
            env[v] = x
    return [a.val if type(a) is Literal else env[a] for a in jaxpr.outvars]


class JaxprTypeError(TypeError):
    """A jaxpr is malformed (an internal error: please report it)."""


def typecheck(jaxpr: Jaxpr):
    """Check that every variable is bound once before use and every equation's
    output types agree with its primitive's abstract evaluation."""
    env = set()

    def bind(v):
        if v in env:
            raise JaxprTypeError(f"variable {v} bound twice")
        env.add(v)

    def read(a):
        if type(a) is Literal:
            return a.aval
        if a not in env:
            raise JaxprTypeError(f"variable {a} used before it is bound")
        return a.aval

    for v in itertools.chain(jaxpr.constvars, jaxpr.invars):
        bind(v)
    for eqn in jaxpr.eqns:
        in_avals = [read(a) for a in eqn.invars]
        out = eqn.primitive.abstract_eval(*in_avals, **eqn.params)
        out = out if eqn.primitive.multiple_results else [out]
        got = [v.aval for v in eqn.outvars]
        if [(a.shape, a.dtype) for a in out] != [(a.shape, a.dtype) for a in got]:
            raise JaxprTypeError(f"equation {eqn.primitive.name} outputs {got}, "
                                 f"but its abstract evaluation gives {out}")
        for v in eqn.outvars:
            bind(v)
    for a in jaxpr.outvars:
        read(a)


# ---- printing ----

class _Names:
    """Assigns a, b, ..., z, ba, bb, ... to variables in order of appearance."""

    def __init__(self):
        self.names = {}

    def __call__(self, v):
        if type(v) is Literal:
            return _pp_literal(v)
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = _alpha(len(self.names))
        return name


def _alpha(n):
    s = ""
    while True:
        s = chr(ord("a") + n % 26) + s
        n //= 26
        if n == 0:
            return s


def _pp_literal(lit):
    val = lit.val
    if isinstance(val, (np.ndarray, np.generic)):
        val = val.item() if np.ndim(val) == 0 else val
    return f"{val}:{lit.aval.str_short()}"


def _pp_param(value, names, indent):
    if isinstance(value, ClosedJaxpr):
        value = value.jaxpr
    if isinstance(value, Jaxpr):
        return _pp_jaxpr(value, _Names(), indent + 2)
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, tuple) and value and all(isinstance(v, (Jaxpr, ClosedJaxpr))
                                                  for v in value):
        return "(\n" + "".join(" " * (indent + 4) + _pp_param(v, names, indent + 2) + "\n"
                               for v in value) + " " * (indent + 2) + ")"
    return str(value)


def _pp_eqn(eqn, names, indent):
    lhs = " ".join(f"{names(v)}:{v.aval.str_short()}" for v in eqn.outvars)
    params = ""
    if eqn.params:
        # By name, as JAX prints them (jit's: its name, then its jaxpr); nested jaxprs
        # switch to one param per line.
        nested = lambda v: isinstance(v, (Jaxpr, ClosedJaxpr)) or bool(  # noqa: E731
            isinstance(v, tuple) and v and isinstance(v[0], (Jaxpr, ClosedJaxpr)))
        ordered = sorted(eqn.params.items(), key=lambda kv: nested(kv[1])) \
            if eqn.primitive.name == "jit" else sorted(eqn.params.items())
        items = [f"{k}={_pp_param(v, names, indent)}" for k, v in ordered]
        if any(nested(v) for v in eqn.params.values()) or any("\n" in s for s in items):
            pad = " " * (indent + 2)
            params = "[\n" + "".join(f"{pad}{s}\n" for s in items) + " " * indent + "]"
        else:
            params = "[" + " ".join(items) + "]"
    args = " ".join(names(a) for a in eqn.invars)
    head = f"{lhs} = " if lhs else ""   # effects-only equations print without "="
    return f"{head}{eqn.primitive.name}{params} {args}".rstrip()


_WIDTH = 80


def _pp_jaxpr(jaxpr, names, indent):
    consts = " ".join(f"{names(v)}:{v.aval.str_short()}" for v in jaxpr.constvars)
    invars = " ".join(f"{names(v)}:{v.aval.str_short()}" for v in jaxpr.invars)
    head = f"{{ lambda {consts}; {invars}. let"
    body = [_pp_eqn(e, names, indent + 4) for e in jaxpr.eqns]
    outs = ", ".join(names(v) for v in jaxpr.outvars)
    outs = f"({outs},)" if len(jaxpr.outvars) == 1 else f"({outs})"
    flat = f"{head} {'; '.join(body)} in {outs} }}"
    # JAX's printer puts a jaxpr on one line where it fits in 80 columns (a nested one:
    # where it has one equation, nearly always so)
    if "\n" not in flat and (len(flat) <= _WIDTH if indent == 0 else len(body) <= 1):
        return flat
    pad = " " * (indent + 4)
    lines = [head] + [pad + line for line in body]
    lines.append(" " * (indent + 2) + f"in {outs} }}")
    return "\n".join(lines)


def pp_jaxpr(jaxpr: Jaxpr) -> str:
    return _pp_jaxpr(jaxpr, _Names(), 0)

