"""Indexing primitives: gather and the scatter family (scatter, scatter-add,
scatter-mul, scatter-min, scatter-max) with their dimension numbers and modes.

Out-of-bounds semantics follow JAX: gather's
``mode`` clamps (CLIP; PROMISE_IN_BOUNDS as XLA implements it) or fills (FILL_OR_DROP);
scatters drop out-of-bounds update windows unless ``mode`` is CLIP. Index operands are
never differentiated.
"""
import enum
from typing import NamedTuple

import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters.dispatch import scalar_array
from xform.lax._prim import check_dtype, numeric, standard_primitive
from xform.lax.elementwise import (_const, add, convert_element_type, div, eq, gt, lt, mul,
                                   select_n, sub)
from xform.lax.shapes import _ints, broadcast_in_dim, full, reshape
from xform.lax import shapes as _shapes

hlo, ir = mlir.hlo, mlir.ir


class GatherDimensionNumbers(NamedTuple):
    """How a gather maps indices and operand dimensions to the output (XLA's Gather).

    Attributes:
      offset_dims: output dimensions that hold the (uncollapsed) slice dimensions.
      collapsed_slice_dims: operand dimensions of slice size 1 dropped from the output.
      start_index_map: operand dimension indexed by each entry of an index vector.
      operand_batching_dims: operand dimensions paired with ``start_indices_batching_dims``.
      start_indices_batching_dims: index batch dimensions paired with the above.

    The index vector dimension is always the last dimension of ``start_indices``.
    """
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """How a scatter maps indices and update dimensions into the operand (XLA's Scatter).

    Attributes:
      update_window_dims: dimensions of ``updates`` that are window dimensions.
      inserted_window_dims: operand dimensions of window size 1 absent from ``updates``.
      scatter_dims_to_operand_dims: operand dimension indexed by each index vector entry.
      operand_batching_dims: operand dimensions paired with ``scatter_indices_batching_dims``.
      scatter_indices_batching_dims: index batch dimensions paired with the above.
    """
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


class GatherScatterMode(enum.Enum):
    """Out-of-bounds index handling: CLIP clamps windows into bounds; FILL_OR_DROP
    fills out-of-bounds gathered windows (and drops scattered ones); PROMISE_IN_BOUNDS
    trusts the caller (XLA clamps gathers, drops scatters)."""
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(s):
        """Parse a mode: a ``GatherScatterMode``, ``"clip"``, ``"fill"``/``"drop"``/None,
        or ``"promise_in_bounds"``."""
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f'Unknown gather mode "{s}"')


def _dnums(cls, dn):
    """Normalize dimension numbers (ours, JAX's, or any object with the fields)."""
    return cls(*(_ints(getattr(dn, f), f"dimension_numbers.{f}") for f in cls._fields))


# ---- shared checks ----

def _check_dims(dims, rank, op, name, sorted_=True):
    if sorted_ and list(dims) != sorted(dims):
        raise TypeError(f"{name} in {op} op must be sorted; got {dims}")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{name} in {op} op must not repeat; got: {dims}.")
    if any(not 0 <= d < rank for d in dims):
        raise TypeError(f"Invalid {name} set in {op} op; valid range is [0, {rank}); "
                        f"got: {dims}.")


def _check_disjoint(a, b, op, name_a, name_b):
    if set(a) & set(b):
        raise TypeError(f"{name_a} and {name_b} in {op} op must be disjoint; "
                        f"got: {a} and {b}.")


def _check_indices(op, indices, what="indices"):
    if not dtypes.is_integer(indices.dtype):
        raise TypeError(f"{op} {what} must have an integer type, got {indices.dtype.name}")
    if indices.ndim == 0:
        raise TypeError(f"{op} {what} must have rank >= 1 (the last dimension holds the "
                        f"index vectors), got shape {indices.shape}")


def _lower_traced(ctx, fun, *args, **params):
    """Lower ``fun`` (written with lax ops on ``ctx.avals_in``) inline: one output."""
    return mlir.lower_fun(fun, multiple_results=False)(ctx, *args, **params)


def _index_dtype(indices_dtype):
    """Wide enough for index arithmetic (bounds up to any realistic dimension)."""
    return indices_dtype if np.dtype(indices_dtype).itemsize == 8 else np.dtype(np.int32)


# ---- gather ----

def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """XLA's Gather: slices of ``operand`` at the index vectors of ``start_indices``.

    Args:
      operand: the array to slice.
      start_indices: integer array; its last dimension holds the index vectors.
      dimension_numbers: a ``GatherDimensionNumbers``.
      slice_sizes: the slice size along every operand dimension.
      unique_indices: promise that the indices are unique (used by the transpose).
      indices_are_sorted: promise that the indices are sorted.
      mode: a ``GatherScatterMode`` or string. NB: like ``jax.lax.gather``, the default
        is PROMISE_IN_BOUNDS (XLA clamps), unlike scatters (FILL_OR_DROP).
      fill_value: value of out-of-bounds windows with FILL_OR_DROP (default: NaN for
        inexact dtypes, the minimum of signed and maximum of unsigned ints, True).

    Returns:
      The gathered array.

    Raises:
      TypeError: for ill-formed dimension numbers, slice sizes or index dtypes.

    >>> import numpy as np
    >>> dn = GatherDimensionNumbers((), (0,), (0,))
    >>> gather(np.arange(5.), np.array([[3], [0]]), dn, (1,))
    Array([3., 0.], dtype=float32)
    """
    dn = _dnums(GatherDimensionNumbers, dimension_numbers)
    parsed = GatherScatterMode.from_any(
        GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    if parsed is GatherScatterMode.FILL_OR_DROP:
        if fill_value is None:
            fill_value = _default_fill(get_aval(operand).dtype)
    else:
        fill_value = None
    return gather_p.bind(operand, start_indices, dimension_numbers=dn,
                         slice_sizes=_ints(slice_sizes, "slice_sizes"),
                         unique_indices=bool(unique_indices),
                         indices_are_sorted=bool(indices_are_sorted), mode=parsed,
                         fill_value=fill_value)


def _default_fill(dtype):
    if dtypes.is_inexact(dtype):
        return np.nan
    if dtypes.is_unsigned(dtype):
        return int(np.iinfo(dtype).max)
    if dtypes.is_integer(dtype):
        return int(np.iinfo(dtype).min)
    return True


def _gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes, **_):
    dn = dimension_numbers
    _check_indices("gather", indices, "start_indices")
    batch_rank = indices.ndim - 1
    out_rank = len(dn.offset_dims) + batch_rank
    _check_dims(dn.offset_dims, out_rank, "gather", "offset_dims")
    _check_dims(dn.collapsed_slice_dims, operand.ndim, "gather", "collapsed_slice_dims")
    _check_dims(dn.start_index_map, operand.ndim, "gather", "start_index_map", False)
    _check_dims(dn.operand_batching_dims, operand.ndim, "gather", "operand_batching_dims")
    _check_dims(dn.start_indices_batching_dims, batch_rank, "gather",
                "start_indices_batching_dims", False)
    _check_disjoint(dn.collapsed_slice_dims, dn.operand_batching_dims, "gather",
                    "collapsed_slice_dims", "operand_batching_dims")
    _check_disjoint(dn.start_index_map, dn.operand_batching_dims, "gather",
                    "start_index_map", "operand_batching_dims")
    if len(dn.start_index_map) != indices.shape[-1]:
        raise TypeError(f"Gather op has {len(dn.start_index_map)} elements in "
                        f"start_index_map but the last dimension of start_indices (shape "
                        f"{indices.shape}) is {indices.shape[-1]}; they must be equal.")
    op_batch = tuple(operand.shape[d] for d in dn.operand_batching_dims)
    idx_batch = tuple(indices.shape[d] for d in dn.start_indices_batching_dims)
    if op_batch != idx_batch:
        raise TypeError(f"Gather op requires operand batching dimensions and indices "
                        f"batching dimensions of the same shape, got {op_batch} and "
                        f"{idx_batch}.")
    if len(slice_sizes) != operand.ndim:
        raise TypeError(f"Gather op must have one slice size for every operand dimension; "
                        f"got slice_sizes={slice_sizes} for operand shape {operand.shape}")
    if len(slice_sizes) != (len(dn.offset_dims) + len(dn.collapsed_slice_dims)
                            + len(dn.operand_batching_dims)):
        raise TypeError(f"Every operand dimension of a gather must be an offset, collapsed "
                        f"or batching dimension; got slice_sizes={slice_sizes}, "
                        f"offset_dims={dn.offset_dims}, collapsed_slice_dims="
                        f"{dn.collapsed_slice_dims}, operand_batching_dims="
                        f"{dn.operand_batching_dims}.")
    for i, (s, d) in enumerate(zip(slice_sizes, operand.shape)):
        if not 0 <= s <= d:
            raise TypeError(f"Slice size at index {i} in gather op is out of range, must "
                            f"be within [0, {d} + 1), got {s}.")
    for d in dn.collapsed_slice_dims:
        if slice_sizes[d] != 1:
            raise TypeError(f"Gather op can only collapse slice dims with bound 1, but "
                            f"bound is {slice_sizes[d]} for index {d}.")
    for d in dn.operand_batching_dims:
        if slice_sizes[d] > 1:
            raise TypeError(f"Gather op can only have operand batching dims with bound "
                            f"0/1, but bound is {slice_sizes[d]} for index {d}.")
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window = iter(s for i, s in enumerate(slice_sizes) if i not in dropped)
    batch = iter(indices.shape[:-1])
    shape = tuple(next(window) if i in dn.offset_dims else next(batch)
                  for i in range(out_rank))
    return ShapedArray(shape, operand.dtype, operand.weak_type)


def _gather_jvp(t, operand, indices, *, mode, fill_value, **params):
    return gather_p.bind(t, indices, mode=mode,
                         fill_value=0 if mode is GatherScatterMode.FILL_OR_DROP else None,
                         **params)


def _scatter_dnums_of(dn):
    return ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims,
                                   dn.start_index_map, dn.operand_batching_dims,
                                   dn.start_indices_batching_dims)


def _gather_dnums_of(dn):
    return GatherDimensionNumbers(dn.update_window_dims, dn.inserted_window_dims,
                                  dn.scatter_dims_to_operand_dims, dn.operand_batching_dims,
                                  dn.scatter_indices_batching_dims)


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes,
                      unique_indices, indices_are_sorted, mode, fill_value):
    zeros = full(operand.aval.shape, 0, get_aval(ct).dtype)
    return [scatter_add_p.bind(zeros, indices, ct,
                               dimension_numbers=_scatter_dnums_of(dimension_numbers),
                               indices_are_sorted=indices_are_sorted,
                               unique_indices=unique_indices, mode=mode), None]


def _shift(dims, by=1):
    return tuple(d + by for d in dims)


def _gather_batch(vals, dims, *, dimension_numbers, slice_sizes, **params):
    (operand, indices), (op_bd, idx_bd) = vals, dims
    dn = dimension_numbers
    if idx_bd is batching.not_mapped:      # the batch axis becomes a window dimension
        operand = batching.moveaxis(operand, op_bd, 0)
        new = GatherDimensionNumbers(
            (0,) + _shift(dn.offset_dims), _shift(dn.collapsed_slice_dims),
            _shift(dn.start_index_map), _shift(dn.operand_batching_dims),
            dn.start_indices_batching_dims)
        sizes = (get_aval(operand).shape[0],) + slice_sizes
        return gather_p.bind(operand, indices, dimension_numbers=new, slice_sizes=sizes,
                             **params), 0
    indices = batching.moveaxis(indices, idx_bd, 0)
    if op_bd is batching.not_mapped:       # the batch axis is one more index batch axis
        new = dn._replace(offset_dims=_shift(dn.offset_dims),
                          start_indices_batching_dims=_shift(dn.start_indices_batching_dims))
        params = dict(params, unique_indices=False, indices_are_sorted=False)
        return gather_p.bind(operand, indices, dimension_numbers=new,
                             slice_sizes=slice_sizes, **params), 0
    operand = batching.moveaxis(operand, op_bd, 0)   # both: pair them as batching dims
    new = GatherDimensionNumbers(
        _shift(dn.offset_dims), _shift(dn.collapsed_slice_dims), _shift(dn.start_index_map),
        (0,) + _shift(dn.operand_batching_dims),
        (0,) + _shift(dn.start_indices_batching_dims))
    sizes = (min(1, get_aval(operand).shape[0]),) + slice_sizes
    return gather_p.bind(operand, indices, dimension_numbers=new, slice_sizes=sizes,
                         **params), 0


def _in_bounds_mask(operand_shape, indices, starts_map, window_sizes):
    """Per index vector: does the whole window at it fit in bounds? (bool, batch shape)"""
    idx_dt = _index_dtype(get_aval(indices).dtype)
    idx = convert_element_type(indices, idx_dt)
    upper = np.array([operand_shape[d] - window_sizes[d] for d in starts_map], idx_dt)
    shape = get_aval(idx).shape
    upper = broadcast_in_dim(upper, shape, (len(shape) - 1,))
    bad = add(convert_element_type(lt(idx, _const(idx, 0)), np.int32),
              convert_element_type(gt(idx, upper), np.int32))
    from xform.lax.reductions import reduce_sum
    return eq(reduce_sum(bad, (len(shape) - 1,)), _const(bad, 0))


def _gather_fill(operand, indices, *, dimension_numbers, slice_sizes, fill_value, **params):
    dn = dimension_numbers
    mask = _in_bounds_mask(get_aval(operand).shape, indices, dn.start_index_map,
                           slice_sizes)
    out = gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=slice_sizes,
                        mode=GatherScatterMode.PROMISE_IN_BOUNDS, fill_value=None, **params)
    shape = get_aval(out).shape
    batch_dims = [i for i in range(len(shape)) if i not in dn.offset_dims]
    mask = broadcast_in_dim(mask, shape, batch_dims)
    return select_n(mask, full(shape, fill_value, get_aval(out).dtype), out)


def _gather_lowering(ctx, operand, indices, *, dimension_numbers, slice_sizes,
                     unique_indices, indices_are_sorted, mode, fill_value):
    dn = dimension_numbers
    if mode is GatherScatterMode.FILL_OR_DROP:
        return _lower_traced(ctx, _gather_fill, operand, indices, dimension_numbers=dn,
                             slice_sizes=slice_sizes, fill_value=fill_value,
                             unique_indices=unique_indices,
                             indices_are_sorted=indices_are_sorted)
    attr = hlo.GatherDimensionNumbers.get(
        offset_dims=list(dn.offset_dims), collapsed_slice_dims=list(dn.collapsed_slice_dims),
        operand_batching_dims=list(dn.operand_batching_dims),
        start_indices_batching_dims=list(dn.start_indices_batching_dims),
        start_index_map=list(dn.start_index_map),
        index_vector_dim=ctx.avals_in[1].ndim - 1)
    return hlo.gather(operand, indices, attr, mlir.dense_i64(slice_sizes),
                      indices_are_sorted=ir.BoolAttr.get(indices_are_sorted))


gather_p = standard_primitive("gather", _gather_abstract_eval)
ad.defjvp(gather_p, _gather_jvp, None)
ad.primitive_transposes[gather_p] = _gather_transpose
batching.primitive_batchers[gather_p] = _gather_batch
mlir.register_lowering(gather_p, _gather_lowering)


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
    from xform.lax.elementwise import max as lmax, min as lmin
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


def _scatter_add_jvp(primals, tangents, **params):
    (operand, indices, updates), (t_op, _, t_upd) = primals, tangents
    out = scatter_add_p.bind(operand, indices, updates, **params)
    if _both_zero(t_op, t_upd):
        return out, _zero_out(out)
    return out, scatter_add_p.bind(ad.instantiate_zeros(t_op), indices,
                                   ad.instantiate_zeros(t_upd), **params)


def _scatter_add_transpose(ct, operand, indices, updates, *, dimension_numbers, mode, **_):
    ct_op = ct if ad.is_undefined_primal(operand) else None
    ct_upd = None
    if ad.is_undefined_primal(updates):
        ct_upd = _gather_back(ct, indices, updates.aval, dimension_numbers, mode, 0)
    return [ct_op, None, ct_upd]


scatter_add_p = _scatter_prim("scatter-add", hlo.add, numeric)
ad.primitive_jvps[scatter_add_p] = _scatter_add_jvp
ad.primitive_transposes[scatter_add_p] = _scatter_add_transpose


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


scatter_min_p = _scatter_prim("scatter-min", hlo.minimum)
ad.primitive_jvps[scatter_min_p] = _scatter_extremal_jvp(scatter_min_p)
scatter_max_p = _scatter_prim("scatter-max", hlo.maximum)
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
