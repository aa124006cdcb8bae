"""``lax.reduce``: reduction of several operands by any scalar computation.

A computation that is a known monoid (``add`` from 0, ``max`` from -inf, ...) on one
operand becomes the matching ``reduce_*`` primitive, as in JAX; anything else binds
``reduce``, whose param is the computation traced to a jaxpr on scalars and which
lowers to a ``stablehlo.reduce`` with that body. Its JVP is JAX's: a balanced tree of
pairwise applications of the (vmapped) computation, differentiated as ordinary code.
"""
import numpy as np

from xform.core import tree_util
from xform.core.avals import ShapedArray
from xform.core.trace import Tracer, get_aval, to_concrete_value
from xform.core.traceback_util import api_boundary
from xform.core.jaxpr import ClosedJaxpr, Jaxpr
from xform.interpreters import ad, batching, dispatch, mlir
from xform.interpreters import partial_eval as pe
from xform.lax import bitwise, elementwise as ew, reductions, shapes
from xform.lax._prim import standard_primitive
from xform.lax.dynamic_slicing import slice_in_dim

hlo, ir = mlir.hlo, mlir.ir


@api_boundary
def reduce(operands, init_values, computation, dimensions):
    """Reduce ``operands`` over ``dimensions`` with ``computation``, starting from
    ``init_values`` (JAX's ``lax.reduce``).

    Args:
      operands: an array or a pytree of arrays of one shape.
      init_values: scalars with the structure of ``operands``.
      computation: ``(accumulators, values) -> accumulators`` on scalars, with the
        structure of ``init_values`` for each argument and the result.
      dimensions: the axes to reduce.

    Returns:
      The reduced value(s), with ``init_values``' structure.

    >>> import xform.numpy as jnp
    >>> from xform import lax
    >>> lax.reduce(jnp.arange(6.).reshape(2, 3), 0., lax.add, (1,))
    Array([ 3., 12.], dtype=float32)
    """
    flat_ops, tree = tree_util.tree_flatten(operands)
    flat_inits, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError("Operands must have the same tree structure as init_values: "
                         f"{tree} vs. {init_tree}")
    if len(flat_ops) != len(flat_inits):
        raise ValueError("Must have same total number of operands as init_values: "
                         f"{len(flat_ops)} vs. {len(flat_inits)}")
    dims = tuple(int(d) for d in dimensions)
    if len(flat_ops) == 1:
        monoid = _monoid_reducer(computation, flat_inits[0])
        if monoid is not None:
            return tree_util.tree_unflatten(tree, [monoid(flat_ops[0], dims)])
    closed, out_tree = reduction_jaxpr(computation, init_values)
    if out_tree != tree:
        raise TypeError(f"reduce: computation returned structure {out_tree}, expected "
                        f"{tree} (the structure of init_values)")
    outs = reduce_p.bind(*flat_ops, *flat_inits, computation=closed, dimensions=dims)
    return tree_util.tree_unflatten(tree, outs)


def reduction_jaxpr(computation, init_values):
    """``computation(accumulators, values)`` traced on scalars of ``init_values``' dtypes
    to a ClosedJaxpr of the flat scalars (for reduce's and reduce_window's bodies);
    returns it with the structure of its result."""
    scalars = [ShapedArray((), get_aval(x).dtype) for x in tree_util.tree_leaves(init_values)]
    pair_tree = tree_util.tree_structure((init_values, init_values))
    closed, consts, out_tree = pe.trace_to_subjaxpr(computation, pair_tree, scalars + scalars)
    if any(isinstance(c, Tracer) for c in consts):
        raise TypeError("Reduction computations can't close over Tracers. Please open an "
                        "issue at https://github.com/jax-ml/jax.")
    j = closed.jaxpr
    n_c = len(consts)
    return ClosedJaxpr(Jaxpr(j.invars[:n_c], j.invars[n_c:], j.outvars, j.eqns), consts), out_tree


def _monoid_reducer(op, init):
    init = to_concrete_value(init)
    if init is None:
        return None
    val = np.asarray(init)
    dt = val.dtype
    if op is ew.add and val == 0:
        return reductions.reduce_sum
    if op is ew.mul and val == 1:
        return reductions.reduce_prod
    if op is ew.max and val == reductions._lowest(dt):
        return reductions.reduce_max
    if op is ew.min and val == reductions._highest(dt):
        return reductions.reduce_min
    if op is bitwise.bitwise_or and val == 0:
        return reductions.reduce_or
    if op is bitwise.bitwise_and and val == reductions._all_ones(dt):
        return reductions.reduce_and
    if op is bitwise.bitwise_xor and val == 0:
        return reductions.reduce_xor
    return None


def _reduce_abstract_eval(*avals, computation, dimensions):
    n = len(avals) // 2
    ops, inits = avals[:n], avals[n:]
    shape = ops[0].shape
    for a in ops:
        if a.shape != shape:
            raise ValueError(f"reduce found non-scalar initial value or operands of "
                             f"different shapes: {[o.str_short() for o in ops]}")
    for o, i in zip(ops, inits):
        if i.shape or i.dtype != o.dtype:
            raise TypeError(f"reduce: init value {i.str_short()} must be a scalar of the "
                            f"operand's dtype {o.dtype.name}")
    if any(not 0 <= d < len(shape) for d in dimensions):
        raise ValueError(f"reduce: dimensions {dimensions} out of bounds for shape {shape}")
    out_shape = tuple(s for i, s in enumerate(shape) if i not in dimensions)
    return [ShapedArray(out_shape, o.dtype) for o in ops]


def _reduce_lowering(ctx, *args, computation, dimensions):
    n = len(args) // 2
    scalar_types = [mlir.aval_to_ir_type(ShapedArray((), a.dtype)) for a in ctx.avals_in[:n]]
    op = hlo.ReduceOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(args[:n]),
                      list(args[n:]), mlir.dense_i64(dimensions))
    block = op.regions[0].blocks.append(*(scalar_types * 2))
    with ir.InsertionPoint(block):
        outs = mlir.jaxpr_subcomp(ctx.module_ctx, computation.jaxpr, computation.consts,
                                  list(block.arguments))
        hlo.return_(list(outs))
    return list(op.results)


def _reduce_batch(vals, dims, *, computation, dimensions):
    n = len(vals) // 2
    ops = batching.operands_at_front(
        vals, dims, n, "reduce: batching over init_values is not supported (as in JAX)")
    outs = reduce_p.bind(*ops, *vals[n:], computation=computation,
                         dimensions=tuple(d + 1 for d in dimensions))
    return outs, [0] * n


def _reduce_jvp(primals, tangents, *, computation, dimensions):
    n = len(primals) // 2
    ops, inits = list(primals[:n]), list(primals[n:])
    if any(type(t) is not ad.Zero for t in tangents[n:]):
        raise NotImplementedError("reduce: differentiation with respect to init_values")
    shape = get_aval(ops[0]).shape
    kept = [i for i in range(len(shape)) if i not in dimensions]
    size = int(np.prod([shape[d] for d in dimensions], dtype=np.int64))
    new_shape = (size,) + tuple(shape[i] for i in kept)
    perm = tuple(dimensions) + tuple(kept)
    ops = [shapes.reshape(x, new_shape, perm) for x in ops]
    dots = [shapes.reshape(ad.instantiate_zeros(t), new_shape, perm) for t in tangents[:n]]

    def vmapped(f):   # the mechanism, not the public vmap: all axes 0 in and out
        def batched(*xs):
            return batching.batch_flat(f, get_aval(xs[0]).shape[0], list(xs), [0] * len(xs),
                                       lambda avals: [0] * len(avals))
        return batched

    def reducer(*xs):
        return computation(*xs)
    for _ in range(len(kept) + 1):
        reducer = vmapped(reducer)

    def tree(*xs):
        while xs[0].shape[0] > 1:
            m = xs[0].shape[0]
            m1 = (m + 1) // 2
            xs1 = [slice_in_dim(x, 0, m1) for x in xs]
            xs2 = [slice_in_dim(x, m1, m) for x in xs]
            if m - m1 != m1:
                cfg = [(0, 1, 0)] + [(0, 0, 0)] * len(kept)
                xs2 = [shapes.pad(x, i, cfg) for x, i in zip(xs2, inits)]
            xs = reducer(*xs1, *xs2)
        if xs[0].shape[0] == 0:
            return [shapes.full(new_shape[1:], i) for i in inits]
        return [shapes.squeeze(x, (0,)) for x in xs]
    outs, out_dots = ad.jvp_flat(tree, ops, dots)
    return list(outs), [ad.instantiate_zeros(t) for t in out_dots]


reduce_p = standard_primitive("reduce", _reduce_abstract_eval, multiple_results=True)
dispatch.def_structural_impl(reduce_p)
ad.primitive_jvps[reduce_p] = _reduce_jvp
batching.primitive_batchers[reduce_p] = _reduce_batch
mlir.register_lowering(reduce_p, _reduce_lowering)
