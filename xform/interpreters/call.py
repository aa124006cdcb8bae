"""Rules shared by call-like primitives: ``jit``'s ``pjit`` and ``remat``.

A call-like primitive holds a ClosedJaxpr in its ``jaxpr`` param and runs it on its
operands. Each interpreter transforms that jaxpr and binds the same primitive on the
result: JVP (``ad.jvp_jaxpr``), partial evaluation (a known/unknown split), transposition
(``ad.transpose_jaxpr``), batching (``batching.batch_jaxpr``). ``def_call_rules``
registers the four; the primitives differ only in how a derived call's params change
(pjit renames it ``jvp(f)``, remat marks it ``differentiated``) and in how the jaxpr is
split (remat saves only what its policy allows and recomputes the rest,
``pe.partial_eval_jaxpr_custom``). Derived jaxprs are memoized per source jaxpr, so
repeated calls reuse compiled executables.
"""
import collections
from typing import NamedTuple

from xform.core.jaxpr import JaxprEqn, Var, eval_jaxpr
from xform.core.trace import set_current_trace
from xform.interpreters import ad, batching
from xform.interpreters import partial_eval as pe


class IdCache:
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


class Derivation(NamedTuple):
    """How a derived call's operands and results relate to its source call's: per derived
    input and output, ``("in", i)`` or ``("out", j)`` (the source's input/output whose
    primal, tangent or cotangent it is) or None (a residual); for batching, the batch
    dimension of each derived input and output (None: unbatched). What pjit needs to
    carry its per-value shardings over."""
    ins: tuple
    outs: tuple
    in_dims: tuple = None
    out_dims: tuple = None


def _where(flags, kind, want=True):
    return [(kind, i) for i, f in enumerate(flags) if bool(f) == want]


def _split_hows(unknowns, out_unknowns, num_res):
    """The Derivations of a known/unknown split's two calls (residuals: known outputs
    after the known ones, staged inputs before the unknown ones)."""
    def known():
        return Derivation(tuple(_where(unknowns, "in", False)),
                          (*_where(out_unknowns, "out", False), *[None] * num_res))

    def staged():
        return Derivation((*[None] * num_res, *_where(unknowns, "in")),
                          tuple(_where(out_unknowns, "out")))
    return known, staged


def default_split(jaxpr, unknowns, params):
    """The ordinary known/unknown split: known values are computed and saved."""
    return pe.partial_eval_jaxpr(jaxpr, unknowns, False)


def def_call_rules(prim, *, derived_params, split=default_split, split_key=lambda p: (),
                   inline_known=False, cache=None):
    """Register the JVP, partial-eval, transpose and batching rules of call-like ``prim``.

    Args:
      prim: a multiple-results primitive with a ClosedJaxpr ``jaxpr`` param.
      derived_params: ``(params, kind, how) -> params`` for the call bound on a derived
        jaxpr; ``kind`` is ``"jvp"``, ``"known"``, ``"staged"``, ``"transpose"`` or
        ``"batch"``; ``how()`` gives its ``Derivation`` (computed only if called).
      split: ``(jaxpr, unknowns, params) -> (known, staged, out_unknowns, num_res)``;
        ``known`` maps known inputs to known outputs then residuals, ``staged`` maps
        residuals then unknown inputs to unknown outputs.
      split_key: the params ``split`` depends on (part of its memo key).
      inline_known: evaluate the known part inline instead of binding ``prim`` on it.
      cache: the ``IdCache`` memoizing derived jaxprs.
    """
    cache = cache or IdCache()

    def jvp(primals, tangents, *, jaxpr, **params):
        nonzeros = tuple(type(t) is not ad.Zero for t in tangents)
        jvp_jaxpr, out_nz = cache.get(jaxpr, ("jvp", nonzeros),
                                      lambda: ad.jvp_jaxpr(jaxpr, nonzeros, False))
        how = lambda: Derivation(  # noqa: E731
            (*_where([1] * len(primals), "in"), *_where(nonzeros, "in")),
            (*_where([1] * len(out_nz), "out"), *_where(out_nz, "out")))
        outs = prim.bind(*primals, *[t for t in tangents if type(t) is not ad.Zero],
                         jaxpr=jvp_jaxpr, **derived_params(params, "jvp", how))
        n = len(jaxpr.out_avals)
        nz_out = iter(outs[n:])
        return outs[:n], [next(nz_out) if nz else ad.Zero(a.to_tangent_aval())
                          for nz, a in zip(out_nz, jaxpr.out_avals)]

    def partial_eval(trace, tracers, params):
        jaxpr = params["jaxpr"]
        unknowns = tuple(t.jvar is not None for t in tracers)
        known, staged, out_unknowns, num_res = cache.get(
            jaxpr, ("pe", unknowns, split_key(params)),
            lambda: split(jaxpr, unknowns, params))
        known_in = [t.value for t in tracers if t.jvar is None]
        rest = {k: v for k, v in params.items() if k != "jaxpr"}
        hows = _split_hows(unknowns, out_unknowns, num_res)
        with set_current_trace(trace.parent):
            if inline_known:
                known_outs = eval_jaxpr(known.jaxpr, known.consts, *known_in)
            else:
                known_outs = prim.bind(*known_in, jaxpr=known,
                                       **derived_params(rest, "known", hows[0]))
        n_known = len(known_outs) - num_res
        residuals = [pe.JaxprTracer(trace, value=r) for r in known_outs[n_known:]]
        unknown_outs = trace.stage(
            prim, residuals + [t for t in tracers if t.jvar is not None],
            dict(derived_params(rest, "staged", hows[1]), jaxpr=staged))
        known_it, unknown_it = iter(known_outs[:n_known]), iter(unknown_outs)
        return [next(unknown_it) if u else pe.JaxprTracer(trace, value=next(known_it))
                for u in out_unknowns]

    def split_eqn(eqn, unknown_in):
        # The eqn-level twin of ``partial_eval``: the known call outputs its known
        # outputs then the residuals, which the staged call takes before unknown inputs.
        params = eqn.params
        jaxpr, unknowns = params["jaxpr"], tuple(unknown_in)
        known, staged, out_unknowns, num_res = cache.get(
            jaxpr, ("pe", unknowns, split_key(params)),
            lambda: split(jaxpr, unknowns, params))
        rest = {k: v for k, v in params.items() if k != "jaxpr"}
        residuals = [Var(a) for a in known.out_avals[len(known.out_avals) - num_res:]]
        hows = _split_hows(unknowns, out_unknowns, num_res)
        known_eqn = JaxprEqn(
            [v for v, u in zip(eqn.invars, unknowns) if not u],
            [v for v, u in zip(eqn.outvars, out_unknowns) if not u] + residuals,
            prim, dict(derived_params(rest, "known", hows[0]), jaxpr=known), eqn.source,
            eqn.compute_type)
        staged_eqn = JaxprEqn(
            residuals + [v for v, u in zip(eqn.invars, unknowns) if u],
            [v for v, u in zip(eqn.outvars, out_unknowns) if u],
            prim, dict(derived_params(rest, "staged", hows[1]), jaxpr=staged), eqn.source,
            eqn.compute_type)
        return known_eqn, staged_eqn

    def transpose(cts, *args, jaxpr, **params):
        linear = tuple(ad.is_undefined_primal(a) for a in args)
        t_jaxpr = cache.get(jaxpr, ("transpose", linear),
                            lambda: ad.transpose_jaxpr(jaxpr, linear))
        res = [a for a in args if not ad.is_undefined_primal(a)]
        how = lambda: Derivation(  # noqa: E731
            (*_where(linear, "in", False), *_where([1] * len(cts), "out")),
            tuple(_where(linear, "in")))
        lin_cts = iter(prim.bind(*res, *[ad.instantiate_zeros(c) for c in cts],
                                 jaxpr=t_jaxpr, **derived_params(params, "transpose", how)))
        return [next(lin_cts) if lin else None for lin in linear]

    def batch(vals, dims, *, jaxpr, **params):
        size = batching.axis_size_of(vals, dims)
        # keyed by the vmapped axis name too: collectives in the body resolve against it
        env = batching._axis_env
        b_jaxpr, out_batched = cache.get(jaxpr, ("batch", tuple(dims), size,
                                                 env.rule_axis_name, env.rule_spmd_name,
                                                 env.rule_ema),
                                         lambda: batching.batch_jaxpr(jaxpr, size, dims))
        how = lambda: Derivation(  # noqa: E731
            tuple(_where([1] * len(vals), "in")), tuple(_where([1] * len(out_batched), "out")),
            tuple(dims), tuple(0 if b else None for b in out_batched))
        outs = prim.bind(*vals, jaxpr=b_jaxpr, **derived_params(params, "batch", how))
        return outs, [0 if b else batching.not_mapped for b in out_batched]

    ad.primitive_jvps[prim] = jvp
    pe.partial_eval_rules[prim] = partial_eval
    pe.eqn_split_rules[prim] = split_eqn
    ad.primitive_transposes[prim] = transpose
    batching.primitive_batchers[prim] = batch
