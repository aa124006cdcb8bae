"""``checkpoint`` / ``remat``: trade compute for memory in reverse mode.

``checkpoint(f)`` binds a ``remat`` primitive holding ``f``'s jaxpr. Evaluating it just
runs the jaxpr; its JVP is the JVP jaxpr, still under ``remat``. The point is its
partial-evaluation rule: when reverse mode splits the JVP into a known (forward) part
and an unknown (tangent) part, the forward part saves as residuals only the inputs
and the intermediates that ``policy(prim, *avals, **params)`` allows; the unknown part,
again a ``remat``, recomputes everything else from them during the backward pass. The
split is ``interpreters.partial_eval.partial_eval_jaxpr_custom``; the four rules are the
call-primitive rules ``jit`` uses too (``interpreters/call.py``), so this module holds
only the API, the policies and the primitive's declaration and lowering.
Policies live in ``checkpoint_policies``; ``checkpoint_name`` tags values for
``save_only_these_names``.
"""
import collections
import functools
import inspect
import types

from xform.core import tree_util
from xform.core.jaxpr import eval_jaxpr
from xform.core.trace import Primitive, check_no_tracers, current_trace, eval_trace, get_aval
from xform.core.traceback_util import api_boundary
from xform.core.transfer import device_put_value
from xform.interpreters import ad, batching, call, mlir
from xform.interpreters import partial_eval as pe


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


name_p.def_impl(_name_impl, lazy_kind="inline")
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


def save_anything_except_these_names(*names):
    """A policy saving every value except those tagged with one of ``names``."""
    names = frozenset(names)

    def policy(prim, *_, **params):
        return prim is not name_p or params["name"] not in names
    return policy


class RecomputeType:
    """The type of :data:`Recompute`."""

    def __repr__(self):
        return "Recompute"


class SaveableType:
    """The type of :data:`Saveable`."""

    def __repr__(self):
        return "Saveable"


Recompute = RecomputeType()  # a policy's answer "recompute it" (as returning False)
Saveable = SaveableType()    # a policy's answer "save it" (as returning True)


class Offloadable(collections.namedtuple("Offloadable", ["src", "dst"])):
    """A policy's answer "save this value in memory space ``dst``" (JAX's offloading).

    NB: xform's CPU backend has one memory space: an offloaded value is saved as is
    (``Saveable``)."""


def _policy_case(case):
    """A policy's answer as one of the three cases (a bool is Saveable or Recompute)."""
    if isinstance(case, bool):
        return Saveable if case else Recompute
    if not isinstance(case, (RecomputeType, SaveableType, Offloadable)):
        msg = ("Value returned by a remat policy should be a bool or "
               "`ad_checkpoint.Recompute`, `ad_checkpoint.Saveable` or "
               f"`ad_checkpoint.Offloadable(...)`. Got {case} of type {type(case)}.")
        if case is Offloadable:
            msg += " Did you return `Offloadable` instead of an instantiated `Offloadable(...)`?"
        raise TypeError(msg)
    return case


def save_and_offload_only_these_names(*, names_which_can_be_saved,
                                      names_which_can_be_offloaded, offload_src,
                                      offload_dst):
    """Save values tagged with ``names_which_can_be_saved``, offload (on CPU: save) those
    tagged with ``names_which_can_be_offloaded``, recompute the rest."""
    saved, offloaded = frozenset(names_which_can_be_saved), frozenset(
        names_which_can_be_offloaded)
    if saved & offloaded:
        raise ValueError("The names should be exclusive and should not intersect in "
                         "`names_which_can_be_saved` and `names_which_can_be_offloaded`. "
                         f"Got names_which_can_be_saved={set(saved)}, "
                         f"names_which_can_be_offloaded={set(offloaded)}")

    def policy(prim, *_, **params):
        if prim is name_p and params["name"] in saved:
            return Saveable
        if prim is name_p and params["name"] in offloaded:
            return Offloadable(offload_src, offload_dst)
        return Recompute
    return policy


def offload_dot_with_no_batch_dims(offload_src, offload_dst):
    """Offload (on CPU: save) the results of ``dot_general``s without batch dimensions."""
    def policy(prim, *avals, **params):
        if dots_with_no_batch_dims_saveable(prim, *avals, **params):
            return Offloadable(offload_src, offload_dst)
        return Recompute
    return policy


def save_from_both_policies(policy_1, policy_2):
    """Save what either policy saves (both must answer with bools, as in JAX)."""
    def policy(prim, *avals, **params):
        out1, out2 = policy_1(prim, *avals, **params), policy_2(prim, *avals, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise ValueError("The return value of the policies should be a boolean. Got: "
                             f"{out1} and {out2}. Please write a custom policy function "
                             "directly, rather than using this helper function.")
        return out1 or out2
    return policy


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable, nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable, checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_from_both_policies=save_from_both_policies,
    save_anything_except_these_names=save_anything_except_these_names,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims)


# ---- the API ----

_NOT_GIVEN = object()   # (``concrete``: JAX's DeprecatedArg)


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=(), static_argnames=(),
               concrete=_NOT_GIVEN):
    """Make ``fun`` recompute its intermediates in the backward pass instead of storing them.

    Args:
      fun: the function to rematerialize.
      prevent_cse: keep XLA from merging the recomputation with the forward computation
        (an optimization barrier on the recomputation's inputs).
      policy: ``policy(prim, *avals, **params)`` saying which intermediates may be saved:
        a bool, ``Saveable``, ``Recompute`` or ``Offloadable(src, dst)`` (saved: one
        memory space here); see ``checkpoint_policies``. ``None`` saves none of them.
      static_argnums: positional arguments that are Python values, not traced.
      static_argnames: the same by name (keyword arguments too).
      concrete: removed in JAX 0.10: NotImplementedError.

    Returns:
      A function computing the same values as ``fun``, with the same derivatives.

    >>> import xform, xform.numpy as jnp
    >>> xform.grad(xform.checkpoint(lambda x: jnp.sin(jnp.sin(x))))(0.0)
    Array(1., dtype=float32, weak_type=True)
    """
    if concrete is not _NOT_GIVEN:
        raise NotImplementedError(
            "The `concrete` option to `jax.checkpoint` was deprecated in JAX v0.8.2, and "
            "removed in JAX v0.10.0. In its place please use `static_argnums`.")
    static = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
    if names:
        try:
            params = inspect.signature(fun).parameters.values()
        except (TypeError, ValueError):
            params = ()
        static |= {i for i, p in enumerate(params)
                   if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name in names}

    @api_boundary
    @functools.wraps(fun)
    def fun_remat(*args, **kwargs):
        if current_trace() is eval_trace:   # (run directly; outputs as a traced call's:
            leaves, tree = tree_util.tree_flatten(fun(*args, **kwargs))  # sorted, Arrays)
            return tree_util.tree_unflatten(tree, [device_put_value(x) for x in leaves])
        nums = {i % len(args) for i in static if -len(args) <= i < len(args)}
        dyn = tuple(a for i, a in enumerate(args) if i not in nums)
        skw = {k: v for k, v in kwargs.items() if k in names}
        flat, in_tree = tree_util.tree_flatten(
            (dyn, {k: v for k, v in kwargs.items() if k not in names}))

        def fun_dyn(d, kw):
            it = iter(d)
            return fun(*[args[i] if i in nums else next(it) for i in range(len(args))],
                       **kw, **skw)
        closed, consts, out_tree = pe.trace_to_subjaxpr(fun_dyn, in_tree,
                                                        [get_aval(x) for x in flat])
        outs = remat_p.bind(*consts, *flat, jaxpr=closed, prevent_cse=prevent_cse,
                            differentiated=False, policy=policy)
        return tree_util.tree_unflatten(out_tree, outs)
    return fun_remat


remat = checkpoint


# ---- which values reverse mode saves ----

def saved_residuals(f, *args, **kwargs):
    """The values reverse mode of ``f`` at ``args`` saves for the backward pass, as
    ``(aval, description)`` pairs (arguments first), after checkpoint policies apply."""
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    names = _arg_names(f, args, kwargs)

    def fwd(*xs):
        a, kw = tree_util.tree_unflatten(in_tree, list(xs))

        def flat_fun(*ys):
            a2, kw2 = tree_util.tree_unflatten(in_tree, list(ys))
            return tree_util.tree_leaves(f(*a2, **kw2))
        return ad.linearize_flat(flat_fun, list(xs))[2]
    jaxpr = pe.trace_to_jaxpr(fwd, [get_aval(x) for x in flat]).jaxpr
    producers = {v: e for e in jaxpr.eqns for v in e.outvars}
    from_args, others = [], []
    for v in jaxpr.outvars:
        if v in jaxpr.invars:
            from_args.append((jaxpr.invars.index(v), v.aval))
        elif v in producers:
            e = producers[v]
            where = f" from {e.source_info}" if e.source is not None else ""
            if e.primitive is name_p:
                what = f"named {e.params['name']!r}"
            elif e.primitive.name == "jit":
                name = e.params["name"]
                while name.startswith(("jvp(", "transpose(")) and name.endswith(")"):
                    name = name[name.index("(") + 1:-1]   # derived calls' names
                what = f"output of jitted function {name!r}"
            else:
                what = f"output of {e.primitive.name}"
            others.append((v.aval, what + where))
        else:
            others.append((getattr(v, "aval", None), "from a constant"))
    return ([(a, f"from the argument {names[i]}") for i, a in sorted(from_args, key=lambda p: p[0])]
            + others)


def _arg_names(f, args, kwargs):
    try:
        bound = inspect.signature(f).bind(*args, **kwargs).arguments
        keys = list(bound)
        tree = (tuple(bound[k] for k in keys[:len(args)]), kwargs)
    except (TypeError, ValueError):
        keys = [f"args[{i}]" for i in range(len(args))]
        tree = (args, kwargs)
    out = []
    for path, _ in tree_util.tree_flatten_with_path(tree)[0]:
        if path[0].idx == 0 and keys:
            head = keys[path[1].idx] if path[1].idx < len(keys) else f"args[{path[1].idx}]"
            out.append(head + tree_util.keystr(path[2:]))
        else:
            out.append(path[1].key + tree_util.keystr(path[2:]))
    return out


def print_saved_residuals(f, *args, **kwargs):
    """Print what reverse mode of ``f`` at ``args`` saves (one line per residual: its
    type and where it comes from), to check a checkpoint policy.

    >>> import xform, xform.numpy as jnp
    >>> from xform.ad_checkpoint import print_saved_residuals
    >>> print_saved_residuals(lambda x: jnp.sum(x * x), jnp.ones(3))
    f32[3] from the argument x
    """
    for aval, desc in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {desc}")


# ---- the remat primitive ----

remat_p = Primitive("remat")
remat_p.multiple_results = True


def _remat_impl(*args, jaxpr, **_):
    check_no_tracers(remat_p, args)
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


remat_p.def_impl(_remat_impl, lazy_kind="inline")
remat_p.def_abstract_eval(lambda *avals, jaxpr, **_: jaxpr.out_avals)


def _saveable(policy, eqn):
    # Offloadable is Saveable: one memory space on xform's backends (see Offloadable)
    return policy is not None and _policy_case(
        policy(eqn.primitive, *[v.aval for v in eqn.invars], **eqn.params)) is not Recompute


def _remat_split(jaxpr, unknowns, params):
    policy = params["policy"]
    return pe.partial_eval_jaxpr_custom(jaxpr, unknowns, lambda eqn: _saveable(policy, eqn))


def _remat_derived_params(params, kind, how):
    # Calls derived for differentiation get the optimization barrier when lowered.
    return params if kind == "batch" else dict(params, differentiated=True)


def _remat_lowering(ctx, *args, jaxpr, prevent_cse, differentiated, policy):
    # NB: the barrier keeps XLA from CSE-ing the backward pass's recomputation with the
    # forward computation (which would silently undo the rematerialization).
    if prevent_cse and differentiated and args:
        args = mlir.hlo.optimization_barrier(list(args))
        args = [args] if len(ctx.avals_in) == 1 else list(args)  # one result: an OpResult
    return mlir.jaxpr_subcomp(ctx.module_ctx, jaxpr.jaxpr, jaxpr.consts, list(args))


# The known part of a split is the forward pass: evaluated inline (not a remat call).
call.def_call_rules(remat_p, derived_params=_remat_derived_params, split=_remat_split,
                    split_key=lambda params: params["policy"], inline_known=True)
mlir.register_lowering(remat_p, _remat_lowering)
