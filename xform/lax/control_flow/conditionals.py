"""``cond`` and ``switch``: the ``cond`` primitive and its rules.

``cond`` takes an int32 index and the operands; its one param ``branches`` is a tuple
of ClosedJaxprs with identical signatures (all branches take every branch's
closed-over values, as in JAX). ``cond(pred, t, f)`` is ``branches=(f, t)`` indexed by
``int32(pred)``. Under vmap with a batched index, every branch runs and ``select_n``
picks per lane; reverse mode splits each branch into known and unknown parts, all
branches emitting the same residuals (zeros for the other branches' ones).

NB: an output is weakly typed only if it is weak in every branch; JAX takes the weak
type of ``branches[0]`` (the false branch of ``cond``), which depends on branch order.
The transpose follows: a weak operand's cotangent is strong here where a branch's is.
"""
import numpy as np

from xform.core import dtypes, tree_util
from xform.core.config import config
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, Var
from xform.core.trace import get_aval, set_current_trace, to_concrete_value
from xform.core.traceback_util import api_boundary
from xform.interpreters import ad, batching, dispatch, mlir
from xform.interpreters import partial_eval as pe
from xform.lax._prim import allow_extended, standard_primitive
from xform.lax.control_flow.common import (check_same_types, eager_cached,
                                           join_weak_types, trace_jaxpr)
from xform.lax import elementwise as ew
from xform.lax.rounding import clamp
from xform.lax.shapes import broadcast_in_dim
from xform import ref as refs

hlo, ir = mlir.hlo, mlir.ir

_no_operand = object()


@api_boundary
def cond(pred, true_fun, false_fun, *operands, operand=_no_operand):
    """Apply ``true_fun`` or ``false_fun`` to ``operands``, depending on ``pred``.

    Semantics of ``true_fun(*operands) if pred else false_fun(*operands)``, staged as
    one ``cond`` primitive (a StableHLO ``case``): both branches are traced, only one
    runs. Under ``vmap`` with a batched ``pred`` both run and ``select_n`` picks.

    Args:
      pred: boolean or numeric scalar (numbers mean ``pred != 0``).
      true_fun: function applied when ``pred`` is true.
      false_fun: function applied when ``pred`` is false; its outputs must match
        ``true_fun``'s in pytree structure, shapes and dtypes.
      *operands: pytrees passed to the chosen function.
      operand: the older single-operand form (``cond(p, t, f, operand=x)``).

    Returns:
      The chosen function's output.

    Raises:
      TypeError: non-callable branches, a non-scalar or non-numeric ``pred``, or
        branch outputs that differ in structure or type.

    >>> from xform import lax
    >>> print(lax.cond(True, lambda x: x + 1, lambda x: x - 1, 10))
    11
    """
    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _operands(operands, operand)
    if pred is None:
        raise TypeError("lax.cond: pred is None (it must be a boolean or numeric scalar).")
    aval = _scalar_aval("lax.cond", "pred", pred)
    if aval.dtype != np.bool_:
        if not (dtypes.is_integer(aval.dtype) or dtypes.is_inexact(aval.dtype)) or \
                dtypes.is_complex(aval.dtype):
            raise TypeError(f"lax.cond: pred must be a boolean or real number, got dtype "
                            f"{aval.dtype.name}.")
        pred = ew.ne(pred, np.zeros((), aval.dtype))
    if config.jax_disable_jit:
        concrete = to_concrete_value(pred)
        if concrete is not None:
            return true_fun(*operands) if concrete else false_fun(*operands)
    index = ew.convert_element_type(pred, np.int32)
    return _cond(index, (true_fun, false_fun), ("true_fun", "false_fun"), operands,
                 "lax.cond", order=(1, 0))


@api_boundary
def switch(index, branches, *operands, operand=_no_operand):
    """Apply ``branches[index]`` to ``operands``; ``index`` is clamped to the range.

    Semantics of ``branches[clamp(0, index, len(branches) - 1)](*operands)``, staged
    as one ``cond`` primitive.

    Args:
      index: integer scalar.
      branches: non-empty sequence of functions with matching output types.
      *operands: pytrees passed to the chosen branch.
      operand: the older single-operand form.

    Returns:
      The chosen branch's output.

    Raises:
      TypeError: a non-integer or non-scalar index, non-callable branches, or branch
        outputs that differ in structure or type.
      ValueError: an empty ``branches``.

    >>> from xform import lax
    >>> print(lax.switch(5, [lambda x: x + 1, lambda x: x * 2], 10))
    20
    """
    branches = tuple(branches)
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _operands(operands, operand)
    aval = _scalar_aval("lax.switch", "index", index)
    if not dtypes.is_integer(aval.dtype):
        raise TypeError(f"lax.switch: index must be an integer scalar, got dtype "
                        f"{aval.dtype.name}.")
    if not branches:
        raise ValueError("lax.switch: empty branch sequence.")
    if len(branches) == 1:
        return branches[0](*operands)
    index = ew.convert_element_type(index, np.int32)
    index = clamp(np.int32(0), index, np.int32(len(branches) - 1))
    if config.jax_disable_jit:
        concrete = to_concrete_value(index)
        if concrete is not None:
            return branches[int(concrete)](*operands)
    names = tuple(f"branch {i}" for i in range(len(branches)))
    return _cond(index, branches, names, operands, "lax.switch",
                 order=tuple(range(len(branches))))


def _operands(operands, operand):
    if operand is _no_operand:
        return operands
    if operands:
        raise TypeError("if 'operand' keyword is passed then no positional operands can "
                        f"be passed, got operand={operand} and positional operands "
                        f"{operands}")
    return (operand,)


def _scalar_aval(api, what, x):
    try:
        aval = get_aval(x)
    except TypeError:
        raise TypeError(f"{api}: {what} must be a scalar, got {x!r} of type "
                        f"{type(x).__name__}.") from None
    if aval.shape:
        raise TypeError(f"{api}: {what} must be a scalar, got shape {aval.shape}.")
    return aval


def _cond(index, funs, names, operands, api, order):
    """Trace ``funs`` on ``operands`` and bind ``cond``; ``order[i]`` is the position of
    ``funs[i]`` among the primitive's branches. Refs from outside the branches are
    extra operands and outputs (``xform.ref.thread_refs``)."""
    def call(fs, values):
        if not values:
            return _cond_traced(index, fs, funs, names, operands, api, order), []
        return _cond_traced(index, fs, funs, names, tuple(operands) + (values,), api, order)

    def adapt(_, inner):
        return lambda *ops: inner(ops[-1], *ops[:-1])
    return refs.thread_refs(call, list(funs), adapt)


def _cond_traced(index, funs, user_funs, names, operands, api, order):
    leaves, in_tree = tree_util.tree_flatten(operands)
    avals = [get_aval(x) for x in leaves]

    def trace():
        traced = [trace_jaxpr(f, in_tree, avals) for f in funs]
        out_trees = [t[2] for t in traced]
        check_same_types(api, [f"{n} ({_fun_name(f)})" for n, f in zip(names, user_funs)],
                         out_trees, [t[0].out_avals for t in traced])
        jaxprs, consts = _merge_consts([(t[0], t[1]) for t in traced])
        return tuple(jaxprs[order.index(i)] for i in range(len(funs))), consts, out_trees[0]
    branches, consts, out_tree = eager_cached(
        tuple(funs), ("cond", in_tree, tuple(avals), tuple(order)), trace)
    outs = cond_p.bind(index, *consts, *leaves, branches=branches)
    return tree_util.tree_unflatten(out_tree, outs)


def _fun_name(f):
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def _merge_consts(traced):
    """Give every branch the same leading const inputs: the union of all branches'
    closed-over values (deduplicated by identity)."""
    consts, position = [], {}
    for _, cs in traced:
        for c in cs:
            if id(c) not in position:
                position[id(c)] = len(consts)
                consts.append(c)
    jaxprs = []
    for closed, cs in traced:
        jaxpr = closed.jaxpr
        own = {position[id(c)]: v for c, v in zip(cs, jaxpr.invars)}
        const_vars = [own[k] if k in own else Var(get_aval(c)) for k, c in enumerate(consts)]
        invars = const_vars + jaxpr.invars[len(cs):]
        jaxprs.append(ClosedJaxpr(Jaxpr([], invars, jaxpr.outvars, jaxpr.eqns), []))
    return jaxprs, consts


def _cond_abstract_eval(index, *avals, branches):
    if index.shape or index.dtype != np.int32:
        raise TypeError(f"cond: the index must be an int32 scalar, got {index.str_short()}")
    for i, b in enumerate(branches):
        want = [(a.shape, a.dtype) for a in b.in_avals]
        if want != [(a.shape, a.dtype) for a in avals]:
            raise TypeError(f"cond: branch {i} takes "
                            f"({', '.join(a.str_short() for a in b.in_avals)}) but the "
                            f"operands are ({', '.join(a.str_short() for a in avals)})")
    return join_weak_types([b.out_avals for b in branches])


# ---- JVP: every branch differentiated with the same nonzero tangents ----

def _nonzero(t):
    return type(t) is not ad.Zero and dtypes.is_inexact(get_aval(t).dtype)


def _cond_jvp(primals, tangents, *, branches):
    index, *ops = primals
    nz = [_nonzero(t) for t in tangents[1:]]
    out_nz = [False] * len(branches[0].out_avals)
    for b in branches:
        out_nz = [a or o for a, o in zip(out_nz, ad.jvp_jaxpr(b, nz, False)[1])]
    out_nz = [n and dtypes.is_inexact(a.dtype) for n, a in zip(out_nz, branches[0].out_avals)]
    jvps = tuple(ad.jvp_jaxpr(b, nz, out_nz)[0] for b in branches)
    dots = [t for t, n in zip(tangents[1:], nz) if n]
    outs = cond_p.bind(index, *ops, *dots, branches=jvps)
    n = len(out_nz)
    dots_out = iter(outs[n:])
    return outs[:n], [next(dots_out) if nz_ else ad.Zero(a.to_tangent_aval())
                      for nz_, a in zip(out_nz, branches[0].out_avals)]


# ---- partial evaluation: known cond -> known outputs + residuals; unknown cond ----

def _cond_partial_eval(trace, tracers, params):
    branches = params["branches"]
    index, *ops = tracers
    if index.jvar is not None:
        return trace.stage(cond_p, tracers, params)
    uk = [t.jvar is not None for t in ops]
    out_uk = [False] * len(branches[0].out_avals)
    for b in branches:
        out_uk = [a or o for a, o in zip(out_uk, pe.partial_eval_jaxpr(b, uk, False)[2])]
    splits = [pe.partial_eval_jaxpr(b, uk, out_uk) for b in branches]
    n_known = out_uk.count(False)
    res_avals = [k.out_avals[n_known:] for k, _, _, _ in splits]
    offsets = np.cumsum([0] + [len(r) for r in res_avals]).tolist()
    known_avals = [a for a, u in zip(branches[0].in_avals, uk) if not u]

    def known_branch(i):
        def fun(*args):
            outs = splits[i][0](*args)
            res = [ad.zeros_like_aval(a) for r in res_avals[:i] for a in r]
            res += outs[n_known:]
            res += [ad.zeros_like_aval(a) for r in res_avals[i + 1:] for a in r]
            return outs[:n_known] + res
        return pe.trace_to_jaxpr(fun, known_avals)

    def unknown_branch(i):
        all_res = [a for r in res_avals for a in r]

        def fun(*args):
            res, rest = args[offsets[i]:offsets[i + 1]], args[offsets[-1]:]
            return splits[i][1](*res, *rest)
        return pe.trace_to_jaxpr(fun, all_res + [t.aval for t in ops if t.jvar is not None])

    known_branches = tuple(known_branch(i) for i in range(len(branches)))
    with set_current_trace(trace.parent):
        known_outs = cond_p.bind(index.value, *[t.value for t in ops if t.jvar is None],
                                 branches=known_branches)
    residuals = [pe.JaxprTracer(trace, value=r) for r in known_outs[n_known:]]
    unknown_outs = trace.stage(
        cond_p, [index] + residuals + [t for t in ops if t.jvar is not None],
        dict(branches=tuple(unknown_branch(i) for i in range(len(branches)))))
    known_it, unknown_it = iter(known_outs[:n_known]), iter(unknown_outs)
    return [next(unknown_it) if u else pe.JaxprTracer(trace, value=next(known_it))
            for u in out_uk]


# ---- transpose: a cond over the branches' transposes ----

def _cond_transpose(cts, index, *ops, branches):
    linear = [ad.is_undefined_primal(x) for x in ops]
    # Integer outputs have float0 cotangents: nothing flows back through them.
    keep = [dtypes.is_inexact(a.dtype) for a in branches[0].out_avals]
    if all(type(c) is ad.Zero or not k for c, k in zip(cts, keep)):
        return [None] * (1 + len(ops))

    res = [x for x in ops if not ad.is_undefined_primal(x)]
    cts = [ad.instantiate_zeros(c) for c, k in zip(cts, keep) if k]
    ct_avals = [get_aval(c) for c in cts]   # (a weak cotangent keeps grad's result weak)

    def transposed(b):
        kept = pe.trace_to_jaxpr(lambda *a: [o for o, k in zip(b(*a), keep) if k],
                                 b.in_avals)
        return ad.transpose_jaxpr(kept, linear, ct_avals)
    lin_cts = iter(cond_p.bind(index, *res, *cts,
                               branches=tuple(transposed(b) for b in branches)))
    return [None] + [next(lin_cts) if lin else None for lin in linear]


# ---- batching ----

def _cond_batch(vals, dims, *, branches):
    size = batching.axis_size_of(vals, dims)
    (index, *ops), (index_dim, *op_dims) = vals, dims
    ops = [batching.bdim_at_front(x, d, size) if d is not batching.not_mapped else x
           for x, d in zip(ops, op_dims)]
    in_dims = [0 if d is not batching.not_mapped else d for d in op_dims]
    n_out = len(branches[0].out_avals)
    if index_dim is batching.not_mapped:
        out_bat = [False] * n_out
        for b in branches:
            out_bat = [a or o for a, o in zip(out_bat, batching.batch_jaxpr(b, size, in_dims)[1])]
        new = tuple(batching.batch_jaxpr(b, size, in_dims, out_bat)[0] for b in branches)
        outs = cond_p.bind(index, *ops, branches=new)
        return outs, [0 if b else batching.not_mapped for b in out_bat]
    # A batched index: run every branch, then pick per lane.
    index = batching.bdim_at_front(index, index_dim, size)
    cases = [batching.batch_flat(b, size, ops, in_dims, lambda avals: [0] * n_out)
             for b in branches]
    return [ew.select_n(broadcast_in_dim(index, get_aval(c[0]).shape, (0,)), *c)
            for c in zip(*cases)], [0] * n_out


# ---- lowering: stablehlo.case ----

def _cond_lowering(ctx, index, *ops, branches):
    case = hlo.CaseOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], index, len(branches))
    for region, b in zip(case.regions, branches):
        with ir.InsertionPoint(region.blocks.append()):
            hlo.return_(mlir.jaxpr_subcomp(ctx.module_ctx, b.jaxpr, b.consts, list(ops)))
    return list(case.results)


cond_p = standard_primitive("cond", _cond_abstract_eval, multiple_results=True)
allow_extended(cond_p)  # typed keys: the body's values have physical types
dispatch.def_structural_impl(cond_p)
ad.primitive_jvps[cond_p] = _cond_jvp
ad.primitive_transposes[cond_p] = _cond_transpose
ad.defnonlinear_operands(cond_p, slice(0, 1))   # the branch index
pe.partial_eval_rules[cond_p] = _cond_partial_eval
batching.primitive_batchers[cond_p] = _cond_batch
mlir.register_lowering(cond_p, _cond_lowering)
