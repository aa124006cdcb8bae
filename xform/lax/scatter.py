"""The scatter family: scatter, scatter-add, scatter-sub, scatter-mul, scatter-min,
scatter-max.

They share gather's dimension numbers and modes (``xform/lax/slicing.py``); scatters drop
out-of-bounds update windows unless ``mode`` is CLIP. Index operands are never
differentiated.
"""
import numpy as np

from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.core.transfer import scalar_array
from xform.lax._prim import check_dtype, numeric, standard_primitive
from xform.lax.elementwise import _const, add, div, eq, mul, select_n, sub
from xform.lax.elementwise import max as lmax, min as lmin, max_hlo, min_hlo
from xform.lax.shapes import broadcast_in_dim, full, reshape
from xform.lax import shapes as _shapes
from xform.lax.slicing import (GatherScatterMode, ScatterDimensionNumbers, _check_dims,
                               _check_disjoint, _check_indices, _dnums, _gather_dnums_of,
                               _lower_traced, _shift, gather)

hlo, ir = mlir.hlo, mlir.ir


# ---- scatter family ----

def _scatter(prim, operand, scatter_indices, updates, dimension_numbers, indices_are_sorted,
             unique_indices, mode):
    return prim.bind(operand, scatter_indices, updates,
                     dimension_numbers=_dnums(ScatterDimensionNumbers, dimension_numbers),
                     indices_are_sorted=bool(indices_are_sorted),
                     unique_indices=bool(unique_indices),
                     mode=GatherScatterMode.from_any(mode))


_SCATTER_DOC = """{summary}

    Args:
      operand: the array to update.
      scatter_indices: integer array; its last dimension holds the index vectors.
      updates: the update windows, of ``operand``'s dtype.
      dimension_numbers: a ``ScatterDimensionNumbers``.
      indices_are_sorted: promise that the indices are sorted.
      unique_indices: promise that no two windows overlap.
      mode: a ``GatherScatterMode`` or string; the default (FILL_OR_DROP) drops
        out-of-bounds windows, CLIP clamps them into bounds.

    Returns:
      The updated copy of ``operand``.

    Raises:
      TypeError: for ill-formed dimension numbers, shapes or dtypes.

    >>> import numpy as np
    >>> dn = ScatterDimensionNumbers((), (0,), (0,))
    >>> {name}(np.ones(4), np.array([[1], [3], [1]]), np.array([2., 3., 4.]), dn)
    {example}
    """


def scatter(operand, scatter_indices, updates, dimension_numbers, *,
            indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter(scatter_p, operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_add(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter(scatter_add_p, operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter(scatter_sub_p, operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_mul(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter(scatter_mul_p, operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_min(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter(scatter_min_p, operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_max(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter(scatter_max_p, operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


for _f, _summary, _example in [
        (scatter, "Scatter-update: windows of ``updates`` overwrite ``operand`` at the "
                  "indices (which of several overlapping updates wins is unspecified).",
         "Array([1., 4., 1., 3.], dtype=float32)"),
        (scatter_add, "Scatter-add: windows of ``updates`` are added into ``operand`` "
                      "(overlapping updates accumulate).",
         "Array([1., 7., 1., 4.], dtype=float32)"),
        (scatter_sub, "Scatter-subtract: windows of ``updates`` are subtracted from "
                      "``operand`` (overlapping updates accumulate).",
         "Array([ 1., -5.,  1., -2.], dtype=float32)"),
        (scatter_mul, "Scatter-multiply: ``operand`` is multiplied by the update windows.",
         "Array([1., 8., 1., 3.], dtype=float32)"),
        (scatter_min, "Scatter-min: elementwise minimum of ``operand`` and the updates.",
         "Array([1., 1., 1., 1.], dtype=float32)"),
        (scatter_max, "Scatter-max: elementwise maximum of ``operand`` and the updates.",
         "Array([1., 4., 1., 3.], dtype=float32)")]:
    _f.__doc__ = _SCATTER_DOC.format(summary=_summary, name=_f.__name__, example=_example)


def _scatter_abstract_eval(name, allowed):
    def rule(operand, indices, updates, *, dimension_numbers, **_):
        dn = dimension_numbers
        check_dtype(name, operand.dtype, allowed)
        _check_indices(name, indices, "scatter_indices")
        if operand.dtype != updates.dtype:
            raise TypeError(f"{name} requires operand and updates of the same dtype, got "
                            f"{operand.dtype.name} and {updates.dtype.name}")
        batch_shape = indices.shape[:-1]
        if updates.ndim != len(batch_shape) + len(dn.update_window_dims):
            raise TypeError(f"{name}: updates must be of rank {len(batch_shape)} + "
                            f"len(update_window_dims) = "
                            f"{len(batch_shape) + len(dn.update_window_dims)}; got updates "
                            f"shape {updates.shape}")
        _check_dims(dn.update_window_dims, updates.ndim, name, "update_window_dims")
        _check_dims(dn.inserted_window_dims, operand.ndim, name, "inserted_window_dims")
        _check_dims(dn.operand_batching_dims, operand.ndim, name, "operand_batching_dims")
        _check_dims(dn.scatter_dims_to_operand_dims, operand.ndim, name,
                    "scatter_dims_to_operand_dims", False)
        _check_dims(dn.scatter_indices_batching_dims, len(batch_shape), name,
                    "scatter_indices_batching_dims", False)
        _check_disjoint(dn.inserted_window_dims, dn.operand_batching_dims, name,
                        "inserted_window_dims", "operand_batching_dims")
        _check_disjoint(dn.scatter_dims_to_operand_dims, dn.operand_batching_dims, name,
                        "scatter_dims_to_operand_dims", "operand_batching_dims")
        if len(dn.scatter_dims_to_operand_dims) != indices.shape[-1]:
            raise TypeError(f"{name} has {len(dn.scatter_dims_to_operand_dims)} elements in "
                            f"scatter_dims_to_operand_dims but the last dimension of "
                            f"scatter_indices (shape {indices.shape}) is "
                            f"{indices.shape[-1]}; they must be equal.")
        if operand.ndim != (len(dn.update_window_dims) + len(dn.inserted_window_dims)
                            + len(dn.operand_batching_dims)):
            raise TypeError(f"{name}: every operand dimension must be a window, inserted "
                            f"or batching dimension; got operand shape {operand.shape} "
                            f"with {dn}")
        op_batch = tuple(operand.shape[d] for d in dn.operand_batching_dims)
        idx_batch = tuple(indices.shape[d] for d in dn.scatter_indices_batching_dims)
        if op_batch != idx_batch:
            raise TypeError(f"{name} requires operand batching dimensions and indices "
                            f"batching dimensions of the same shape, got {op_batch} and "
                            f"{idx_batch}.")
        dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
        max_window = [s for i, s in enumerate(operand.shape) if i not in dropped]
        for d, bound in zip(dn.update_window_dims, max_window):
            if updates.shape[d] > bound:
                raise TypeError(f"{name}: window dimension {d} of updates (shape "
                                f"{updates.shape}) exceeds the operand bound {bound}.")
        scatter_shape = tuple(s for i, s in enumerate(updates.shape)
                              if i not in dn.update_window_dims)
        if scatter_shape != batch_shape:
            raise TypeError(f"{name}: the scatter dimensions of updates (shape "
                            f"{updates.shape}, window dims {dn.update_window_dims}) must "
                            f"match the batch shape {batch_shape} of scatter_indices")
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)
    return rule


def _window_sizes(operand_shape, updates_shape, dn):
    """The operand-shaped window of each update (1 on inserted/batching dims)."""
    dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window = iter(updates_shape[d] for d in dn.update_window_dims)
    return tuple(1 if i in dropped else next(window) for i in range(len(operand_shape)))


def _clamp_scatter_indices(operand, indices, updates, *, dimension_numbers):
    dn = dimension_numbers
    sizes = _window_sizes(get_aval(operand).shape, get_aval(updates).shape, dn)
    idx_dt = get_aval(indices).dtype
    upper = np.array([get_aval(operand).shape[d] - sizes[d]
                      for d in dn.scatter_dims_to_operand_dims], idx_dt)
    shape = get_aval(indices).shape
    upper = broadcast_in_dim(upper, shape, (len(shape) - 1,))
    return lmin(lmax(indices, _const(indices, 0)), upper)


def _scatter_lowering(combine):
    def rule(ctx, operand, indices, updates, *, dimension_numbers, indices_are_sorted,
             unique_indices, mode):
        dn = dimension_numbers
        if mode is GatherScatterMode.CLIP:
            indices = _lower_traced(ctx, _clamp_scatter_indices, operand, indices, updates,
                                    dimension_numbers=dn)
        attr = hlo.ScatterDimensionNumbers.get(
            update_window_dims=list(dn.update_window_dims),
            inserted_window_dims=list(dn.inserted_window_dims),
            input_batching_dims=list(dn.operand_batching_dims),
            scatter_indices_batching_dims=list(dn.scatter_indices_batching_dims),
            scattered_dims_to_operand_dims=list(dn.scatter_dims_to_operand_dims),
            index_vector_dim=ctx.avals_in[1].ndim - 1)
        aval = ctx.avals_out[0]
        op = hlo.ScatterOp([mlir.aval_to_ir_type(aval)], [operand], indices, [updates], attr,
                           indices_are_sorted=ir.BoolAttr.get(indices_are_sorted),
                           unique_indices=ir.BoolAttr.get(unique_indices))
        scalar = mlir.aval_to_ir_type(ShapedArray((), aval.dtype))
        block = op.update_computation.blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            hlo.return_([combine(*block.arguments)])
        return op.results[0]
    return rule


def _scatter_batch(prim):
    def rule(vals, dims, *, dimension_numbers, **params):
        (operand, indices, updates), (op_bd, idx_bd, upd_bd) = vals, dims
        dn = dimension_numbers
        size = batching.axis_size_of(vals, dims)
        operand = batching.bdim_at_front(operand, op_bd, size)
        updates = batching.bdim_at_front(updates, upd_bd, size)
        if idx_bd is batching.not_mapped:   # the batch axis is a window dimension
            new = ScatterDimensionNumbers(
                (0,) + _shift(dn.update_window_dims), _shift(dn.inserted_window_dims),
                _shift(dn.scatter_dims_to_operand_dims), _shift(dn.operand_batching_dims),
                dn.scatter_indices_batching_dims)
        else:                               # pair the batch axes as batching dims
            indices = batching.moveaxis(indices, idx_bd, 0)
            new = ScatterDimensionNumbers(
                _shift(dn.update_window_dims), _shift(dn.inserted_window_dims),
                _shift(dn.scatter_dims_to_operand_dims),
                (0,) + _shift(dn.operand_batching_dims),
                (0,) + _shift(dn.scatter_indices_batching_dims))
        return prim.bind(operand, indices, updates, dimension_numbers=new, **params), 0
    return rule


def _scatter_prim(name, combine, allowed=None):
    prim = standard_primitive(name, _scatter_abstract_eval(name, allowed))
    batching.primitive_batchers[prim] = _scatter_batch(prim)
    mlir.register_lowering(prim, _scatter_lowering(combine))
    return prim


def _gather_back(x, indices, updates_aval, dn, mode=None, fill_value=None):
    """The gather that reads, at every update position, the ``x`` it scatters into."""
    sizes = _window_sizes(get_aval(x).shape, updates_aval.shape, dn)
    return gather(x, indices, _gather_dnums_of(dn), sizes, mode=mode, fill_value=fill_value)


def _both_zero(*ts):
    return all(type(t) is ad.Zero for t in ts)


def _zero_out(out):
    return ad.Zero(get_aval(out).to_tangent_aval())


def _linear_jvp(prim):
    """The JVP of scatter-add/-sub: linear in the operand and the updates together."""
    def jvp(primals, tangents, **params):
        (operand, indices, updates), (t_op, _, t_upd) = primals, tangents
        out = prim.bind(operand, indices, updates, **params)
        if _both_zero(t_op, t_upd):
            return out, _zero_out(out)
        return out, prim.bind(ad.instantiate_zeros(t_op), indices,
                              ad.instantiate_zeros(t_upd), **params)
    return jvp


def _scatter_add_transpose(ct, operand, indices, updates, *, dimension_numbers, mode, **_):
    ct_op = ct if ad.is_undefined_primal(operand) else None
    ct_upd = None
    if ad.is_undefined_primal(updates):
        ct_upd = _gather_back(ct, indices, updates.aval, dimension_numbers, mode, 0)
    return [ct_op, None, ct_upd]


scatter_add_p = _scatter_prim("scatter-add", hlo.add, numeric)
ad.primitive_jvps[scatter_add_p] = _linear_jvp(scatter_add_p)
ad.primitive_transposes[scatter_add_p] = _scatter_add_transpose
ad.defnonlinear_operands(scatter_add_p, slice(1, 2))   # the indices


def _scatter_sub_transpose(ct, operand, indices, updates, *, dimension_numbers, mode, **_):
    ct_op, _, ct_upd = _scatter_add_transpose(ct, operand, indices, updates,
                                              dimension_numbers=dimension_numbers, mode=mode)
    return [ct_op, None, None if ct_upd is None else sub(_const(ct_upd, 0), ct_upd)]


scatter_sub_p = _scatter_prim("scatter-sub", hlo.subtract, numeric)
ad.primitive_jvps[scatter_sub_p] = _linear_jvp(scatter_sub_p)
ad.primitive_transposes[scatter_sub_p] = _scatter_sub_transpose
ad.defnonlinear_operands(scatter_sub_p, slice(1, 2))   # the indices


def _scatter_mul_jvp(primals, tangents, *, unique_indices, **params):
    (operand, indices, updates), (t_op, _, t_upd) = primals, tangents
    out = scatter_mul_p.bind(operand, indices, updates, unique_indices=unique_indices,
                             **params)
    t = _zero_out(out)
    if type(t_op) is not ad.Zero:           # linear in the operand
        t = scatter_mul_p.bind(t_op, indices, updates, unique_indices=unique_indices,
                               **params)
    if type(t_upd) is not ad.Zero:
        if not unique_indices:
            raise NotImplementedError("scatter_mul gradients with respect to updates are "
                                      "only implemented if `unique_indices=True`")
        spread = scatter_add_p.bind(full(get_aval(operand).shape, 0, get_aval(t_upd).dtype),
                                    indices, t_upd, unique_indices=True, **params)
        t = ad.add_tangents(t, mul(operand, spread))
    return out, t


def _scatter_mul_transpose(ct, operand, indices, updates, *, unique_indices, **params):
    if ad.is_undefined_primal(updates):
        raise NotImplementedError("scatter_mul transpose with respect to updates is not "
                                  "implemented")
    return [scatter_mul_p.bind(ct, indices, updates, unique_indices=unique_indices,
                               **params), None, None]


scatter_mul_p = _scatter_prim("scatter-mul", hlo.multiply, numeric)
ad.primitive_jvps[scatter_mul_p] = _scatter_mul_jvp
ad.primitive_transposes[scatter_mul_p] = _scatter_mul_transpose
ad.defnonlinear_operands(scatter_mul_p, slice(1, 2))   # the indices


def _scatter_extremal_jvp(prim):
    # Where several values tie for the extremum, each gets an equal share of the
    # tangent (as JAX and reduce_max do): count winners per output position.
    def jvp(primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices,
            mode):
        (operand, indices, updates), (t_op, _, t_upd) = primals, tangents
        dn = dimension_numbers
        out = prim.bind(operand, indices, updates, dimension_numbers=dn,
                        indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode)
        if _both_zero(t_op, t_upd):
            return out, _zero_out(out)
        t_op, t_upd = ad.instantiate_zeros(t_op), ad.instantiate_zeros(t_upd)
        u_aval = get_aval(updates)
        back = lambda x: _gather_back(x, indices, u_aval, dn)  # noqa: E731
        zeros = _shapes.full_like(operand, 0)
        one = _const(updates, 1)
        ones_u, zeros_u = _shapes.full_like(updates, 1), _shapes.full_like(updates, 0)
        target = back(out)
        won = eq(updates, target)
        kept = eq(back(operand), target)
        n_won = back(scatter_add(zeros, indices, select_n(won, zeros_u, ones_u), dn))
        n_refs = back(scatter_add(zeros, indices, ones_u, dn))
        share = select_n(kept, div(one, n_won), div(one, add(n_won, one)))
        upd_coef = select_n(won, zeros_u, share)
        op_coef = div(sub(select_n(kept, zeros_u, div(one, add(n_won, one))), one), n_refs)
        t_new = add(mul(back(t_op), op_coef), mul(t_upd, upd_coef))
        return out, scatter_add(t_op, indices, t_new, dn, indices_are_sorted=indices_are_sorted,
                                unique_indices=unique_indices, mode=mode)
    return jvp


scatter_min_p = _scatter_prim("scatter-min", min_hlo)   # complex: lexicographic, as lax.min
ad.primitive_jvps[scatter_min_p] = _scatter_extremal_jvp(scatter_min_p)
scatter_max_p = _scatter_prim("scatter-max", max_hlo)
ad.primitive_jvps[scatter_max_p] = _scatter_extremal_jvp(scatter_max_p)


def _scatter_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted,
                 unique_indices, mode):
    (operand, indices, updates), (t_op, _, t_upd) = primals, tangents
    dn = dimension_numbers
    params = dict(dimension_numbers=dn, indices_are_sorted=indices_are_sorted, mode=mode)
    if _both_zero(t_op, t_upd) or unique_indices:
        out = scatter_p.bind(operand, indices, updates, unique_indices=unique_indices,
                             **params)
        if _both_zero(t_op, t_upd):
            return out, _zero_out(out)
        return out, scatter_p.bind(ad.instantiate_zeros(t_op), indices,
                                   ad.instantiate_zeros(t_upd), unique_indices=True,
                                   **params)
    # Overlapping updates: which one wins is unspecified, so scatter ids (1, 2, ...) to
    # learn the winners, mask the losers (and the overwritten operand entries) out, and
    # compute value and tangent with scatter-add, whose rules are simpler.
    t_op, t_upd = ad.instantiate_zeros(t_op), ad.instantiate_zeros(t_upd)
    u_shape = get_aval(updates).shape
    ids_shape = tuple(1 if i in dn.update_window_dims else s for i, s in enumerate(u_shape))
    n_ids = int(np.prod(ids_shape))
    ids = add(reshape(_shapes.iota(np.int32, n_ids), ids_shape), scalar_array(1, np.int32, False))
    ids = broadcast_in_dim(ids, u_shape, tuple(range(len(u_shape))))
    op_ids = scatter_p.bind(full(get_aval(operand).shape, 0, np.int32), indices, ids,
                            unique_indices=False, **params)
    won = eq(ids, _gather_back(op_ids, indices, get_aval(updates), dn))
    kept = eq(op_ids, scalar_array(0, np.int32, False))
    mask = lambda w, x: select_n(w, _shapes.full_like(x, 0), x)  # noqa: E731
    add_params = dict(params, unique_indices=False)
    out = scatter_add_p.bind(mask(kept, operand), indices, mask(won, updates), **add_params)
    t = scatter_add_p.bind(mask(kept, t_op), indices, mask(won, t_upd), **add_params)
    return out, t


def _scatter_transpose(ct, operand, indices, updates, *, dimension_numbers,
                       indices_are_sorted, unique_indices, mode):
    if not unique_indices:
        raise NotImplementedError("scatter transpose is only implemented where "
                                  "unique_indices=True")
    dn = dimension_numbers
    u_aval = updates.aval if ad.is_undefined_primal(updates) else get_aval(updates)
    ct_op = ct_upd = None
    if ad.is_undefined_primal(operand):   # overwritten entries get no cotangent
        ct_op = scatter_p.bind(ct, indices, full(u_aval.shape, 0, get_aval(ct).dtype),
                               dimension_numbers=dn, indices_are_sorted=indices_are_sorted,
                               unique_indices=True, mode=mode)
    if ad.is_undefined_primal(updates):
        ct_upd = _gather_back(ct, indices, u_aval, dn, mode, 0)
    return [ct_op, None, ct_upd]


scatter_p = _scatter_prim("scatter", lambda old, new: new)
ad.primitive_jvps[scatter_p] = _scatter_jvp
ad.primitive_transposes[scatter_p] = _scatter_transpose
ad.defnonlinear_operands(scatter_p, slice(1, 2))   # the indices
