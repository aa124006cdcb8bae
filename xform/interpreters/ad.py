"""Forward mode (JVPTrace), linearize, and transposition of linear jaxprs.

Reverse mode is not a tape: ``vjp`` = JVP under partial evaluation with unknown
tangents (giving a linear jaxpr plus residuals), then ``backward_pass`` runs that
jaxpr backwards with each linear primitive's transpose rule. Tangents and
cotangents may be the symbolic ``Zero``, which rules skip.
"""
from xform.core import dtypes, source_info_util
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, Var, compute_type_context
from xform.core.trace import (Trace, Tracer, current_trace, get_aval, set_current_trace,
                              to_concrete_value)
from xform.interpreters import partial_eval as pe
from xform.interpreters.ad_util import (Zero, add_tangents, instantiate_zeros,  # noqa: F401
                                        zeros_like_aval)

primitive_jvps = {}
primitive_transposes = {}
# Operands a primitive with a transpose rule is *not* linear in: a slice of positions
# (a predicate, indices, a divisor) or "both" for a bilinear primitive (mul, dot).
nonlinear_operands = {}


class UndefinedPrimal:
    """Marks a linear input of an equation during transposition."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x):
    return type(x) is UndefinedPrimal


# ---- registrars ----

def defjvp(prim, *jvprules):
    """JVP from one rule per argument: ``rule(t, *primals, **params)`` gives that
    argument's contribution; ``None`` for arguments that don't affect the output."""
    def jvp(primals, tangents, **params):
        primal_out = prim.bind(*primals, **params)
        out = Zero(get_aval(primal_out).to_tangent_aval())
        for rule, t in zip(jvprules, tangents):
            if rule is not None and type(t) is not Zero:
                out = add_tangents(out, rule(t, *primals, **params))
        return primal_out, out
    primitive_jvps[prim] = jvp


def defjvp2(prim, *jvprules):
    """Like defjvp, but each rule also gets the output: ``rule(t, ans, *primals)``."""
    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        out = Zero(get_aval(ans).to_tangent_aval())
        for rule, t in zip(jvprules, tangents):
            if rule is not None and type(t) is not Zero:
                out = add_tangents(out, rule(t, ans, *primals, **params))
        return ans, out
    primitive_jvps[prim] = jvp


def deflinear(prim, transpose_rule):
    """A primitive linear in all its inputs: its JVP applies it to the tangents.
    ``transpose_rule(ct, *args, **params)`` returns the input cotangents (args are
    ``UndefinedPrimal``s carrying the operands' avals)."""
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            if prim.multiple_results:
                return out, [Zero(get_aval(o).to_tangent_aval()) for o in out]
            return out, Zero(get_aval(out).to_tangent_aval())
        return out, prim.bind(*map(instantiate_zeros, tangents), **params)

    # A symbolic-zero tangent operand reaches the linear jaxpr as a known zeros array,
    # so transposition sees that operand as non-linear. The primitive is linear in every
    # operand, so its value is only an additive offset: the other operands' cotangents do
    # not depend on it. The rule therefore always sees every operand as linear (it never
    # needs to special-case a known one); cotangents of known operands are dropped.
    def transpose(ct, *args, **params):
        undefined = [is_undefined_primal(a) for a in args]
        if type(ct) is Zero or (prim.multiple_results and all(type(c) is Zero for c in ct)):
            return [Zero(a.aval) if u else None for a, u in zip(args, undefined)]
        if prim.multiple_results:
            ct = [instantiate_zeros(c) for c in ct]
        lin_args = [a if u else UndefinedPrimal(get_aval(a).to_tangent_aval())
                    for a, u in zip(args, undefined)]
        cts = transpose_rule(ct, *lin_args, **params)
        return [c if u else None for c, u in zip(cts, undefined)]
    primitive_jvps[prim] = jvp
    primitive_transposes[prim] = transpose


def defbilinear(prim, lhs_rule, rhs_rule):
    """A primitive linear in each of two arguments separately (mul, dot_general).
    ``lhs_rule(ct, x, y, **params)`` is the cotangent of x when x is the linear one."""
    def jvp(primals, tangents, **params):
        x, y = primals
        tx, ty = tangents
        out = prim.bind(x, y, **params)
        t = Zero(get_aval(out).to_tangent_aval())
        if type(tx) is not Zero:
            t = add_tangents(t, prim.bind(tx, y, **params))
        if type(ty) is not Zero:
            t = add_tangents(t, prim.bind(x, ty, **params))
        return out, t

    def transpose(ct, x, y, **params):
        if is_undefined_primal(x):
            return [lhs_rule(ct, x, y, **params), None]
        return [None, rhs_rule(ct, x, y, **params)]
    primitive_jvps[prim] = jvp
    primitive_transposes[prim] = transpose
    nonlinear_operands[prim] = "both"


def defnonlinear_operands(prim, positions):
    """Declare which operands ``prim``'s transpose rule needs known: ``positions`` is a
    slice of operand positions, or "both" for a primitive linear in each of two operands
    separately. A linear input reaching them makes ``backward_pass`` raise (as JAX's
    rules assert) instead of the rule computing garbage."""
    nonlinear_operands[prim] = positions


def _check_linear(eqn, args):
    spec = nonlinear_operands.get(eqn.primitive)
    if spec is None:
        return
    undefined = [is_undefined_primal(a) for a in args]
    if spec == "both":
        if not all(undefined):
            return
        what = "both its operands"
    else:
        bad = [i for i in range(len(args))[spec] if undefined[i]]
        if not bad:
            return
        what = f"its operand(s) at position(s) {bad}"
    raise AssertionError(
        f"Cannot transpose '{eqn.primitive.name}': {what} depend on the inputs being "
        "transposed, so the function is not linear in them (e.g. x * x, y / x, "
        "where(x > 0, x, 0)); linear_transpose needs a function linear in its inputs.")


def defnondiff(prim):
    """Outputs don't depend differentiably on inputs (comparisons, argmax, iota...)."""
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if prim.multiple_results:
            return out, [Zero(get_aval(o).to_tangent_aval()) for o in out]
        return out, Zero(get_aval(out).to_tangent_aval())
    primitive_jvps[prim] = jvp


# ---- JVP trace ----

class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    def to_concrete_value(self):
        return to_concrete_value(self.primal)


class JVPTrace(Trace):
    __slots__ = ()

    def lift(self, x):
        if type(x) is JVPTracer and x._trace is self:
            return x
        pe._check_leak(x)
        return JVPTracer(self, x, Zero.from_primal_value(x))

    def process_primitive(self, prim, args, params):
        tracers = [self.lift(x) for x in args]
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents):
            with set_current_trace(self.parent):
                return prim.bind(*primals, **params)
        rule = primitive_jvps.get(prim)
        if rule is None:
            raise NotImplementedError(f"Differentiation rule for '{prim.name}' not implemented")
        with set_current_trace(self.parent):
            primal_out, tangent_out = rule(primals, tangents, **params)
        if prim.multiple_results:
            return [JVPTracer(self, p, t) for p, t in zip(primal_out, tangent_out)]
        return JVPTracer(self, primal_out, tangent_out)


def jvp_flat(fun, primals, tangents):
    """Run ``fun`` (flat in, flat out) on (primal, tangent) pairs.
    Returns (primals_out, tangents_out), tangents possibly ``Zero``."""
    trace = JVPTrace(parent=current_trace())
    args = [JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
    try:
        with set_current_trace(trace):
            outs = fun(*args)
        outs = [trace.lift(o) for o in outs]
        return [o.primal for o in outs], [o.tangent for o in outs]
    finally:
        trace.invalidate()


# ---- linearize and transpose ----

def linearize_flat(fun, primals):
    """JVP under partial evaluation: returns ``(primals_out, linear, residuals)`` where
    ``linear`` is a Jaxpr taking residuals as constvars and tangents as invars."""
    pe_trace = pe.JaxprTrace(parent=current_trace())
    tangents_in = [pe_trace.new_unknown(get_aval(p).to_tangent_aval()) for p in primals]
    # Integer/bool primals have float0 tangents: symbolically zero (no rule sees them);
    # their jaxpr inputs stay, unused, so the linear jaxpr takes one tangent per primal.
    jvp_tangents = [Zero(t.aval) if t.aval.dtype == dtypes.float0 else t
                    for t in tangents_in]
    try:
        with set_current_trace(pe_trace):
            primals_out, tangents_out = jvp_flat(fun, primals, jvp_tangents)
        primals_out = [pe_trace.lift(p) for p in primals_out]
        if any(p.jvar is not None for p in primals_out):
            raise AssertionError("primal output depends on tangents (internal error)")
        with set_current_trace(pe_trace):
            tangents_out = [pe_trace.lift(instantiate_zeros(t)) for t in tangents_out]
        linear, residuals = pe_trace.build(tangents_in, tangents_out)
        return [p.value for p in primals_out], linear, residuals
    finally:
        pe_trace.invalidate()


# Primitives transposed even when all their output cotangents are zero, as JAX does: a
# custom_vjp's bwd (custom_lin) may give non-zero cotangents for zero ones (Flax's fp8
# ops hand back updated scales that way). Filled by the layer that owns each.
transpose_on_zero = set()


def backward_pass(jaxpr: Jaxpr, consts, linear_avals, cts_out):
    """Transpose ``jaxpr`` (linear in its invars; constvars bound to ``consts``).

    ``cts_out`` are cotangents of the outputs (values or ``Zero``); returns the
    cotangents of the invars (values or ``Zero``). Non-linear equations (those not
    touching a linear input) are evaluated forward first.
    """
    env = dict(zip(jaxpr.constvars, consts, strict=True))
    linear = set(jaxpr.invars)
    lin_eqns = []
    for eqn in jaxpr.eqns:
        if any(type(v) is Var and v in linear for v in eqn.invars):
            linear.update(eqn.outvars)
            lin_eqns.append(eqn)
        else:
            vals = [v.val if type(v) is Literal else env[v] for v in eqn.invars]
            with compute_type_context(eqn.compute_type):
                outs = eqn.primitive.bind(*vals, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            env.update(zip(eqn.outvars, outs))

    ct_env = {}

    def add_ct(v, ct):
        if type(v) is Var and v in linear and type(ct) is not Zero and ct is not None:
            ct_env[v] = add_tangents(ct_env[v], ct) if v in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out, strict=True):
        add_ct(v, ct)
    for eqn in reversed(lin_eqns):
        cts = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(ct is None for ct in cts) and eqn.primitive not in transpose_on_zero:
            continue
        rule = primitive_transposes.get(eqn.primitive)
        if rule is None:
            e = NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for "
                                    f"'{eqn.primitive.name}' not implemented")
            source_info_util.annotate(e, eqn)
            raise e
        args = [UndefinedPrimal(v.aval) if type(v) is Var and v in linear
                else (v.val if type(v) is Literal else env[v]) for v in eqn.invars]
        if eqn.primitive.multiple_results:
            ct = [Zero(v.aval) if c is None else c for v, c in zip(eqn.outvars, cts)]
        else:
            ct = cts[0]
        try:
            _check_linear(eqn, args)
            with source_info_util.source_context(eqn.source), \
                    compute_type_context(eqn.compute_type):
                cts_in = rule(ct, *args, **eqn.params)
        except Exception as e:
            source_info_util.annotate(e, eqn)
            raise
        with compute_type_context(eqn.compute_type):   # (its cotangents' sums too)
            for v, c in zip(eqn.invars, cts_in, strict=True):
                add_ct(v, c)
    return [ct_env.get(v, Zero(a)) for v, a in zip(jaxpr.invars, linear_avals, strict=True)]


# ---- jaxpr-to-jaxpr transformations used by higher-order primitives ----

def jvp_jaxpr(closed: ClosedJaxpr, nonzeros, instantiate):
    """A jaxpr computing (primals_out, nonzero tangents_out) from (primals, nonzero
    tangents). Returns (jaxpr, out_nonzeros)."""
    n = len(closed.in_avals)
    tangent_avals = [a.to_tangent_aval() for a, nz in zip(closed.in_avals, nonzeros) if nz]
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(closed.out_avals)
    result = {}

    def fun(*args):
        primals, tangents_nz = args[:n], iter(args[n:])
        tangents = [next(tangents_nz) if nz else Zero(a.to_tangent_aval())
                    for a, nz in zip(closed.in_avals, nonzeros)]
        outs, touts = jvp_flat(closed, primals, tangents)
        touts = [instantiate_zeros(t) if inst else t for t, inst in zip(touts, instantiate)]
        result["out_nonzeros"] = [type(t) is not Zero for t in touts]
        return list(outs) + [t for t in touts if type(t) is not Zero]

    jaxpr = pe.trace_to_jaxpr(fun, list(closed.in_avals) + tangent_avals)
    return jaxpr, result["out_nonzeros"]


def transpose_jaxpr(closed: ClosedJaxpr, linear_mask, ct_avals=None):
    """A jaxpr mapping (non-linear inputs, output cotangents) to the cotangents of the
    linear inputs (instantiated as zeros where symbolic). ``ct_avals``, where given,
    type the cotangent inputs (their weak types flow through, as in JAX)."""
    lin_avals = [a for a, lin in zip(closed.in_avals, linear_mask) if lin]
    res_avals = [a for a, lin in zip(closed.in_avals, linear_mask) if not lin]
    n_res = len(res_avals)

    def fun(*args):
        res, cts = iter(args[:n_res]), args[n_res:]
        # Partially evaluate with the linear inputs unknown: what remains is linear in them.
        known, unknown, _, num_res = pe.partial_eval_jaxpr(
            closed, linear_mask, instantiate=True)
        res_vals = list(res)
        residuals = known(*res_vals)[-num_res:] if num_res else []
        lin = unknown.jaxpr
        jaxpr = Jaxpr(lin.invars[:num_res], lin.invars[num_res:], lin.outvars, lin.eqns)
        out = backward_pass(jaxpr, residuals, lin_avals, list(cts))
        return [instantiate_zeros(c) for c in out]

    out_ct_avals = ct_avals or [a.to_tangent_aval() for a in closed.out_avals]
    return pe.trace_to_jaxpr(fun, res_avals + list(out_ct_avals))

