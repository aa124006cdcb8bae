"""The primitives behind ``custom_jvp`` and ``custom_vjp``, and their rules.

Initial style: the public wrappers trace the user function to a jaxpr whose
closed-over values become leading operands (``num_consts``), then bind
``custom_jvp_call`` / ``custom_vjp_call``. The user's JVP rule (custom_jvp) and
fwd rule (custom_vjp) are traced lazily, on first use, by memoized thunks: lazily
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
from xform.core import dtypes
from xform.core.errors import UnexpectedTracerError
from xform.core.jaxpr import eval_jaxpr
from xform.core.trace import (Primitive, check_no_tracers, current_trace, get_aval,
                              set_current_trace)
from xform.interpreters import ad, ad_util, batching, mlir
from xform.interpreters import partial_eval as pe


class LazyJaxpr:
    """A memoized thunk building a jaxpr on first call; printed as ``name`` (JAX prints
    ``jvp=name`` the same way)."""
    __slots__ = ("_make", "_value", "name")

    def __init__(self, make, name):
        self._make = make
        self._value = None
        self.name = name

    def __call__(self):
        if self._value is None:
            self._value = self._make()
        return self._value

    def __repr__(self):
        return self.name


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


def _resolve_consts(consts, kind):
    """Rule closures at the current (rule) level. A tracer of the trace applying the rule
    (the one whose parent is current) is unwrapped: to its primal for ``"jvp"``, to
    ``(value, batch_dim)`` for ``"batch"``; everything else is an unbatched constant."""
    here = current_trace()
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


def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp_jaxpr_fun, num_consts,
                         symbolic_zeros):
    if any(type(t) is not ad.Zero for t in tangents[:num_consts]):
        raise CustomJVPClosureError()
    jvp_closed = jvp_jaxpr_fun()
    consts, _ = _resolve_consts(jvp_closed.consts, "jvp")
    # The rule ignores the tangents of the leading operands (closure, nondiff arguments).
    tangents = tangents[:num_consts] + [ad.instantiate_zeros(t) for t in tangents[num_consts:]]
    outs = eval_jaxpr(jvp_closed.jaxpr, consts, *primals, *tangents)
    n = len(outs) // 2
    return outs[:n], [_tangent_or_zero(p, t) for p, t in zip(outs[:n], outs[n:])]


def _custom_jvp_call_batch(vals, dims, *, call_jaxpr, jvp_jaxpr_fun, num_consts,
                           symbolic_zeros):
    size = batching.axis_size_of(vals, dims)
    call_b = batch_closed(call_jaxpr, size, dims)
    jvp_closed = jvp_jaxpr_fun()  # now: it may close over tracers of the applying trace
    consts = _resolve_consts(jvp_closed.consts, "batch")
    jvp_b = LazyJaxpr(lambda: batch_closed(jvp_closed, size, list(dims) * 2, consts),
                      jvp_jaxpr_fun.name)
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
    fwd, num_res = fwd_jaxpr_fun()
    consts, _ = _resolve_consts(fwd.consts, "jvp")
    outs = eval_jaxpr(fwd.jaxpr, consts, *primals)
    res, primals_out = outs[:num_res], outs[num_res:]
    tangents = tangents[num_consts:]
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

        def per_example(*xs):
            out = self.bwd(list(xs[:len(res)]), list(xs[len(res):]))
            zeros[:] = [c if type(c) is ad.Zero else None for c in out]
            return [c for c in out if type(c) is not ad.Zero]

        n = len(res) + len(cts)
        nz = iter(batching.batch_flat(per_example, self.axis_size, list(res) + list(cts),
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
    fwd, num_res = fwd_jaxpr_fun()
    consts = _resolve_consts(fwd.consts, "batch")
    fwd_b = LazyJaxpr(lambda: (batch_closed(fwd, size, dims, consts), num_res),
                      fwd_jaxpr_fun.name)
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
    cts_in = bwd(list(args[:num_res]), [ad.instantiate_zeros(c) for c in cts])
    nz = [c for c, z in zip(cts_in, in_zeros) if not z]
    return [None] * num_res + [None if type(c) is ad.Zero else c for c in nz]


# Concrete tangents reaching custom_lin mean forward mode (jvp, jacfwd, linearize's f_jvp).
custom_lin_p.def_impl(_raise_custom_vjp_error_on_jvp, lazy_kind="inline")
custom_lin_p.def_abstract_eval(_custom_lin_abstract_eval)
ad.primitive_jvps[custom_lin_p] = _raise_custom_vjp_error_on_jvp
ad.primitive_transposes[custom_lin_p] = _custom_lin_transpose
batching.primitive_batchers[custom_lin_p] = _raise_custom_vjp_error_on_jvp
mlir.register_lowering(custom_lin_p, _raise_custom_vjp_error_on_jvp)
