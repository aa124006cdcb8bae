"""The primitives behind ``custom_jvp``, ``custom_vjp`` and ``linear_call``, their rules,
and the values custom rules are handed (``SymbolicZero``, ``CustomVJPPrimal``).

Initial style: the public wrappers trace the user function to a jaxpr whose
closed-over values become leading operands (``num_consts``), then bind
``custom_jvp_call`` / ``custom_vjp_call``. The user's JVP rule (custom_jvp) and
fwd rule (custom_vjp) are traced lazily, on first use, by memoized functions of which
tangents are symbolic zeros (``symbolic_zeros=True``; otherwise one key): lazily
because such rules usually call the custom function itself. Each interpreter then
has an ordinary primitive rule:

- eval and lowering run the function's jaxpr;
- JVP evaluates the user's JVP jaxpr; for custom_vjp it evaluates the fwd jaxpr and
  emits ``custom_lin``, a primitive linear in the tangents whose transpose calls bwd
  (so reverse mode stays JVP + partial eval + transpose, as in JAX);
- batching batches the function jaxpr now and the rule jaxprs lazily;
- partial eval with unknown inputs inlines the function: non-trivial partial
  evaluation only meets these primitives in tangent code, where the rule is spent.

NB: JAX binds these "final style" (each trace has ``process_custom_*_call``). Initial
style needs no code in the traces; the price is that a *rule* may close over a tracer
of the very trace applying it, which ``_resolve_consts`` unwraps (or rejects).
"""
import dataclasses

from xform.core import dtypes, tree_util
from xform.core.errors import UnexpectedTracerError
from xform.core.jaxpr import eval_jaxpr
from xform.core.trace import (Primitive, check_no_tracers, current_trace, get_aval,
                              set_current_trace)
from xform.interpreters import ad, ad_util, batching, mlir
from xform.interpreters import partial_eval as pe


class LazyJaxpr:
    """A memoized function of hashable arguments (a rule's zero tangents) building a
    jaxpr on first call per argument; printed as ``name`` (JAX prints ``jvp=name``)."""
    __slots__ = ("_make", "_values", "name")

    def __init__(self, make, name):
        self._make = make
        self._values = {}
        self.name = name

    def __call__(self, *key):
        value = self._values.get(key)
        if value is None:
            value = self._values[key] = self._make(*key)
        return value

    def __repr__(self):
        return self.name


class SymbolicZero:
    """A zero tangent (or cotangent) handed to a custom rule defined with
    ``symbolic_zeros=True``: no array, only its type (``aval``, and ``shape``, ``dtype``...
    read through it). Rules may also return one, or ``None`` in bwd, for a zero."""

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return "SymbolicZero"

    def __getattr__(self, name):
        if name == "aval":
            raise AttributeError(name)
        try:
            return getattr(self.aval, name)
        except AttributeError:
            raise AttributeError(f"SymbolicZero has no attribute {name}") from None

    @staticmethod
    def from_primal_value(val):
        return SymbolicZero(get_aval(val).to_tangent_aval())


def zero_from_primal(val, symbolic_zeros=False):
    """Zero tangents for the pytree ``val``: ``SymbolicZero``s, or arrays of zeros."""
    def zero(x):
        aval = get_aval(x).to_tangent_aval()
        return SymbolicZero(aval) if symbolic_zeros else ad_util.zeros_like_aval(aval)
    return tree_util.tree_map(zero, val)


@dataclasses.dataclass(slots=True)
class CustomVJPPrimal:
    """Primal to a ``custom_vjp``'s forward rule when ``symbolic_zeros`` is set:
    ``perturbed`` says whether the value is differentiated."""
    value: object
    perturbed: bool


def to_rule_zero(t, symbolic):
    """An internal tangent handed to a rule: a ``SymbolicZero``, or zeros instantiated
    (weakly typed for a weak primal: its tangent aval is weak, as JAX's)."""
    if type(t) is not ad.Zero:
        return t
    return SymbolicZero(t.aval) if symbolic else ad_util.zeros_like_aval(t.aval)


class CustomVJPException(Exception):
    def __init__(self):
        super().__init__(
            "Detected differentiation of a custom_vjp function with respect to a closed-over "
            "value. That isn't supported because the custom VJP rule only specifies how to "
            "differentiate the custom_vjp function with respect to explicit input "
            "parameters. Try passing the closed-over value into the custom_vjp function as "
            "an argument, and adapting the custom_vjp fwd and bwd rules (or use "
            "closure_convert).")


class CustomJVPClosureError(UnexpectedTracerError):
    def __init__(self):
        Exception.__init__(
            self, "Detected differentiation of a custom_jvp function (or of its JVP rule) "
            "with respect to a closed-over value: the custom rule only says how to "
            "differentiate with respect to explicit arguments. Pass the closed-over value "
            "into the custom_jvp function as an argument instead.")


def _resolve_consts(consts, kind, here=None):
    """Rule closures at the rule level ``here`` (default: the current trace). A tracer of
    the trace applying the rule (whose parent is ``here``) is unwrapped: to its primal for
    ``"jvp"``, to ``(value, batch_dim)`` for ``"batch"``; all else is an unbatched const."""
    here = current_trace() if here is None else here
    vals, dims = [], []
    for c in consts:
        t = getattr(c, "_trace", None)
        mine = t is not None and t._valid and t.parent is here
        if kind == "jvp" and mine and type(c) is ad.JVPTracer:
            if type(c.tangent) is not ad.Zero:
                raise CustomJVPClosureError()
            c = c.primal
        d = batching.not_mapped
        if kind == "batch" and mine and type(c) is batching.BatchTracer:
            c, d = c.val, c.batch_dim
        vals.append(c)
        dims.append(d)
    return vals, dims


def batch_closed(closed, axis_size, in_dims, consts=None):
    """``closed`` on inputs batched at ``in_dims``, every output batched at axis 0."""
    return batching.batch_jaxpr(closed, axis_size, in_dims, True, consts=consts)[0]


def _inline_partial_eval(trace, tracers, params):
    closed = params["call_jaxpr"]
    with set_current_trace(trace):
        return eval_jaxpr(closed.jaxpr, closed.consts, *tracers)


def _call_impl(prim):
    def impl(*args, call_jaxpr, **_):
        check_no_tracers(prim, args)
        return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)
    return impl


def _call_abstract_eval(*avals, call_jaxpr, **_):
    return call_jaxpr.out_avals


def _call_lowering(ctx, *args, call_jaxpr, **_):
    return mlir.jaxpr_subcomp(ctx.module_ctx, call_jaxpr.jaxpr, call_jaxpr.consts, list(args))


def _tangent_or_zero(p, t):
    aval = get_aval(p).to_tangent_aval()
    return ad.Zero(aval) if aval.dtype == dtypes.float0 else t


# ---- custom_jvp_call ----

custom_jvp_call_p = Primitive("custom_jvp_call")
custom_jvp_call_p.multiple_results = True
custom_jvp_call_p.def_impl(_call_impl(custom_jvp_call_p), lazy_kind="inline")
custom_jvp_call_p.def_abstract_eval(_call_abstract_eval)


def _resolved_rule(rule_fun, symbolic_zeros, n):
    """For a batching rule: ``zeros -> (rule_fun(zeros), its consts resolved)``. The rule
    may close over tracers of the applying trace, so without symbolic zeros (one key) it
    is traced now; with them, each key lazily (resolved against the same trace)."""
    here = current_trace()

    def resolved(zeros):
        traced = rule_fun(zeros)   # (jaxpr, out_zeros or num_res)
        return traced, _resolve_consts(traced[0].consts, "batch", here)
    rule = LazyJaxpr(resolved, rule_fun.name)
    if not symbolic_zeros:
        try:
            rule((False,) * n)
        except TypeError as e:  # (a rule whose tangent types are wrong fails only where
            err = e              # it is used, under differentiation, as JAX's)

            def failing(zeros):
                raise err
            return LazyJaxpr(failing, rule_fun.name)
    return rule


def _rule_zeros(tangents, symbolic_zeros):
    """The key of a rule's jaxpr: which tangents it is not passed (symbolic zeros)."""
    return tuple(symbolic_zeros and type(t) is ad.Zero for t in tangents)


def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp_jaxpr_fun, num_consts,
                         symbolic_zeros):
    # The rule ignores the tangents of the leading operands (closure, nondiff arguments).
    if any(type(t) is not ad.Zero for t in tangents[:num_consts]):
        raise CustomJVPClosureError()
    tangents = tangents[num_consts:]
    zeros = _rule_zeros(tangents, symbolic_zeros)
    jvp_closed, out_zeros = jvp_jaxpr_fun(zeros)
    consts, _ = _resolve_consts(jvp_closed.consts, "jvp")
    nz = [ad.instantiate_zeros(t) for t, z in zip(tangents, zeros) if not z]
    outs = eval_jaxpr(jvp_closed.jaxpr, consts, *primals, *nz)
    n = len(out_zeros)
    t_out = iter(outs[n:])
    return outs[:n], [ad.Zero.from_primal_value(p) if z else _tangent_or_zero(p, next(t_out))
                      for p, z in zip(outs[:n], out_zeros)]


def _custom_jvp_call_batch(vals, dims, *, call_jaxpr, jvp_jaxpr_fun, num_consts,
                           symbolic_zeros):
    size = batching.axis_size_of(vals, dims)
    call_b = batch_closed(call_jaxpr, size, dims)
    rule = _resolved_rule(jvp_jaxpr_fun, symbolic_zeros, len(vals) - num_consts)

    def jvp_b(zeros):
        (jvp_closed, out_zeros), consts = rule(zeros)
        t_dims = [d for d, z in zip(dims[num_consts:], zeros) if not z]
        return batch_closed(jvp_closed, size, list(dims) + t_dims, consts), out_zeros
    jvp_b = LazyJaxpr(jvp_b, jvp_jaxpr_fun.name)
    outs = custom_jvp_call_p.bind(*vals, call_jaxpr=call_b, jvp_jaxpr_fun=jvp_b,
                                  num_consts=num_consts, symbolic_zeros=symbolic_zeros)
    return outs, [0] * len(outs)


ad.primitive_jvps[custom_jvp_call_p] = _custom_jvp_call_jvp
batching.primitive_batchers[custom_jvp_call_p] = _custom_jvp_call_batch
pe.partial_eval_rules[custom_jvp_call_p] = _inline_partial_eval
mlir.register_lowering(custom_jvp_call_p, _call_lowering)


# ---- custom_vjp_call ----

custom_vjp_call_p = Primitive("custom_vjp_call")
custom_vjp_call_p.multiple_results = True
custom_vjp_call_p.def_impl(_call_impl(custom_vjp_call_p), lazy_kind="inline")
custom_vjp_call_p.def_abstract_eval(_call_abstract_eval)


def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, fwd_jaxpr_fun, bwd, num_consts,
                         symbolic_zeros):
    if any(type(t) is not ad.Zero for t in tangents[:num_consts]):
        raise CustomVJPException()
    tangents = tangents[num_consts:]
    fwd, num_res = fwd_jaxpr_fun(_rule_zeros(tangents, symbolic_zeros))
    consts, _ = _resolve_consts(fwd.consts, "jvp")
    outs = eval_jaxpr(fwd.jaxpr, consts, *primals)
    res, primals_out = outs[:num_res], outs[num_res:]
    in_zeros = tuple(type(t) is ad.Zero for t in tangents)
    out_avals = tuple(get_aval(p).to_tangent_aval() for p in primals_out)
    tangents_out = custom_lin_p.bind(*res, *[t for t in tangents if type(t) is not ad.Zero],
                                     num_res=num_res, bwd=bwd, out_avals=out_avals,
                                     in_zeros=in_zeros)
    return primals_out, [_tangent_or_zero(p, t) for p, t in zip(primals_out, tangents_out)]


class BatchedBwd:
    """``bwd`` for a batched custom_vjp_call: residuals and output cotangents arrive batched
    at axis 0; input cotangents leave at the inputs' batch dims (summed where unbatched)."""

    def __init__(self, bwd, axis_size, in_dims):
        self.bwd = bwd
        self.axis_size = axis_size
        self.in_dims = in_dims

    def __call__(self, res, cts):
        zeros = []
        nz_cts = [c for c in cts if type(c) is not ad.Zero]

        def per_example(*xs):
            it = iter(xs[len(res):])
            cts_ = [ad.Zero(c.aval.update(shape=c.aval.shape[1:])) if type(c) is ad.Zero
                    else next(it) for c in cts]
            out = self.bwd(list(xs[:len(res)]), cts_)
            zeros[:] = [c if type(c) is ad.Zero else None for c in out]
            return [c for c in out if type(c) is not ad.Zero]

        n = len(res) + len(nz_cts)
        nz = iter(batching.batch_flat(per_example, self.axis_size, list(res) + nz_cts,
                                      [0] * n, lambda avals: [0] * len(avals)))
        out = []
        for z, d in zip(zeros, self.in_dims):
            if z is not None:
                if d is not batching.not_mapped:
                    shape = list(z.aval.shape)
                    shape.insert(d, self.axis_size)
                    z = ad.Zero(z.aval.update(shape=tuple(shape)))
                out.append(z)
            elif d is batching.not_mapped:
                out.append(ad_util.reduce_sum(next(nz), (0,)))
            else:
                out.append(batching.moveaxis(next(nz), 0, d))
        return out

    def __repr__(self):
        return repr(self.bwd)


def _custom_vjp_call_batch(vals, dims, *, call_jaxpr, fwd_jaxpr_fun, bwd, num_consts,
                           symbolic_zeros):
    size = batching.axis_size_of(vals, dims)
    call_b = batch_closed(call_jaxpr, size, dims)
    rule = _resolved_rule(fwd_jaxpr_fun, symbolic_zeros, len(vals) - num_consts)

    def fwd_b(zeros):
        (fwd, num_res), consts = rule(zeros)
        return batch_closed(fwd, size, dims, consts), num_res
    fwd_b = LazyJaxpr(fwd_b, fwd_jaxpr_fun.name)
    outs = custom_vjp_call_p.bind(*vals, call_jaxpr=call_b, fwd_jaxpr_fun=fwd_b,
                                  bwd=BatchedBwd(bwd, size, dims[num_consts:]), num_consts=num_consts,
                                  symbolic_zeros=symbolic_zeros)
    return outs, [0] * len(outs)


ad.primitive_jvps[custom_vjp_call_p] = _custom_vjp_call_jvp
batching.primitive_batchers[custom_vjp_call_p] = _custom_vjp_call_batch
pe.partial_eval_rules[custom_vjp_call_p] = _inline_partial_eval
mlir.register_lowering(custom_vjp_call_p, _call_lowering)


# ---- custom_lin: the tangent of a custom_vjp_call, linear in the tangents ----

custom_lin_p = Primitive("custom_lin")
custom_lin_p.multiple_results = True


def _raise_custom_vjp_error_on_jvp(*_, **__):
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


def _custom_lin_abstract_eval(*avals, num_res, bwd, out_avals, in_zeros):
    return list(out_avals)


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals, in_zeros):
    cts_in = bwd(list(args[:num_res]), list(cts))  # zeros: bwd instantiates (or not)
    nz = [c for c, z in zip(cts_in, in_zeros) if not z]
    return [None] * num_res + [None if type(c) is ad.Zero else c for c in nz]


# Concrete tangents reaching custom_lin mean forward mode (jvp, jacfwd, linearize's f_jvp).
custom_lin_p.def_impl(_raise_custom_vjp_error_on_jvp, lazy_kind="inline")
custom_lin_p.def_abstract_eval(_custom_lin_abstract_eval)
ad.primitive_jvps[custom_lin_p] = _raise_custom_vjp_error_on_jvp
ad.primitive_transposes[custom_lin_p] = _custom_lin_transpose
ad.transpose_on_zero.add(custom_lin_p)
batching.primitive_batchers[custom_lin_p] = _raise_custom_vjp_error_on_jvp
mlir.register_lowering(custom_lin_p, _raise_custom_vjp_error_on_jvp)


# ---- linear_call: a linear function with a user-defined transpose ----
# ``callee`` (closure first: ``num_callee_consts`` operands, then ``num_res`` residuals, then
# the linear operands) is linear in the last operands; ``transpose_thunk()`` gives the
# transpose's ``(jaxpr, consts)``, traced lazily. The transpose of a ``linear_call`` is a
# ``linear_call`` of the transpose, whose own transpose is ``callee`` again.

linear_call_p = Primitive("linear_call")
linear_call_p.multiple_results = True


def _linear_call_impl(*args, callee, transpose_thunk, num_callee_consts, num_res):
    check_no_tracers(linear_call_p, args)
    return eval_jaxpr(callee.jaxpr, callee.consts, *args)


def _linear_call_jvp(primals, tangents, *, callee, transpose_thunk, num_callee_consts,
                     num_res):
    k = num_callee_consts + num_res
    if any(type(t) is not ad.Zero for t in tangents[:k]):
        raise TypeError("linear_call: differentiation with respect to residual_args (or "
                        "values fun closes over) is not supported; fun must be linear in "
                        "linear_args only")
    params = dict(callee=callee, transpose_thunk=transpose_thunk,
                  num_callee_consts=num_callee_consts, num_res=num_res)
    out = linear_call_p.bind(*primals, **params)
    t_out = linear_call_p.bind(*primals[:k], *map(ad.instantiate_zeros, tangents[k:]),
                               **params)
    return out, t_out


def _linear_call_transpose(cts, *args, callee, transpose_thunk, num_callee_consts, num_res):
    transpose, t_consts = transpose_thunk()
    f_consts = list(args[:num_callee_consts])
    res = args[num_callee_consts:num_callee_consts + num_res]
    back = LazyJaxpr(lambda: (callee, f_consts), repr(transpose_thunk) + "_transpose")
    cts_out = linear_call_p.bind(*t_consts, *res, *map(ad.instantiate_zeros, cts),
                                 callee=transpose, transpose_thunk=back,
                                 num_callee_consts=len(t_consts), num_res=num_res)
    return [None] * (num_callee_consts + num_res) + list(cts_out)


def _linear_call_batch(vals, dims, *, callee, transpose_thunk, num_callee_consts, num_res):
    # Linear operands are batched at 0, broadcast if need be, so the transpose's outputs
    # (batched at 0) match them.
    size = batching.axis_size_of(vals, dims)
    k = num_callee_consts + num_res
    vals = [batching.moveaxis(v, d, 0) if d is not batching.not_mapped else v
            for v, d in zip(vals[:k], dims[:k])] + [
        batching.bdim_at_front(v, d, size) for v, d in zip(vals[k:], dims[k:])]
    dims = [batching.not_mapped if d is batching.not_mapped else 0 for d in dims[:k]]
    dims += [0] * (len(vals) - k)
    res_dims = dims[num_callee_consts:k]

    def transpose_b():
        t, t_consts = transpose_thunk()
        t_dims = [batching.not_mapped] * len(t_consts) + res_dims + [0] * len(callee.out_avals)
        return batch_closed(t, size, t_dims), t_consts
    outs = linear_call_p.bind(*vals, callee=batch_closed(callee, size, dims),
                              transpose_thunk=LazyJaxpr(transpose_b, repr(transpose_thunk)),
                              num_callee_consts=num_callee_consts, num_res=num_res)
    return outs, [0] * len(outs)


linear_call_p.def_impl(_linear_call_impl, lazy_kind="inline")
linear_call_p.def_abstract_eval(lambda *avals, callee, **_: callee.out_avals)
ad.primitive_jvps[linear_call_p] = _linear_call_jvp
ad.primitive_transposes[linear_call_p] = _linear_call_transpose
batching.primitive_batchers[linear_call_p] = _linear_call_batch
mlir.register_lowering(linear_call_p, lambda ctx, *args, callee, **_: _call_lowering(
    ctx, *args, call_jaxpr=callee))
