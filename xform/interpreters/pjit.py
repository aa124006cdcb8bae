"""The ``pjit`` call primitive: what ``jit`` binds under other transformations.

Its ``jaxpr`` param is a ClosedJaxpr; each interpreter transforms that jaxpr
(JVP, partial evaluation, transposition, batching) and binds a new ``pjit``, so
``grad(jit(f))`` and ``vmap(jit(f))`` stay compiled calls. Derived jaxprs are
memoized per source jaxpr so repeated calls reuse compiled executables.
"""
import collections

from xform.core.config import config
from xform.core.jaxpr import ClosedJaxpr
from xform.core.trace import Primitive, set_current_trace
from xform.interpreters import ad, batching, dispatch, mlir
from xform.interpreters import partial_eval as pe


class _IdCache:
    """LRU cache keyed on object identity (+ hashable extras), holding the objects alive
    so an ``id`` is never reused while its entry exists."""

    def __init__(self, maxsize=512):
        self.data = collections.OrderedDict()
        self.maxsize = maxsize

    def get(self, obj, extra, make):
        key = (id(obj), extra)
        hit = self.data.get(key)
        if hit is not None:
            self.data.move_to_end(key)
            return hit[1]
        value = make()
        self.data[key] = (obj, value)
        if len(self.data) > self.maxsize:
            self.data.popitem(last=False)
        return value


_compiled = _IdCache()
_derived = _IdCache()

pjit_p = Primitive("jit")
pjit_p.multiple_results = True


def pjit_call(closed: ClosedJaxpr, args, name="jit"):
    return pjit_p.bind(*args, jaxpr=closed, name=name)


def _pjit_impl(*args, jaxpr, name):
    compiled = _compiled.get(jaxpr, None,
                             lambda: dispatch.CompiledJaxpr(jaxpr, name=f"jit({name})"))
    return compiled(args)


def _clear_compiled(name, value):
    if name == "jax_debug_nans":  # executables bake the flag in
        _compiled.data.clear()


config._add_listener(_clear_compiled)


def _pjit_abstract_eval(*avals, jaxpr, name):
    return jaxpr.out_avals


pjit_p.def_impl(_pjit_impl)
pjit_p.def_abstract_eval(_pjit_abstract_eval)


def _pjit_jvp(primals, tangents, *, jaxpr, name):
    nonzeros = tuple(type(t) is not ad.Zero for t in tangents)
    jvp_jaxpr, out_nz = _derived.get(jaxpr, ("jvp", nonzeros),
                                     lambda: ad.jvp_jaxpr(jaxpr, nonzeros, False))
    nz_tangents = [t for t in tangents if type(t) is not ad.Zero]
    outs = pjit_p.bind(*primals, *nz_tangents, jaxpr=jvp_jaxpr, name=f"jvp({name})")
    n = len(jaxpr.out_avals)
    primals_out, nz_out = outs[:n], iter(outs[n:])
    tangents_out = [next(nz_out) if nz else ad.Zero(a.to_tangent_aval())
                    for nz, a in zip(out_nz, jaxpr.out_avals)]
    return primals_out, tangents_out


def _pjit_partial_eval(trace, tracers, params):
    jaxpr, name = params["jaxpr"], params["name"]
    unknowns = tuple(t.var is not None for t in tracers)
    known, unknown, out_unknowns, num_res = _derived.get(
        jaxpr, ("pe", unknowns), lambda: pe.partial_eval_jaxpr(jaxpr, unknowns, False))
    with set_current_trace(trace.parent):
        known_outs = pjit_p.bind(*[t.value for t in tracers if t.var is None],
                                 jaxpr=known, name=name)
    n_known = len(known_outs) - num_res
    residuals = [pe.JaxprTracer(trace, value=r) for r in known_outs[n_known:]]
    unknown_outs = trace.stage(pjit_p, residuals + [t for t in tracers if t.var is not None],
                               dict(jaxpr=unknown, name=name))
    known_it, unknown_it = iter(known_outs[:n_known]), iter(unknown_outs)
    return [next(unknown_it) if u else pe.JaxprTracer(trace, value=next(known_it))
            for u in out_unknowns]


def _pjit_transpose(cts, *args, jaxpr, name):
    linear = tuple(ad.is_undefined_primal(a) for a in args)
    t_jaxpr = _derived.get(jaxpr, ("transpose", linear),
                           lambda: ad.transpose_jaxpr(jaxpr, linear))
    res = [a for a in args if not ad.is_undefined_primal(a)]
    cts = [ad.instantiate_zeros(c) for c in cts]
    lin_cts = iter(pjit_p.bind(*res, *cts, jaxpr=t_jaxpr, name=f"transpose({name})"))
    return [next(lin_cts) if lin else None for lin in linear]


def _pjit_batch(vals, dims, *, jaxpr, name):
    size = batching.axis_size_of(vals, dims)
    b_jaxpr, out_batched = _derived.get(jaxpr, ("batch", tuple(dims), size),
                                        lambda: batching.batch_jaxpr(jaxpr, size, dims))
    outs = pjit_p.bind(*vals, jaxpr=b_jaxpr, name=name)
    return outs, [0 if b else batching.not_mapped for b in out_batched]


def _pjit_lowering(ctx, *args, jaxpr, name):
    return mlir.call_lowering(ctx, args, jaxpr, name)


ad.primitive_jvps[pjit_p] = _pjit_jvp
ad.primitive_transposes[pjit_p] = _pjit_transpose
pe.partial_eval_rules[pjit_p] = _pjit_partial_eval
batching.primitive_batchers[pjit_p] = _pjit_batch
mlir.register_lowering(pjit_p, _pjit_lowering)

