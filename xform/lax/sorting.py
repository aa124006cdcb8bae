"""Sorting primitives: sort (multi-operand, lexicographic on the first ``num_keys``
operands, stable by default) and top_k; sort_key_val and argsort compose over sort.

Floating-point keys sort in JAX's total order: -inf < ... < -0.0 == 0.0 < ... < inf <
NaN (all NaNs equal, last). Tangents follow the values through the sort permutation,
which the JVP obtains by sorting an iota along and gathering.
"""
import operator

import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import standard_primitive
from xform.lax.elementwise import _const, add, neg
from xform.lax.shapes import broadcasted_iota, expand_dims, full, rev
from xform.lax.slicing import GatherDimensionNumbers, GatherScatterMode, gather

hlo, ir = mlir.hlo, mlir.ir


def _canonical_axis(axis, ndim, name):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _take_along(t, perm, axis):
    """``t`` at the integer positions ``perm`` along ``axis`` (``perm`` has the output
    shape): one gather whose other dimensions are batching dimensions."""
    pa = get_aval(perm)
    rank = pa.ndim
    if 0 in get_aval(t).shape or 0 in pa.shape:   # a size-1 slice of an empty axis is invalid
        return full(pa.shape, 0, get_aval(t).dtype)
    others = tuple(i for i in range(rank) if i != axis)
    dn = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                start_index_map=(axis,), operand_batching_dims=others,
                                start_indices_batching_dims=others)
    return gather(t, expand_dims(perm, (rank,)), dn, (1,) * rank,
                  mode=GatherScatterMode.PROMISE_IN_BOUNDS)


# ---- sort ----

def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort along ``dimension``; a sequence of operands sorts lexicographically by the
    first ``num_keys`` and permutes the rest alike.

    Args:
      operand: an array, or a sequence of arrays of one shape.
      dimension: the axis to sort along.
      is_stable: keep the order of equal keys.
      num_keys: how many leading operands are keys.

    Returns:
      The sorted array, or a tuple of the sorted operands.

    Raises:
      TypeError: operands of different shapes.
      ValueError: ``num_keys`` out of range.

    >>> import numpy as np
    >>> sort(np.array([2., np.nan, -1., 0.]))
    Array([-1.,  0.,  2., nan], dtype=float32)
    """
    if isinstance(operand, (list, tuple)):
        if not operand:
            raise TypeError("Sort requires at least one operand")
        if not 1 <= num_keys <= len(operand):
            raise ValueError(f"num_keys={num_keys} must be between 1 and "
                             f"len(operand)={len(operand)}")
        dimension = _canonical_axis(dimension, get_aval(operand[0]).ndim, "sort")
        return tuple(sort_p.bind(*operand, dimension=dimension, is_stable=bool(is_stable),
                                 num_keys=int(num_keys)))
    if num_keys != 1:
        raise ValueError(f"num_keys={num_keys} must equal 1 for a single operand.")
    dimension = _canonical_axis(dimension, get_aval(operand).ndim, "sort")
    return sort_p.bind(operand, dimension=dimension, is_stable=bool(is_stable),
                       num_keys=1)[0]


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """Sort ``keys`` along ``dimension`` and permute ``values`` alike.

    >>> import numpy as np
    >>> sort_key_val(np.array([3, 1, 2]), np.array([0., 1., 2.]))[1]
    Array([1., 2., 0.], dtype=float32)
    """
    return sort((keys, values), dimension, is_stable, num_keys=1)


def argsort(operand, dimension=-1, is_stable=True, descending=False):
    """Indices (int32) that sort ``operand`` along ``dimension`` (NaNs last; with
    ``descending``, first, and equal keys keep their order).

    >>> import numpy as np
    >>> argsort(np.array([3., 1., 2.]))
    Array([1, 2, 0], dtype=int32)
    """
    aval = get_aval(operand)
    dimension = _canonical_axis(dimension, aval.ndim, "argsort")
    iota = broadcasted_iota(np.int32, aval.shape, dimension)
    if descending:   # sort reversed keys ascending, keeping ties in index order
        keys = rev(operand, (dimension,))
        idx = sort((keys, rev(iota, (dimension,))), dimension, is_stable, 1)[1]
        return rev(idx, (dimension,))
    return sort((operand, iota), dimension, is_stable, 1)[1]


def _sort_abstract_eval(*avals, dimension, is_stable, num_keys):
    if len({a.shape for a in avals}) != 1:
        raise TypeError("Arguments to sort must have equal shapes, got: "
                        + " ".join(str(a.shape) for a in avals))
    if not 0 <= dimension < max(avals[0].ndim, 1) or avals[0].ndim == 0:
        raise TypeError(f"sort dimension {dimension} is out of range for shape "
                        f"{avals[0].shape}")
    return list(avals)


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    shape = get_aval(primals[0]).shape
    iota = broadcasted_iota(np.int32, shape, dimension)
    *outs, perm = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                              num_keys=num_keys)
    touts = [t if type(t) is ad.Zero else _take_along(t, perm, dimension) for t in tangents]
    return outs, touts


def _sort_batch(vals, dims, *, dimension, is_stable, num_keys):
    size = batching.axis_size_of(vals, dims)
    vals = [batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
    outs = sort_p.bind(*vals, dimension=dimension + 1, is_stable=is_stable,
                       num_keys=num_keys)
    return outs, [0] * len(outs)


def _compare(a, b, direction, dtype):
    kind = ("TOTALORDER" if dtypes.is_inexact(dtype) else
            "UNSIGNED" if dtypes.is_unsigned(dtype) or dtype == np.bool_ else "SIGNED")
    return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(direction),
                       compare_type=hlo.ComparisonTypeAttr.get(kind))


def _canonical_float(x, dtype):
    """-0.0 -> 0.0 and every NaN -> +NaN, so TOTALORDER compares them as JAX does."""
    zero = mlir.ir_constant(np.array(0, dtype))
    nan = mlir.ir_constant(np.array(np.nan, dtype))
    def cmp(a, b, direction):
        return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(direction),
                           compare_type=hlo.ComparisonTypeAttr.get("FLOAT"))
    x = hlo.select(cmp(x, zero, "EQ"), zero, x)
    return hlo.select(cmp(x, x, "NE"), nan, x)


def _lt_region(block_args, avals, num_keys):
    """Lexicographic ``x < y`` over the first ``num_keys`` (x, y) argument pairs; a
    complex key compares as (real, imag), as in JAX."""
    keys = []
    for k in range(num_keys):
        dt = avals[k].dtype
        x, y = block_args[2 * k], block_args[2 * k + 1]
        if dtypes.is_complex(dt):
            part = np.finfo(dt).dtype
            keys += [(hlo.real(x), hlo.real(y), part), (hlo.imag(x), hlo.imag(y), part)]
        else:
            keys.append((x, y, dt))
    result = None
    for x, y, dt in reversed(keys):
        if dtypes.is_inexact(dt):
            x, y = _canonical_float(x, dt), _canonical_float(y, dt)
        less = _compare(x, y, "LT", dt)
        if result is None:
            result = less
        else:
            result = hlo.or_(less, hlo.and_(_compare(x, y, "EQ", dt), result))
    return result


def _sort_op(ctx_avals_in, operands, dimension, is_stable, num_keys):
    out_types = [mlir.aval_to_ir_type(a) for a in ctx_avals_in]
    op = hlo.SortOp(out_types, list(operands), dimension=mlir.ir.IntegerAttr.get(
        mlir.ir.IntegerType.get_signless(64), dimension),
                    is_stable=ir.BoolAttr.get(is_stable))
    scalars = [mlir.aval_to_ir_type(ShapedArray((), a.dtype)) for a in ctx_avals_in]
    block = op.comparator.blocks.append(*[t for s in scalars for t in (s, s)])
    with ir.InsertionPoint(block):
        hlo.return_([_lt_region(list(block.arguments), ctx_avals_in, num_keys)])
    return list(op.results)


def _sort_lowering(ctx, *operands, dimension, is_stable, num_keys):
    return _sort_op(ctx.avals_in, operands, dimension, is_stable, num_keys)


sort_p = standard_primitive("sort", _sort_abstract_eval, multiple_results=True)
ad.primitive_jvps[sort_p] = _sort_jvp
batching.primitive_batchers[sort_p] = _sort_batch
mlir.register_lowering(sort_p, _sort_lowering)


# ---- top_k ----

def top_k(operand, k, *, axis=-1):
    """The ``k`` largest entries along ``axis`` and their int32 indices, largest first
    (ties: lower index first; NaN counts as largest).

    Args:
      operand: a real or integer array of rank >= 1.
      k: how many entries to keep (at most the axis size).
      axis: the axis to search.

    Returns:
      ``[values, indices]`` (a list, as JAX's: the structure a VJP cotangent must match).

    Raises:
      ValueError: bad ``k`` or ``axis``; TypeError: complex or rank-0 operand.

    >>> import numpy as np
    >>> top_k(np.array([9., 3., 6., 4., 10.]), 3)[1]
    Array([4, 0, 2], dtype=int32)
    """
    aval = get_aval(operand)
    if aval.ndim == 0:
        raise ValueError(f"top_k operand must have >= 1 dimension, got {aval.shape}")
    return list(top_k_p.bind(operand, k=operator.index(k),
                             axis=_canonical_axis(axis, aval.ndim, "top_k")))


def _top_k_abstract_eval(x, *, k, axis):
    if dtypes.is_complex(x.dtype):
        raise ValueError("top_k is not compatible with complex inputs.")
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"k argument to top_k must be nonnegative and no larger than the "
                         f"size along axis {axis}; got k={k} with shape {x.shape}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.int32)]


def _top_k_jvp(primals, tangents, *, k, axis):
    (x,), (t,) = primals, tangents
    values, indices = top_k_p.bind(x, k=k, axis=axis)
    t_idx = ad.Zero(get_aval(indices).to_tangent_aval())
    if type(t) is ad.Zero:
        return [values, indices], [ad.Zero(get_aval(values).to_tangent_aval()), t_idx]
    return [values, indices], [_take_along(t, indices, axis), t_idx]


def _top_k_batch(vals, dims, *, k, axis):
    (x,), (d,) = vals, dims
    return top_k_p.bind(x, k=k, axis=axis + (axis >= d)), [d, d]


def _top_k_lowering(ctx, x, *, k, axis):
    # chlo.top_k on the last axis, as JAX: XLA turns it into its TopK (a partial sort,
    # ties lower index first); a full stable sort of (x, iota) was ~30x slower on CPU.
    ndim = ctx.avals_in[0].ndim
    perm = None
    if axis != ndim - 1:
        perm = list(range(ndim))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        x = hlo.transpose(x, mlir.dense_i64(perm))
    results = list(mlir.chlo.top_k(x, mlir.ir.IntegerAttr.get(mlir.ir.IntegerType.get_signless(64), k)))
    if perm is not None:
        results = [hlo.transpose(r, mlir.dense_i64(perm)) for r in results]
    return results


top_k_p = standard_primitive("top_k", _top_k_abstract_eval, multiple_results=True)
ad.primitive_jvps[top_k_p] = _top_k_jvp
batching.primitive_batchers[top_k_p] = _top_k_batch
mlir.register_lowering(top_k_p, _top_k_lowering)


def _approx_k(name, operand, k, reduction_dimension, aggregate_to_topk):
    aval = get_aval(operand)
    if not dtypes.is_floating(aval.dtype):
        raise ValueError("operand must be a floating type")
    if aval.ndim == 0:
        raise TypeError(f"approx_top_k operand must have >= 1 dimension, got {aval.shape}")
    if not aggregate_to_topk:
        raise NotImplementedError(f"{name}: aggregate_to_topk=False (TPU's unaggregated "
                                  "partial results) is not supported")
    axis = _canonical_axis(reduction_dimension, aval.ndim, name)
    if not 0 < operator.index(k) <= aval.shape[axis]:
        raise ValueError(f"{name}: k must be positive and at most the size "
                         f"{aval.shape[axis]} of reduction_dimension, got {k}")
    return axis


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The ``k`` largest entries along ``reduction_dimension`` and their indices.

    NB: exact here: this is ``top_k``, which is what XLA's ApproxTopK falls back to on
    CPU and GPU, so ``recall_target`` and ``reduction_input_size_override`` (TPU
    tuning) have no effect.

    >>> import numpy as np
    >>> approx_max_k(np.array([9., 3., 6., 4., 10.]), 2)[1]
    Array([4, 0], dtype=int32)
    """
    axis = _approx_k("approx_max_k", operand, k, reduction_dimension, aggregate_to_topk)
    return _approx_top_k(operand, operand, k, axis)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The ``k`` smallest entries along ``reduction_dimension`` and their indices
    (exact, as ``approx_max_k``).

    >>> import numpy as np
    >>> approx_min_k(np.array([9., 3., 6., 4., 10.]), 2)[0]
    Array([3., 4.], dtype=float32)
    """
    axis = _approx_k("approx_min_k", operand, k, reduction_dimension, aggregate_to_topk)
    return _approx_top_k(operand, neg(operand), k, axis)


def _approx_top_k(operand, keys, k, axis):
    # XLA's comparator sees -0 == +0 (ties: lower index first); top_k orders -0 < +0,
    # so rank keys + 0 (-0 becomes +0) and read the values back from the operand.
    _, indices = top_k(add(keys, _const(keys, 0.0)), k, axis=axis)
    return _take_along(operand, indices, axis), indices
