"""``while_loop``: the ``while`` primitive and its rules.

The primitive's operands are ``cond_consts, body_consts, carry``; its params are
``cond_jaxpr`` (consts, carry -> bool[]), ``body_jaxpr`` (consts, carry -> carry) and
the two const counts, as in JAX. Forward mode works (a while over (primal, tangent)
carries); reverse mode cannot (the trip count is dynamic, so residuals have no static
size) and raises JAX's error at transposition. A batched predicate runs the loop until
every lane is done, freezing finished lanes with ``select_n``.
"""
import numpy as np

from xform.core import dtypes, tree_util
from xform.core.config import config
from xform.core.errors import ConcretizationTypeError
from xform.core.trace import get_aval, set_current_trace
from xform.core.traceback_util import api_boundary
from xform.interpreters import ad, batching, dispatch, mlir
from xform.interpreters import partial_eval as pe
from xform.lax._prim import allow_extended, standard_primitive
from xform.lax.control_flow.common import trace_jaxpr
from xform import ref as refs
from xform.lax.elementwise import convert_element_type, select_n
from xform.lax.reductions import reduce_or
from xform.lax.shapes import broadcast_in_dim
from xform.lax.control_flow.scan import check_carry_types

hlo, ir = mlir.hlo, mlir.ir


@api_boundary
def while_loop(cond_fun, body_fun, init_val, *, max_steps=None):
    """Call ``body_fun`` repeatedly while ``cond_fun`` is true.

    Semantics of this Python, staged as one ``while`` primitive (one StableHLO
    ``while``)::

        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val

    The carry must keep its pytree structure, shapes and dtypes across iterations.
    Forward-mode differentiable; reverse mode needs a static trip count (use
    ``lax.scan``, or pass ``max_steps`` for a bounded, reverse-differentiable loop).

    Args:
      cond_fun: carry -> boolean scalar.
      body_fun: carry -> carry.
      init_val: the initial carry, a pytree of arrays.
      max_steps: optional static bound on the number of iterations; the loop is then
        lowered via ``lax.scan`` (xform extension).

    Returns:
      The carry after the last iteration.

    Raises:
      TypeError: if ``cond_fun`` does not return a boolean scalar, or ``body_fun``'s
        output carry differs from ``init_val`` in structure, shape or dtype.

    >>> from xform import lax
    >>> print(lax.while_loop(lambda i: i < 10, lambda i: i * 2, 1))
    16
    """
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    if max_steps is not None:
        from xform.lax.control_flow import scan_loops  # (a cycle: fori_loop is a while_loop)
        return scan_loops.bounded_while_loop(cond_fun, body_fun, init_val, max_steps)
    if config.jax_disable_jit:
        try:
            val = init_val
            while cond_fun(val):
                val = body_fun(val)
            return val
        except ConcretizationTypeError:
            pass  # traced under vmap/jvp...: stage the primitive instead

    def call(funs, values):  # refs from outside the functions ride along in the carry
        if not values:
            return _while_loop(funs[0], funs[1], init_val), []
        return _while_loop(funs[0], funs[1], (init_val, values))

    def adapt(i, inner):
        if i == 0:
            return lambda carry: inner(carry[1], carry[0])[0]
        return lambda carry: inner(carry[1], carry[0])
    return refs.thread_refs(call, [cond_fun, body_fun], adapt)


def _while_loop(cond_fun, body_fun, init_val):
    leaves, in_tree = tree_util.tree_flatten(init_val)
    args_tree = tree_util.tree_structure((init_val,))
    avals = [get_aval(x) for x in leaves]
    cond_jaxpr, cond_consts, body_jaxpr, body_consts, body_tree = _trace_loop(
        cond_fun, body_fun, args_tree, avals)
    # A weakly typed init (a Python scalar) takes the dtype the body gives it, as in JAX.
    promoted = [convert_element_type(x, dtypes.result_type(x, o.dtype))
                if a.weak_type and (a.shape, a.dtype) != (o.shape, o.dtype) else x
                for x, a, o in zip(leaves, avals, body_jaxpr.out_avals)] \
        if body_tree == in_tree else leaves
    if any(p is not x for p, x in zip(promoted, leaves)):
        leaves, avals = promoted, [get_aval(x) for x in promoted]
        cond_jaxpr, cond_consts, body_jaxpr, body_consts, body_tree = _trace_loop(
            cond_fun, body_fun, args_tree, avals)
    _check_carry(body_fun, in_tree, avals, body_tree, body_jaxpr.out_avals)
    outs = while_p.bind(*cond_consts, *body_consts, *leaves,
                        cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                        cond_nconsts=len(cond_consts), body_nconsts=len(body_consts))
    return tree_util.tree_unflatten(in_tree, outs)


def _trace_loop(cond_fun, body_fun, args_tree, avals):
    cond_jaxpr, cond_consts, cond_tree = trace_jaxpr(cond_fun, args_tree, avals)
    out = cond_jaxpr.out_avals
    if cond_tree.num_leaves != 1 or len(out) != 1 or out[0].shape or out[0].dtype != np.bool_:
        got = ", ".join(a.str_short() for a in out) or "no outputs"
        raise TypeError(f"lax.while_loop: cond_fun must return a boolean scalar, but got "
                        f"output type(s) {got} (pytree {cond_tree}).")
    body_jaxpr, body_consts, body_tree = trace_jaxpr(body_fun, args_tree, avals)
    return cond_jaxpr, cond_consts, body_jaxpr, body_consts, body_tree


def _check_carry(body_fun, in_tree, in_avals, out_tree, out_avals):
    if out_tree == in_tree and all(  # (the common case: no error message to build)
            (a.shape, a.dtype, a._sharding, a.vma) == (o.shape, o.dtype, o._sharding, o.vma)
            for a, o in zip(in_avals, out_avals)):
        return
    name = getattr(body_fun, "__name__", "body_fun")
    if out_tree != in_tree:
        raise TypeError(
            f"lax.while_loop: body_fun ({name}) output and init_val must have the same "
            f"pytree structure, but got\n  body_fun output: {out_tree}\n  init_val:        "
            f"{in_tree}.")
    diffs = [f"  carry{tree_util.keystr(p) if p else ''}: init_val has type "
             f"{a.str_short()} but body_fun output has type {o.str_short()}"
             for p, a, o in zip(_paths(in_tree), in_avals, out_avals)
             if (a.shape, a.dtype) != (o.shape, o.dtype)]
    check_carry_types("while_loop body", [f"c{tree_util.keystr(p)}" for p in _paths(in_tree)],
                      in_avals, out_avals)
    if diffs:
        raise TypeError(f"lax.while_loop: body_fun ({name}) output must have the same "
                        "types as init_val (the loop carry keeps its shape and dtype):\n"
                        + "\n".join(diffs))


def _paths(tree):
    dummy = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    return [p for p, _ in tree_util.tree_flatten_with_path(dummy)[0]]


def _split(xs, cond_nconsts, body_nconsts):
    xs = list(xs)
    return (xs[:cond_nconsts], xs[cond_nconsts:cond_nconsts + body_nconsts],
            xs[cond_nconsts + body_nconsts:])


def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts, carry = _split(avals, cond_nconsts, body_nconsts)
    if len(cond_jaxpr.in_avals) != len(cconsts) + len(carry) or \
            len(body_jaxpr.in_avals) != len(bconsts) + len(carry):
        raise TypeError(f"while: operand count {len(avals)} does not match its jaxprs")
    return body_jaxpr.out_avals


# ---- JVP: a while over (primal, tangent) carries ----

def _nonzero(t):
    return type(t) is not ad.Zero and dtypes.is_inexact(get_aval(t).dtype)


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    nz = [_nonzero(t) for t in tangents]
    _, bconst_nz, carry_nz = _split(nz, cond_nconsts, body_nconsts)
    inexact = [dtypes.is_inexact(a.dtype) for a in body_jaxpr.out_avals]
    for _ in range(len(carry_nz) + 1):  # fixpoint: which carries get nonzero tangents
        body_jvp, out_nz = ad.jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, carry_nz)
        out_nz = [a and b for a, b in zip(out_nz, inexact)]
        if out_nz == carry_nz:
            break
        carry_nz = [a or b for a, b in zip(carry_nz, out_nz)]
    cconsts, bconsts, carry = _split(primals, cond_nconsts, body_nconsts)
    _, bconst_t, carry_t = _split(tangents, cond_nconsts, body_nconsts)
    bconst_dots = [t for t, n in zip(bconst_t, bconst_nz) if n]
    carry_dots = [ad.instantiate_zeros(t) for t, n in zip(carry_t, carry_nz) if n]
    nb, nc, nbd = len(bconsts), len(carry), len(bconst_dots)

    def body(*args):  # (bconsts, bconst_dots, carry, carry_dots) in the while's order
        b, bd, c, cd = args[:nb], args[nb:nb + nbd], args[nb + nbd:nb + nbd + nc], \
            args[nb + nbd + nc:]
        return body_jvp(*b, *c, *bd, *cd)

    def cond(*args):
        return cond_jaxpr(*args[:cond_nconsts + nc])

    avals = lambda xs: [get_aval(x) for x in xs]  # noqa: E731
    new_body = pe.trace_to_jaxpr(body, avals(bconsts + bconst_dots + carry + carry_dots))
    new_cond = pe.trace_to_jaxpr(cond, avals(cconsts + carry + carry_dots))
    outs = while_p.bind(*cconsts, *bconsts, *bconst_dots, *carry, *carry_dots,
                        cond_jaxpr=new_cond, body_jaxpr=new_body,
                        cond_nconsts=cond_nconsts, body_nconsts=nb + nbd)
    dots = iter(outs[nc:])
    return outs[:nc], [next(dots) if n else ad.Zero(a.to_tangent_aval())
                       for n, a in zip(carry_nz, body_jaxpr.out_avals)]


# ---- partial evaluation: known carries by a known loop; the rest is staged whole ----

def _while_partial_eval(trace, tracers, params):
    cond_jaxpr, body_jaxpr = params["cond_jaxpr"], params["body_jaxpr"]
    cond_nconsts, body_nconsts = params["cond_nconsts"], params["body_nconsts"]
    uk = [t.jvar is not None for t in tracers]
    cconst_uk, bconst_uk, carry_uk = _split(uk, cond_nconsts, body_nconsts)
    for _ in range(len(carry_uk) + 1):
        known_body, _, out_uk, _ = pe.partial_eval_jaxpr(body_jaxpr, bconst_uk + carry_uk,
                                                         carry_uk)
        if out_uk == carry_uk:
            break
        carry_uk = [a or b for a, b in zip(carry_uk, out_uk)]
    known_cond, _, (pred_uk,), _ = pe.partial_eval_jaxpr(cond_jaxpr, cconst_uk + carry_uk,
                                                         False)
    if pred_uk or all(carry_uk):
        return trace.stage(while_p, tracers, params)
    cconsts, bconsts, carry = _split(tracers, cond_nconsts, body_nconsts)
    known = lambda ts, mask: [t.value for t, u in zip(ts, mask) if not u]  # noqa: E731
    k_cconsts, k_bconsts, k_carry = (known(cconsts, cconst_uk), known(bconsts, bconst_uk),
                                     known(carry, carry_uk))
    n_out = len(k_carry)
    # Drop the residuals the known parts also return: the loop keeps only carries.
    k_cond = pe.trace_to_jaxpr(lambda *a: known_cond(*a)[:1],
                               [get_aval(x) for x in k_cconsts + k_carry])
    k_body = pe.trace_to_jaxpr(lambda *a: known_body(*a)[:n_out],
                               [get_aval(x) for x in k_bconsts + k_carry])
    with set_current_trace(trace.parent):
        known_outs = while_p.bind(*k_cconsts, *k_bconsts, *k_carry, cond_jaxpr=k_cond,
                                  body_jaxpr=k_body, cond_nconsts=len(k_cconsts),
                                  body_nconsts=len(k_bconsts))
    # The unknown carries need the whole loop again (the primal is recomputed).
    staged = trace.stage(while_p, tracers, params)
    known_it = iter(known_outs)
    return [s if u else pe.JaxprTracer(trace, value=next(known_it))
            for s, u in zip(staged, carry_uk)]


def _while_transpose(cts, *args, **params):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or "
                     "lax.fori_loop with dynamic start/stop values. Try using lax.scan, "
                     "or using fori_loop with static start/stop.")


# ---- batching ----

def _any_lane(pred):
    """True while some lane's predicate is true."""
    return reduce_or(pred, (0,))


def _while_batch(vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    size = batching.axis_size_of(vals, dims)
    vals = [batching.bdim_at_front(v, d, size) if d is not batching.not_mapped else v
            for v, d in zip(vals, dims)]
    bat = [d is not batching.not_mapped for d in dims]
    in_dims = lambda mask: [0 if b else batching.not_mapped for b in mask]  # noqa: E731
    cconst_bat, bconst_bat, carry_bat = _split(bat, cond_nconsts, body_nconsts)
    for _ in range(len(carry_bat) + 1):  # fixpoint: which carries become batched
        _, out_bat = batching.batch_jaxpr(body_jaxpr, size, in_dims(bconst_bat + carry_bat))
        if all(o <= c for o, c in zip(out_bat, carry_bat)):
            break
        carry_bat = [a or b for a, b in zip(carry_bat, out_bat)]
    _, (pred_bat,) = batching.batch_jaxpr(cond_jaxpr, size, in_dims(cconst_bat + carry_bat))
    if pred_bat:
        carry_bat = [True] * len(carry_bat)
    cconsts, bconsts, carry = _split(vals, cond_nconsts, body_nconsts)
    init_bat = _split(bat, cond_nconsts, body_nconsts)[2]
    carry = [batching.broadcast(c, size, 0) if b and not old else c
             for c, b, old in zip(carry, carry_bat, init_bat)]
    b_body, _ = batching.batch_jaxpr(body_jaxpr, size, in_dims(bconst_bat + carry_bat), carry_bat)
    b_cond, _ = batching.batch_jaxpr(cond_jaxpr, size, in_dims(cconst_bat + carry_bat), [pred_bat])
    nc, nb = len(cconsts), len(bconsts)
    if not pred_bat:
        outs = while_p.bind(*cconsts, *bconsts, *carry, cond_jaxpr=b_cond, body_jaxpr=b_body,
                            cond_nconsts=nc, body_nconsts=nb)
        return outs, in_dims(carry_bat)

    # Batched predicate: loop while any lane runs; a finished lane keeps its carry.
    def cond(*args):
        return [_any_lane(b_cond(*args)[0])]

    def body(*args):
        c_consts, b_consts, old = args[:nc], args[nc:nc + nb], args[nc + nb:]
        pred = b_cond(*c_consts, *old)[0]
        new = b_body(*b_consts, *old)
        return [select_n(broadcast_in_dim(pred, get_aval(o).shape, (0,)), o, n)
                for o, n in zip(old, new)]

    avals = [get_aval(x) for x in cconsts + bconsts + carry]
    new_cond = pe.trace_to_jaxpr(cond, avals[:nc] + avals[nc + nb:])
    new_body = pe.trace_to_jaxpr(body, avals)
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *carry, cond_jaxpr=new_cond,
                        body_jaxpr=new_body, cond_nconsts=nc, body_nconsts=nc + nb)
    return outs, [0] * len(outs)


# ---- lowering: stablehlo.while ----

def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    types = [mlir.aval_to_ir_type(a) for a in ctx.avals_in]
    op = hlo.WhileOp(types, list(args))
    cond_block = op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        cconsts, _, carry = _split(cond_block.arguments, cond_nconsts, body_nconsts)
        pred, = mlir.jaxpr_subcomp(ctx.module_ctx, cond_jaxpr.jaxpr, cond_jaxpr.consts,
                                   cconsts + carry)
        hlo.return_([pred])
    body_block = op.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body_block):
        consts = list(body_block.arguments)[:cond_nconsts + body_nconsts]
        _, bconsts, carry = _split(body_block.arguments, cond_nconsts, body_nconsts)
        outs = mlir.jaxpr_subcomp(ctx.module_ctx, body_jaxpr.jaxpr, body_jaxpr.consts,
                                  bconsts + carry)
        hlo.return_(consts + list(outs))
    return list(op.results)[cond_nconsts + body_nconsts:]


while_p = standard_primitive("while", _while_abstract_eval, multiple_results=True)
allow_extended(while_p)  # typed keys: the body's values have physical types
dispatch.def_structural_impl(while_p)
ad.primitive_jvps[while_p] = _while_jvp
ad.primitive_transposes[while_p] = _while_transpose
pe.partial_eval_rules[while_p] = _while_partial_eval
batching.primitive_batchers[while_p] = _while_batch
mlir.register_lowering(while_p, _while_lowering)
