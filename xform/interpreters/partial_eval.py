"""Tracing Python to jaxprs, and partial evaluation (known/unknown split).

``DynamicJaxprTrace`` records every primitive it sees into a jaxpr ("staging").
``JaxprTrace`` does partial evaluation: primitives whose inputs are all known run
under the parent trace; the rest are recorded, with the known values they use
becoming residuals. Reverse mode is JVP under a JaxprTrace whose tangents are
unknown: the recorded part is the linear tangent program.
"""
import numpy as np

from xform.core import source_info_util
from xform.core.api_util import flatten_fun
from xform.core.array import Array
from xform.core.errors import UnexpectedTracerError
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr
from xform.core.jaxpr import current_compute_type
from xform.core import jaxpr as _jaxpr
from xform.core.trace import (Trace, Tracer, current_trace, get_aval, set_current_trace,
                               to_concrete_value)


def _literalable(x):
    """Scalars are inlined into equations as literals (as JAX does)."""
    if isinstance(x, (bool, int, float, complex)):
        return True
    if isinstance(x, (np.generic, np.ndarray)):
        return x.ndim == 0
    return type(x) is Array and not x.aval.shape


def _literal(x):
    return Literal(x, get_aval(x))


def _check_leak(x):
    if isinstance(x, Tracer) and not x._trace._valid:
        raise UnexpectedTracerError(x)


# ---- staging everything: DynamicJaxprTrace ----

class DynamicJaxprTracer(Tracer):
    __slots__ = ("_aval", "jvar")

    def __init__(self, trace, aval, var):
        self._trace = trace
        self._aval = aval
        self.jvar = var

    aval = property(lambda self: self._aval)


class DynamicJaxprTrace(Trace):
    """Records primitives into equations. Foreign values become constvars or literals."""
    __slots__ = ("eqns", "invars", "constvars", "consts", "_const_ids")

    def __init__(self, parent=None):
        super().__init__(parent)
        self.eqns = []
        self.invars = []
        self.constvars = []
        self.consts = []
        self._const_ids = {}

    def new_arg(self, aval):
        var = Var(aval)
        self.invars.append(var)
        return DynamicJaxprTracer(self, aval, var)

    def atom(self, x):
        if type(x) is DynamicJaxprTracer and x._trace is self:
            return x.jvar
        _check_leak(x)
        if _literalable(x):
            return _literal(x)
        var = self._const_ids.get(id(x))
        if var is None:
            var = self._const_ids[id(x)] = Var(get_aval(x))
            self.constvars.append(var)
            self.consts.append(x)
        return var

    def process_primitive(self, prim, args, params):
        atoms = [self.atom(x) for x in args]
        out = prim.abstract_eval(*[a.aval for a in atoms], **params)
        out_avals = out if prim.multiple_results else [out]
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(JaxprEqn(atoms, outvars, prim, params, source_info_util.current(),
                                   current_compute_type()))
        tracers = [DynamicJaxprTracer(self, v.aval, v) for v in outvars]
        return tracers if prim.multiple_results else tracers[0]

    def to_closed_jaxpr(self, outs):
        outvars = [self.atom(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        return ClosedJaxpr(jaxpr, self.consts)


def trace_to_jaxpr(fun, in_avals) -> ClosedJaxpr:
    """Trace ``fun`` (flat list of args -> flat list of outputs) to a ClosedJaxpr."""
    trace = DynamicJaxprTrace()
    args = [trace.new_arg(a) for a in in_avals]
    try:
        with set_current_trace(trace):
            outs = fun(*args)
        return trace.to_closed_jaxpr(outs)
    finally:
        trace.invalidate()


def trace_to_subjaxpr(fun, in_tree, in_avals):
    """Trace ``fun`` (positional pytree arguments of structure ``in_tree``) at ``in_avals``
    for a higher-order primitive's params.

    Returns ``(closed, consts, out_tree)``: ``closed`` has no consts of its own; its
    leading inputs take ``consts`` (the values ``fun`` closed over, possibly tracers of
    enclosing transformations, which so become explicit operands), then the flat args.
    """
    flat_fun, store = flatten_fun(fun, in_tree)
    closed, consts = convert_constvars_jaxpr(trace_to_jaxpr(flat_fun, in_avals))
    return closed, list(consts), store.out_tree


# ---- partial evaluation: JaxprTrace ----

class JaxprTracer(Tracer):
    """Known (``value`` set, ``var`` None) or unknown (``var`` set) partial value."""
    __slots__ = ("value", "jvar")

    def __init__(self, trace, value=None, var=None):
        self._trace = trace
        self.value = value
        self.jvar = var

    @property
    def aval(self):
        return self.jvar.aval if self.jvar is not None else get_aval(self.value)

    def to_concrete_value(self):
        return to_concrete_value(self.value) if self.jvar is None else None


partial_eval_rules = {}  # prim -> rule(trace, tracers, params) for higher-order primitives


class JaxprTrace(Trace):
    __slots__ = ("eqns", "residual_vars", "residuals", "_res_ids")

    def __init__(self, parent):
        super().__init__(parent)
        self.eqns = []
        self.residual_vars = []
        self.residuals = []
        self._res_ids = {}

    def new_unknown(self, aval):
        return JaxprTracer(self, var=Var(aval))

    def lift(self, x):
        if type(x) is JaxprTracer and x._trace is self:
            return x
        _check_leak(x)
        return JaxprTracer(self, value=x)

    def atom(self, t: JaxprTracer):
        """The jaxpr atom for a tracer of this trace: its var, a literal or a residual."""
        if t.jvar is not None:
            return t.jvar
        x = t.value
        if _literalable(x):
            return _literal(x)
        var = self._res_ids.get(id(x))
        if var is None:
            var = self._res_ids[id(x)] = Var(get_aval(x))
            self.residual_vars.append(var)
            self.residuals.append(x)
        return var

    def process_primitive(self, prim, args, params):
        tracers = [self.lift(x) for x in args]
        if all(t.jvar is None for t in tracers):
            with set_current_trace(self.parent):
                out = prim.bind(*[t.value for t in tracers], **params)
            if prim.multiple_results:
                return [JaxprTracer(self, value=o) for o in out]
            return JaxprTracer(self, value=out)
        rule = partial_eval_rules.get(prim)
        if rule is not None:
            return rule(self, tracers, params)
        return self.stage(prim, tracers, params)

    def stage(self, prim, tracers, params):
        atoms = [self.atom(t) for t in tracers]
        out = prim.abstract_eval(*[a.aval for a in atoms], **params)
        out_avals = out if prim.multiple_results else [out]
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(JaxprEqn(atoms, outvars, prim, params, source_info_util.current(),
                                   current_compute_type()))
        tracers = [JaxprTracer(self, var=v) for v in outvars]
        return tracers if prim.multiple_results else tracers[0]

    def build(self, in_tracers, out_tracers):
        """The staged (unknown) jaxpr: residual constvars, unknown inputs -> ``out_tracers``
        (each instantiated: known outputs become residuals). DCE'd, unused residuals dropped."""
        outvars = [self.atom(t) for t in out_tracers]
        jaxpr = Jaxpr(self.residual_vars, [t.jvar for t in in_tracers], outvars, self.eqns)
        jaxpr, used_consts = dce_jaxpr(jaxpr, prune_constvars=True)
        residuals = [r for r, used in zip(self.residuals, used_consts) if used]
        return jaxpr, residuals


# Effects: the registry is core's (``jaxpr.effectful_primitives``), which ``Jaxpr.effects``
# reads; the names stay here for the rules that fill it (``pe.effectful_primitives.add``).
effectful_primitives, effectful_params = _jaxpr.effectful_primitives, _jaxpr.effectful_params
has_effects, _param_jaxprs = _jaxpr.has_effects, _jaxpr.param_jaxprs


def dce_jaxpr(jaxpr: Jaxpr, prune_constvars=False):
    """Drop equations whose outputs are unused (unless they have effects). Returns
    (jaxpr, used constvar mask)."""
    live = {v for v in jaxpr.outvars if type(v) is Var}
    eqns = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars) or has_effects(eqn):
            eqns.append(eqn)
            live.update(v for v in eqn.invars if type(v) is Var)
    eqns.reverse()
    used = [v in live for v in jaxpr.constvars]
    constvars = [v for v, u in zip(jaxpr.constvars, used) if u] if prune_constvars \
        else jaxpr.constvars
    return Jaxpr(constvars, jaxpr.invars, jaxpr.outvars, eqns), used


def partial_eval_jaxpr(closed: ClosedJaxpr, unknowns, instantiate):
    """Split ``closed`` into a known and an unknown part.

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` maps the known
    inputs to the known outputs followed by ``num_res`` residuals; ``unknown`` maps
    the residuals followed by the unknown inputs to the unknown outputs. Outputs
    with ``instantiate`` set are made unknown even if computable.
    """
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(closed.out_avals)
    known_avals = [a for a, u in zip(closed.in_avals, unknowns) if not u]
    result = {}

    def known_fun(*known_args):
        pe = JaxprTrace(parent=current_trace())
        it = iter(known_args)
        args, unknown_in = [], []
        for aval, u in zip(closed.in_avals, unknowns):
            if u:
                t = pe.new_unknown(aval)
                unknown_in.append(t)
                args.append(t)
            else:
                args.append(next(it))
        with set_current_trace(pe):
            outs = eval_jaxpr(closed.jaxpr, closed.consts, *args)
        outs = [pe.lift(o) for o in outs]
        out_unknowns = [o.jvar is not None or inst for o, inst in zip(outs, instantiate)]
        jaxpr, residuals = pe.build(unknown_in, [o for o, u in zip(outs, out_unknowns) if u])
        pe.invalidate()
        result.update(jaxpr=jaxpr, out_unknowns=out_unknowns, num_res=len(residuals))
        return [o.value for o, u in zip(outs, out_unknowns) if not u] + residuals

    known = trace_to_jaxpr(known_fun, known_avals)
    jaxpr = result["jaxpr"]
    unknown = ClosedJaxpr(Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns), [])
    return known, unknown, result["out_unknowns"], result["num_res"]


# prim -> rule(eqn, unknown_in) -> (known_eqn, staged_eqn): the eqn-level split of a
# call-like primitive (``interpreters/call.py``), for ``partial_eval_jaxpr_custom``.
eqn_split_rules = {}
# The call primitive ``_as_call`` wraps an equation in: ``jit``'s, which pjit.py (built
# on this module) sets here.
wrapping_call_p = None


def _is_higher_order(eqn):
    return any(True for p in eqn.params.values() for _ in _param_jaxprs(p))


def _as_call(eqn, unknown_vars):
    """``eqn`` wrapped in a ``jit`` call (split by ordinary partial evaluation)."""
    invars = list(dict.fromkeys(v for v in eqn.invars if type(v) is Var))
    body = ClosedJaxpr(Jaxpr([], invars, eqn.outvars, [eqn]), [])
    call = JaxprEqn(invars, eqn.outvars, wrapping_call_p,
                    dict(jaxpr=body, name=eqn.primitive.name), eqn.source, eqn.compute_type)
    return call, [v in unknown_vars for v in invars], eqn_split_rules[wrapping_call_p]


def partial_eval_jaxpr_custom(closed, unknowns, saveable):
    """Split ``closed`` for rematerialization (``checkpoint``; JAX's name).

    Unlike ``partial_eval_jaxpr``, which saves every known value the unknown part needs,
    only known inputs and the known intermediates ``saveable(eqn)`` allows are saved.
    Returns ``(known, staged, out_unknowns, num_res)``: ``known`` maps the known inputs to
    the known outputs and ``num_res`` residuals; ``staged`` maps the residuals and the
    unknown inputs to the unknown outputs, recomputing every other known value it needs.
    """
    j = closed.jaxpr
    known_in = [v for v, u in zip(j.invars, unknowns) if not u]
    unknown_vars = {v for v, u in zip(j.invars, unknowns) if u}
    known_eqns, staged_eqns, saved = [], [], set(j.constvars) | set(known_in)
    for eqn in j.eqns:
        unknown_in = [type(v) is Var and v in unknown_vars for v in eqn.invars]
        if any(unknown_in) and not all(unknown_in) and _is_higher_order(eqn):
            # A call (a nested remat, a jit, a cond...) taking primals and tangents: split
            # it too, so its primal outputs stay known (else they'd depend on tangents).
            rule = eqn_split_rules.get(eqn.primitive)
            if rule is None:
                eqn, unknown_in, rule = _as_call(eqn, unknown_vars)
            known_eqn, staged_eqn = rule(eqn, unknown_in)
            known_eqns.append(known_eqn)
            if saveable(known_eqn):
                saved.update(known_eqn.outvars)
            else:
                staged_eqns.append(known_eqn)
            unknown_vars.update(staged_eqn.outvars)
            staged_eqns.append(staged_eqn)
            continue
        if any(unknown_in):
            unknown_vars.update(eqn.outvars)
            staged_eqns.append(eqn)
            continue
        known_eqns.append(eqn)
        if saveable(eqn):
            saved.update(eqn.outvars)
        else:
            staged_eqns.append(eqn)  # recomputed in the backward pass (if needed)
    out_unknowns = [type(v) is Var and v in unknown_vars for v in j.outvars]
    staged_outs = [v for v, u in zip(j.outvars, out_unknowns) if u]
    staged, _ = dce_jaxpr(Jaxpr([], [], staged_outs, staged_eqns))
    defined = {v for e in staged.eqns for v in e.outvars} | unknown_vars
    residuals, seen = [], set()
    for e in staged.eqns:
        for v in e.invars:
            if type(v) is Var and v not in defined and v not in seen:
                assert v in saved, "a recomputed value depends on an unsaved one"
                seen.add(v)
                residuals.append(v)
    for v in staged_outs:  # a known value passed straight through to an unknown output
        if v not in defined and v not in seen:
            seen.add(v)
            residuals.append(v)
    staged_in = residuals + [v for v, u in zip(j.invars, unknowns) if u]
    staged = ClosedJaxpr(Jaxpr([], staged_in, staged.outvars, staged.eqns), [])
    known_outs = [v for v, u in zip(j.outvars, out_unknowns) if not u]
    known, _ = dce_jaxpr(Jaxpr(j.constvars, known_in, known_outs + residuals, known_eqns))
    return ClosedJaxpr(known, closed.consts), staged, out_unknowns, len(residuals)


def convert_constvars_jaxpr(closed: ClosedJaxpr):
    """Make the consts leading inputs: returns (jaxpr with no constvars, consts)."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr([], j.constvars + j.invars, j.outvars, j.eqns), []), closed.consts


def staging():
    """Whether a jaxpr is being built under the current trace (jit's, or linearize's
    unknowns): what JAX's ``inline=True`` and the samplers' call boundaries ask."""
    t = current_trace()
    while t is not None:
        if isinstance(t, (DynamicJaxprTrace, JaxprTrace)):
            return True
        t = t.parent
    return False
