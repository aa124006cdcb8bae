"""``checkpoint`` / ``remat``: trade compute for memory in reverse mode.

``checkpoint(f)`` binds a ``remat`` primitive holding ``f``'s jaxpr. Evaluating it just
runs the jaxpr; its JVP is the JVP jaxpr, still under ``remat``. The point is its
partial-evaluation rule: when reverse mode splits the JVP into a known (forward) part
and an unknown (tangent) part, the forward part saves as residuals only the inputs
and the intermediates that ``policy(prim, *avals, **params)`` allows; the unknown part,
again a ``remat``, recomputes everything else from them during the backward pass.
Policies live in ``checkpoint_policies``; ``checkpoint_name`` tags values for
``save_only_these_names``.
"""
import functools
import types

from xform.core import tree_util
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, Var, eval_jaxpr
from xform.core.trace import (Primitive, check_no_tracers, current_trace, eval_trace, get_aval,
                              set_current_trace)
from xform.interpreters import ad, batching, mlir
from xform.interpreters import partial_eval as pe
from xform.interpreters.pjit import _IdCache

_derived = _IdCache()


# ---- checkpoint_name ----

def checkpoint_name(x, name):
    """Tag the arrays of pytree ``x`` with ``name`` (identity), for checkpoint policies
    such as ``save_only_these_names``.

    >>> import xform
    >>> xform.ad_checkpoint.checkpoint_name(1.0, "a")
    1.0
    """
    return tree_util.tree_map(lambda v: name_p.bind(v, name=name), x)


name_p = Primitive("name")


def _name_impl(x, *, name):
    check_no_tracers(name_p, (x,))
    return x


name_p.def_impl(_name_impl)
name_p.def_abstract_eval(lambda aval, *, name: aval)
ad.deflinear(name_p, lambda ct, x, *, name: [ct])
batching.defvectorized(name_p)
mlir.register_lowering(name_p, lambda ctx, x, *, name: x)


# ---- policies ----

def everything_saveable(*_, **__):
    """Save every intermediate: no recomputation (plain autodiff's memory use)."""
    return True


def nothing_saveable(*_, **__):
    """Save only the checkpointed function's inputs; recompute everything (the default)."""
    return False


def dots_saveable(prim, *_, **__):
    """Save the results of matrix multiplications; recompute elementwise work."""
    return prim.name in ("dot_general", "conv_general_dilated")


def dots_with_no_batch_dims_saveable(prim, *_, **params):
    """Like ``dots_saveable``, but only for ``dot_general``s without batch dimensions."""
    if prim.name != "dot_general":
        return False
    (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
    return not lhs_batch and not rhs_batch


def save_only_these_names(*names):
    """A policy saving only values tagged by ``checkpoint_name`` with one of ``names``."""
    names = frozenset(names)

    def policy(prim, *_, **params):
        return prim is name_p and params["name"] in names
    return policy


def save_any_names_but_these(*names):
    """A policy saving every ``checkpoint_name``-tagged value except those in ``names``."""
    names = frozenset(names)

    def policy(prim, *_, **params):
        return prim is name_p and params["name"] not in names
    return policy


def save_from_both_policies(policy_1, policy_2):
    """Save what either policy saves."""
    def policy(prim, *avals, **params):
        return policy_1(prim, *avals, **params) or policy_2(prim, *avals, **params)
    return policy


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable, nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable, checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_from_both_policies=save_from_both_policies)


# ---- the API ----

def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=()):
    """Make ``fun`` recompute its intermediates in the backward pass instead of storing them.

    Args:
      fun: the function to rematerialize.
      prevent_cse: keep XLA from merging the recomputation with the forward computation
        (an optimization barrier on the recomputation's inputs).
      policy: ``policy(prim, *avals, **params) -> bool`` saying which intermediates may be
        saved (see ``checkpoint_policies``); ``None`` saves none of them.
      static_argnums: positional arguments that are Python values, not traced.

    Returns:
      A function computing the same values as ``fun``, with the same derivatives.

    >>> import xform, xform.numpy as jnp
    >>> xform.grad(xform.checkpoint(lambda x: jnp.sin(jnp.sin(x))))(0.0)
    Array(1., dtype=float32)
    """
    static = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)

    @functools.wraps(fun)
    def fun_remat(*args, **kwargs):
        if current_trace() is eval_trace:
            return fun(*args, **kwargs)
        nums = {i % len(args) for i in static if -len(args) <= i < len(args)}
        dyn = tuple(a for i, a in enumerate(args) if i not in nums)
        flat, in_tree = tree_util.tree_flatten((dyn, kwargs))

        def fun_dyn(d, kw):
            it = iter(d)
            return fun(*[args[i] if i in nums else next(it) for i in range(len(args))], **kw)
        closed, consts, out_tree = pe.trace_to_subjaxpr(fun_dyn, in_tree,
                                                        [get_aval(x) for x in flat])
        outs = remat_p.bind(*consts, *flat, jaxpr=closed, prevent_cse=prevent_cse,
                            differentiated=False, policy=policy)
        return tree_util.tree_unflatten(out_tree, outs)
    return fun_remat


remat = checkpoint


# ---- the remat primitive ----

remat_p = Primitive("remat")
remat_p.multiple_results = True


def _remat_impl(*args, jaxpr, **_):
    check_no_tracers(remat_p, args)
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


remat_p.def_impl(_remat_impl)
remat_p.def_abstract_eval(lambda *avals, jaxpr, **_: jaxpr.out_avals)


def _remat_jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    nonzeros = tuple(type(t) is not ad.Zero for t in tangents)
    jvp, out_nz = _derived.get(jaxpr, ("jvp", nonzeros),
                               lambda: ad.jvp_jaxpr(jaxpr, nonzeros, False))
    outs = remat_p.bind(*primals, *[t for t in tangents if type(t) is not ad.Zero],
                        jaxpr=jvp, prevent_cse=prevent_cse, differentiated=True, policy=policy)
    n = len(jaxpr.out_avals)
    nz_out = iter(outs[n:])
    return outs[:n], [next(nz_out) if nz else ad.Zero(a.to_tangent_aval())
                      for nz, a in zip(out_nz, jaxpr.out_avals)]


def _saveable(policy, eqn):
    return policy is not None and bool(
        policy(eqn.primitive, *[v.aval for v in eqn.invars], **eqn.params))


def remat_partial_eval_jaxpr(closed, unknowns, policy):
    """Split ``closed`` for rematerialization.

    Returns ``(known, staged, out_unknowns, num_res)``: ``known`` maps the known inputs to
    the known outputs and ``num_res`` residuals (known inputs and policy-saveable known
    intermediates only); ``staged`` maps the residuals and the unknown inputs to the
    unknown outputs, recomputing every other known value it needs.
    """
    j = closed.jaxpr
    known_in = [v for v, u in zip(j.invars, unknowns) if not u]
    unknown_vars = {v for v, u in zip(j.invars, unknowns) if u}
    known_eqns, staged_eqns, saved = [], [], set(j.constvars) | set(known_in)
    for eqn in j.eqns:
        if any(type(v) is Var and v in unknown_vars for v in eqn.invars):
            unknown_vars.update(eqn.outvars)
            staged_eqns.append(eqn)
            continue
        known_eqns.append(eqn)
        if _saveable(policy, eqn):
            saved.update(eqn.outvars)
        else:
            staged_eqns.append(eqn)  # recomputed in the backward pass (if needed)
    out_unknowns = [type(v) is Var and v in unknown_vars for v in j.outvars]
    staged_outs = [v for v, u in zip(j.outvars, out_unknowns) if u]
    staged, _ = pe.dce_jaxpr(Jaxpr([], [], staged_outs, staged_eqns))
    defined = {v for e in staged.eqns for v in e.outvars} | unknown_vars
    residuals, seen = [], set()
    for e in staged.eqns:
        for v in e.invars:
            if type(v) is Var and v not in defined and v not in seen:
                assert v in saved, "remat: a recomputed value depends on an unsaved one"
                seen.add(v)
                residuals.append(v)
    for v in staged_outs:  # a known value passed straight through to an unknown output
        if v not in defined and v not in seen:
            seen.add(v)
            residuals.append(v)
    staged_in = residuals + [v for v, u in zip(j.invars, unknowns) if u]
    staged = ClosedJaxpr(Jaxpr([], staged_in, staged.outvars, staged.eqns), [])
    known_outs = [v for v, u in zip(j.outvars, out_unknowns) if not u]
    known, _ = pe.dce_jaxpr(Jaxpr(j.constvars, known_in, known_outs + residuals, known_eqns))
    return ClosedJaxpr(known, closed.consts), staged, out_unknowns, len(residuals)


def _remat_partial_eval(trace, tracers, params):
    jaxpr, policy = params["jaxpr"], params["policy"]
    unknowns = tuple(t.var is not None for t in tracers)
    known, staged, out_unknowns, num_res = _derived.get(
        jaxpr, ("pe", unknowns, policy),
        lambda: remat_partial_eval_jaxpr(jaxpr, unknowns, policy))
    with set_current_trace(trace.parent):
        known_outs = eval_jaxpr(known.jaxpr, known.consts,
                                *[t.value for t in tracers if t.var is None])
    n_known = len(known_outs) - num_res
    residuals = [pe.JaxprTracer(trace, value=r) for r in known_outs[n_known:]]
    unknown_outs = trace.stage(remat_p, residuals + [t for t in tracers if t.var is not None],
                               dict(params, jaxpr=staged, differentiated=True))
    known_it, unknown_it = iter(known_outs[:n_known]), iter(unknown_outs)
    return [next(unknown_it) if u else pe.JaxprTracer(trace, value=next(known_it))
            for u in out_unknowns]


def _remat_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    linear = tuple(ad.is_undefined_primal(a) for a in args)
    t_jaxpr = _derived.get(jaxpr, ("transpose", linear),
                           lambda: ad.transpose_jaxpr(jaxpr, linear))
    res = [a for a in args if not ad.is_undefined_primal(a)]
    lin_cts = iter(remat_p.bind(*res, *[ad.instantiate_zeros(c) for c in cts],
                                jaxpr=t_jaxpr, prevent_cse=prevent_cse,
                                differentiated=True, policy=policy))
    return [next(lin_cts) if lin else None for lin in linear]


def _remat_batch(vals, dims, *, jaxpr, **params):
    size = batching.axis_size_of(vals, dims)
    b_jaxpr, out_batched = _derived.get(jaxpr, ("batch", tuple(dims), size),
                                        lambda: batching.batch_jaxpr(jaxpr, size, dims))
    outs = remat_p.bind(*vals, jaxpr=b_jaxpr, **params)
    return outs, [0 if b else batching.not_mapped for b in out_batched]


def _remat_lowering(ctx, *args, jaxpr, prevent_cse, differentiated, policy):
    # NB: the barrier keeps XLA from CSE-ing the backward pass's recomputation with the
    # forward computation (which would silently undo the rematerialization).
    if prevent_cse and differentiated and args:
        args = mlir.hlo.optimization_barrier(list(args))
    return mlir.jaxpr_subcomp(ctx.module_ctx, jaxpr.jaxpr, jaxpr.consts, list(args))


ad.primitive_jvps[remat_p] = _remat_jvp
ad.primitive_transposes[remat_p] = _remat_transpose
pe.partial_eval_rules[remat_p] = _remat_partial_eval
batching.primitive_batchers[remat_p] = _remat_batch
mlir.register_lowering(remat_p, _remat_lowering)
