"""The primitive behind ``custom_vmap`` and its rules.

``custom_vmap_call`` carries the function's jaxpr (``call``; closed-over values are
leading operands) and a flat ``rule(axis_size, batched, vals) -> (outs, outs_batched)``
over all operands, which the public wrapper builds from the user's rule:

- eval, lowering and partial eval run (inline) ``call``: outside vmap the rule is unused;
- batching calls ``rule`` with every batched operand's batch axis moved to the front;
- JVP binds ``custom_vmap_call`` again on (primals, tangents) with the JVP of ``call`` and
  ``JVPOfRule``, the rule's JVP: the rule batches what primal and tangent share, an inner
  vmap the rest (JAX's ``jvp_of_rule_rule``).

NB: JAX has no partial-eval rule, so ``grad`` of a custom_vmap function fails there
("Linearization failed..."); xform inlines ``call`` under partial evaluation, so reverse
mode differentiates the underlying function, as forward mode already does in both.
"""
from xform.core import dtypes
from xform.core.jaxpr import eval_jaxpr
from xform.core.trace import (Primitive, check_no_tracers, current_trace, get_aval,
                              set_current_trace)
from xform.interpreters import ad, ad_util, batching, mlir
from xform.interpreters import partial_eval as pe
from xform.interpreters.custom import _call_lowering, _inline_partial_eval

not_mapped = batching.not_mapped

custom_vmap_p = Primitive("custom_vmap_call")
custom_vmap_p.multiple_results = True


def _custom_vmap_impl(*args, call, rule):
    check_no_tracers(custom_vmap_p, args)
    return eval_jaxpr(call.jaxpr, call.consts, *args)


custom_vmap_p.def_impl(_custom_vmap_impl, lazy_kind="inline")
custom_vmap_p.def_abstract_eval(lambda *avals, call, rule: call.out_avals)


def _front(x, d):
    return x if d is not_mapped else batching.moveaxis(x, d, 0)


def _custom_vmap_batch(vals, dims, *, call, rule):
    size = batching.axis_size_of(vals, dims)
    outs, out_batched = rule(size, [d is not not_mapped for d in dims],
                             [_front(v, d) for v, d in zip(vals, dims)])
    for i, (o, b, aval) in enumerate(zip(outs, out_batched, call.out_avals)):
        want = ((size,) if b else ()) + aval.shape
        got = get_aval(o).shape
        if got != want:
            raise ValueError(
                f"custom vmap rule ({rule}) returned output {i} of shape {got} marked "
                f"{'batched' if b else 'unbatched'}, but the custom_vmap function's output "
                f"has shape {aval.shape} (so {want} was expected, with axis size {size})")
    return list(outs), [0 if b else not_mapped for b in out_batched]


def _vmap_unrestricted(fun, axis_size, vals, in_dims):
    """``fun`` (flat) batched over ``in_dims``; outputs with the batch dims they come out
    at (``not_mapped`` where none), as JAX's ``vmap_unrestricted``."""
    trace = batching.BatchTrace(current_trace(), axis_size)
    args = [v if d is not_mapped else batching.BatchTracer(trace, v, d)
            for v, d in zip(vals, in_dims)]
    try:
        with set_current_trace(trace):
            outs = [trace.lift(o) for o in fun(*args)]
    finally:
        trace.invalidate()
    return [o.val for o in outs], [o.batch_dim for o in outs]


class JVPOfRule:
    """The batching rule of a JVP'd ``custom_vmap_call``: operands are the primals, then
    the tangents of those with ``in_nz``; outputs the primals, then the tangents of those
    with ``out_nz``. The user's rule sees the primals batched where the primal and its
    tangent both are; an inner vmap adds whichever of the two alone is batched."""

    def __init__(self, rule, in_nz, out_nz):
        self.rule, self.in_nz, self.out_nz = rule, list(in_nz), list(out_nz)

    def __repr__(self):
        return repr(self.rule)

    def __call__(self, axis_size, batched, vals):
        n = len(self.in_nz)
        bt_nz = iter(batched[n:])
        bp = batched[:n]
        bt = [next(bt_nz) if nz else False for nz in self.in_nz]
        mutual = [p and t for p, t in zip(bp, bt)]  # no tangent: an unbatched zero
        store = []

        def to_jvp(*primals):
            outs, out_b = self.rule(axis_size, mutual, list(primals))
            store.append(list(out_b))
            return outs

        def jvp(*ps_ts):
            ts = iter(ps_ts[n:])
            tangents = [next(ts) if nz else ad_util.Zero.from_primal_value(p)
                        for p, nz in zip(ps_ts[:n], self.in_nz)]
            outs, t_outs = ad.jvp_flat(to_jvp, list(ps_ts[:n]), tangents)
            return list(outs) + [ad_util.instantiate_zeros(t)
                                 for t, nz in zip(t_outs, self.out_nz) if nz]

        extra = [0 if p and not m else not_mapped for p, m in zip(bp, mutual)]
        extra += [0 if t and not p else not_mapped
                  for p, t, nz in zip(bp, bt, self.in_nz) if nz]
        outs, dims = _vmap_unrestricted(jvp, axis_size, vals, extra)
        out_b = store[0]
        out_b += [b for b, nz in zip(out_b, self.out_nz) if nz]
        return ([_front(o, d) for o, d in zip(outs, dims)],
                [b or d is not not_mapped for b, d in zip(out_b, dims)])


def _custom_vmap_jvp(primals, tangents, *, call, rule):
    in_nz = [type(t) is not ad_util.Zero for t in tangents]
    inst = [a.to_tangent_aval().dtype != dtypes.float0 for a in call.out_avals]
    jvp_call, out_nz = ad.jvp_jaxpr(call, in_nz, inst)
    nz_tangents = [t for t in tangents if type(t) is not ad_util.Zero]
    outs = custom_vmap_p.bind(*primals, *nz_tangents, call=jvp_call,
                              rule=JVPOfRule(rule, in_nz, out_nz))
    m = len(call.out_avals)
    t_out = iter(outs[m:])
    return outs[:m], [next(t_out) if nz else ad_util.Zero(a.to_tangent_aval())
                      for a, nz in zip(call.out_avals, out_nz)]


def _inline(trace, tracers, params):
    return _inline_partial_eval(trace, tracers, {"call_jaxpr": params["call"]})


def _lowering(ctx, *args, call, rule):
    return _call_lowering(ctx, *args, call_jaxpr=call)


batching.primitive_batchers[custom_vmap_p] = _custom_vmap_batch
ad.primitive_jvps[custom_vmap_p] = _custom_vmap_jvp
pe.partial_eval_rules[custom_vmap_p] = _inline
mlir.register_lowering(custom_vmap_p, _lowering)
