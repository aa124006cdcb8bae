"""Gather and the dimension numbers and modes it shares with the scatter family
(``xform/lax/scatter.py``).

Out-of-bounds semantics follow JAX: gather's
``mode`` clamps (CLIP; PROMISE_IN_BOUNDS as XLA implements it) or fills (FILL_OR_DROP);
scatters drop out-of-bounds update windows unless ``mode`` is CLIP. Index operands are
never differentiated.
"""
import enum
from typing import NamedTuple

import numpy as np

from xform.core import dtypes, shape_poly
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import standard_primitive
from xform.lax.elementwise import _const, add, convert_element_type, ge, le, select_n
from xform.lax.rounding import rem
from xform.lax.bitwise import bitwise_and
from xform.lax.reductions import reduce_and
from xform.lax.shapes import _ints, broadcast_in_dim, concatenate, dimension_as_value, full

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
    from xform.lax.scatter import scatter_add_p  # (a cycle: scatter builds on gather)
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
    bounds = [operand_shape[d] - window_sizes[d] for d in starts_map]
    if all(isinstance(b, int) for b in bounds):
        upper = np.array(bounds, idx_dt)
    else:   # symbolic operand dimensions: values computed from the dimension variables
        upper = concatenate([broadcast_in_dim(convert_element_type(
            dimension_as_value(b), idx_dt), (1,), ()) for b in bounds], 0)
    shape = get_aval(idx).shape
    upper = broadcast_in_dim(upper, shape, (len(shape) - 1,))
    # 0 <= idx <= upper, AND-reduced over the index vector (as JAX's: an int count of
    # the bad coordinates compiled to two extra converts per index).
    return reduce_and(bitwise_and(ge(idx, _const(idx, 0)), le(idx, upper)),
                      (len(shape) - 1,))


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
    if not shape_poly.is_constant_shape(slice_sizes):   # sizes from the dimension variables
        return hlo.DynamicGatherOp.build_generic(
            results=[mlir.aval_to_ir_type(ctx.avals_out[0])],
            operands=[operand, indices, mlir.shape_value(slice_sizes)],
            attributes={"dimension_numbers": attr,
                        "indices_are_sorted": ir.BoolAttr.get(indices_are_sorted)}).results
    return hlo.gather(operand, indices, attr, mlir.dense_i64(slice_sizes),
                      indices_are_sorted=ir.BoolAttr.get(indices_are_sorted))


gather_p = standard_primitive("gather", _gather_abstract_eval)
ad.defjvp(gather_p, _gather_jvp, None)
ad.primitive_transposes[gather_p] = _gather_transpose
ad.defnonlinear_operands(gather_p, slice(1, 2))   # the indices
batching.primitive_batchers[gather_p] = _gather_batch
mlir.register_lowering(gather_p, _gather_lowering)


def index_take(src, idxs, axes):
    """Take, for each ``i``, the element(s) of ``src`` at ``idxs[k][i]`` along
    ``axes[k]`` (negative indices wrap), keeping the other dimensions whole.

    >>> import numpy as np, xform.lax as lax
    >>> lax.index_take(np.arange(12).reshape(3, 4), (np.array([2, -1]),), (0,))
    Array([[ 8,  9, 10, 11],
           [ 8,  9, 10, 11]], dtype=int32)
    """
    shape = get_aval(src).shape
    axes = tuple(int(a) for a in axes)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: got {len(idxs)} index arrays for {len(axes)} axes")
    indices = concatenate([broadcast_in_dim(i, (*get_aval(i).shape, 1), (0,))
                           for i in idxs], 1)
    sizes = broadcast_in_dim(np.array([shape[a] for a in axes], get_aval(indices).dtype),
                             get_aval(indices).shape, (1,))
    indices = rem(add(rem(indices, sizes), sizes), sizes)   # floor modulo, as ``%``
    slice_sizes = tuple(1 if d in axes else s for d, s in enumerate(shape))
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, len(shape) - len(axes) + 1)),
                                   collapsed_slice_dims=axes, start_index_map=axes)
    return gather(src, indices, dnums, slice_sizes)
