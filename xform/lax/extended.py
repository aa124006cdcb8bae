"""Structural primitives on extended dtypes (typed PRNG keys, ``key<fry>``).

An array of an extended dtype has a logical shape (what users, abstract evaluation,
batching and AD see) and a physical one that XLA holds: each element is
``dtype._rules.physical_element_aval`` (``uint32[2]`` for a threefry key), appended as
trailing dimensions. ``mlir.aval_to_ir_type`` gives every value its physical type, so
calls, loops and conditionals carry keys with no rule of their own (they allow extended
operands where they are declared), and so do reshape, squeeze, concatenate and rev
(their lowerings only read the output type or leading dimensions). The primitives below index dimensions explicitly: their
extended lowering calls the ordinary one at physical avals with the trailing element
dimensions added to the parameters. Every other primitive refuses extended operands
(``_prim.allow_extended``), as JAX's arithmetic does.
"""
import numpy as np

from xform.core.avals import ShapedArray, physical_aval
from xform.interpreters import mlir
from xform.lax import barriers, dynamic_slicing, elementwise, shapes, slicing
from xform.lax._prim import allow_extended
from xform.lax.scatter import _scatter_lowering, scatter_p

hlo = mlir.hlo


def _physical(ctx, avals_in=None):
    return mlir.LoweringRuleContext(
        ctx.module_ctx, ctx.primitive,
        [physical_aval(a) for a in (avals_in or ctx.avals_in)],
        [physical_aval(a) for a in ctx.avals_out])


def _trailing(aval):
    """(first trailing physical dimension, its sizes) of an extended ``aval``."""
    phys = physical_aval(aval)
    return aval.ndim, phys.shape[aval.ndim:]


def _broadcast_in_dim(ctx, x, *, shape, broadcast_dimensions):
    n, elt = _trailing(ctx.avals_out[0])
    return shapes._broadcast_in_dim_lowering(
        _physical(ctx), x, shape=shape + elt,
        broadcast_dimensions=tuple(broadcast_dimensions) + tuple(range(n, n + len(elt))))


def _transpose(ctx, x, *, permutation):
    n, elt = _trailing(ctx.avals_in[0])
    return hlo.transpose(x, mlir.dense_i64(tuple(permutation) +
                                           tuple(range(n, n + len(elt)))))


def _slice(ctx, x, *, start_indices, limit_indices, strides):
    _, elt = _trailing(ctx.avals_in[0])
    return shapes._slice_lowering(
        _physical(ctx), x, start_indices=tuple(start_indices) + (0,) * len(elt),
        limit_indices=tuple(limit_indices) + elt,
        strides=None if strides is None else tuple(strides) + (1,) * len(elt))


def _zero_starts(ctx, first_start, n):
    """``n`` zero start indices for the trailing dimensions (and their avals)."""
    starts = ctx.avals_in[first_start:]
    aval = starts[0].update(shape=()) if starts else ShapedArray((), np.int32)
    return [mlir.ir_constant(np.zeros((), aval.dtype)) for _ in range(n)], [aval] * n


def _dynamic_slice(ctx, operand, *starts, slice_sizes):
    _, elt = _trailing(ctx.avals_in[0])
    zeros, zero_avals = _zero_starts(ctx, 1, len(elt))
    phys = _physical(ctx, list(ctx.avals_in) + zero_avals)
    return dynamic_slicing._dynamic_slice_lowering(
        phys, operand, *starts, *zeros, slice_sizes=tuple(slice_sizes) + elt)


def _dynamic_update_slice(ctx, operand, update, *starts):
    _, elt = _trailing(ctx.avals_in[0])
    zeros, zero_avals = _zero_starts(ctx, 2, len(elt))
    phys = _physical(ctx, list(ctx.avals_in) + zero_avals)
    return dynamic_slicing._dynamic_update_slice_lowering(phys, operand, update, *starts,
                                                          *zeros)


def _select_n(ctx, which, *cases):
    out = physical_aval(ctx.avals_out[0])
    w = ctx.avals_in[0]
    if w.shape:   # the predicate covers the logical dimensions
        which = hlo.broadcast_in_dim(mlir.aval_to_ir_type(w.update(shape=out.shape)), which,
                                     mlir.dense_i64(range(w.ndim)))
        w = w.update(shape=out.shape)
    phys = _physical(ctx, [w] + list(ctx.avals_in[1:]))
    return elementwise._select_n_lowering(phys, which, *cases)


def _gather(ctx, operand, indices, *, dimension_numbers, slice_sizes, **params):
    out_ndim, elt = _trailing(ctx.avals_out[0])
    dn = dimension_numbers._replace(
        offset_dims=tuple(dimension_numbers.offset_dims) +
        tuple(range(out_ndim, out_ndim + len(elt))))
    return slicing._gather_lowering(_physical(ctx), operand, indices, dimension_numbers=dn,
                                    slice_sizes=tuple(slice_sizes) + elt, **params)


_scatter_set = _scatter_lowering(lambda old, new: new)


def _scatter(ctx, operand, indices, updates, *, dimension_numbers, **params):
    upd_ndim, elt = ctx.avals_in[2].ndim, _trailing(ctx.avals_in[0])[1]
    dn = dimension_numbers._replace(
        update_window_dims=tuple(dimension_numbers.update_window_dims) +
        tuple(range(upd_ndim, upd_ndim + len(elt))))
    return _scatter_set(_physical(ctx), operand, indices, updates, dimension_numbers=dn,
                        **params)


for _prim, _rule in [(scatter_p, _scatter), (shapes.broadcast_in_dim_p, _broadcast_in_dim),
                     (shapes.transpose_p, _transpose), (shapes.slice_p, _slice),
                     (dynamic_slicing.dynamic_slice_p, _dynamic_slice),
                     (dynamic_slicing.dynamic_update_slice_p, _dynamic_update_slice),
                     (elementwise.select_n_p, _select_n), (slicing.gather_p, _gather)]:
    mlir.register_extended_lowering(_prim, _rule)
allow_extended(shapes.broadcast_in_dim_p, shapes.transpose_p, shapes.slice_p,
               shapes.reshape_p, shapes.squeeze_p, shapes.concatenate_p, shapes.rev_p,
               dynamic_slicing.dynamic_slice_p, dynamic_slicing.dynamic_update_slice_p,
               elementwise.select_n_p, slicing.gather_p, scatter_p,
               # a carrier (cond, while and scan allow themselves in control_flow/)
               barriers.optimization_barrier_p)
