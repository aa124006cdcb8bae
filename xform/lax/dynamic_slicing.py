"""Dynamic slicing: dynamic_slice and dynamic_update_slice (start indices are traced
scalars, one operand each, clamped so the window lies in bounds, as in XLA and JAX),
and the ``*_in_dim`` conveniences composed from them and ``slice``.

Under vmap with batched start indices they become gathers and scatters (slicing.py).
"""
import numpy as np

from xform.core import dtypes, shape_poly
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, dispatch, mlir
from xform.core.transfer import scalar_array
from xform.lax._prim import standard_primitive
from xform.lax.elementwise import _const, add, convert_element_type, lt, select_n
from xform.lax.shapes import (_ints, broadcast_in_dim, concatenate, expand_dims, full,
                              reshape, squeeze)
from xform.lax import shapes as _shapes
from xform.lax.scatter import _both_zero, _scatter_batch, _zero_out, scatter_p
from xform.lax.slicing import (GatherDimensionNumbers, GatherScatterMode,
                               ScatterDimensionNumbers, _gather_batch)

hlo, ir = mlir.hlo, mlir.ir


# ---- dynamic_slice / dynamic_update_slice ----

def _dynamic_indices(operand, start_indices, allow_negative_indices):
    """One scalar index per dimension; negative ones wrap (statically where known)."""
    shape = get_aval(operand).shape
    if not isinstance(start_indices, (list, tuple)):
        if get_aval(start_indices).ndim != 1:
            raise ValueError(f"Slice indices must be a 1D sequence, got shape "
                             f"{get_aval(start_indices).shape}")
        start_indices = list(start_indices)
    if len(start_indices) != len(shape):
        raise ValueError(f"Length of slice indices must match number of operand dimensions "
                         f"({len(start_indices)} vs {shape})")
    if isinstance(allow_negative_indices, bool):
        allow_negative_indices = [allow_negative_indices] * len(shape)
    out = []
    for i, d, neg_ok in zip(start_indices, shape, allow_negative_indices):
        if shape_poly.is_symbolic_dim(i):   # a static start computed when run
            i = convert_element_type(_shapes.dimension_as_value(i), dtypes.int32)
        if isinstance(i, (int, np.integer)):   # keeps its own dtype: a Python int the
            if i < 0 and not neg_ok:           # default int, np.int16 int16, True bool
                raise ValueError(f"Index {i} is out of bounds for dimension {d} if "
                                 "allow_negative_indices=False")
            like = np.zeros((), dtypes.dtype(i))   # (d may be symbolic: _const computes it)
            out.append(_const(like, int(i) + d if i < 0 else int(i)))
        elif neg_ok and not dtypes.is_unsigned(get_aval(i).dtype):
            out.append(select_n(lt(i, _const(i, 0)), i, add(i, _const(i, d))))
        else:
            out.append(i)
    return out


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """``operand[start:start+size]`` along every dimension with traced ``start_indices``.

    Start indices are clamped so the slice lies in bounds (as in XLA and JAX);
    negative ones count from the end.

    Args:
      operand: the array to slice.
      start_indices: one scalar integer (array) per dimension.
      slice_sizes: static slice size per dimension.
      allow_negative_indices: whether negative indices wrap (per dimension or all).

    Returns:
      The slice, of shape ``slice_sizes``.

    >>> import numpy as np
    >>> dynamic_slice(np.arange(6), (4,), (3,))
    Array([3, 4, 5], dtype=int32)
    """
    starts = _dynamic_indices(operand, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *starts,
                                slice_sizes=_ints(slice_sizes, "slice_sizes"))


def _check_starts(name, operand, starts, sep=""):
    if len(starts) != operand.ndim:
        raise TypeError(f"{name} needs one start index per dimension of operand shape "
                        f"{operand.shape}, got {len(starts)}")
    if any(s.dtype != starts[0].dtype or not dtypes.is_integer(s.dtype) for s in starts):
        # JAX's words, its colon after dynamic_slice's only; no mixed int32/int64 even
        # under x64 (the caller converts)
        raise TypeError(f"index arguments to {name} must be integers of the same type, "
                        f"got{sep} {', '.join(s.dtype.name for s in starts)}")
    if any(s.ndim != 0 for s in starts):
        raise TypeError(f"{name} start indices must be integer scalars, got "
                        f"{[a.str_short() for a in starts]}")


def _dynamic_slice_abstract_eval(operand, *starts, slice_sizes):
    _check_starts("dynamic_slice", operand, starts, ":")
    if len(slice_sizes) != operand.ndim or any(
            not 0 <= s <= d for s, d in zip(slice_sizes, operand.shape)):
        raise TypeError(f"dynamic_slice slice_sizes must be between 0 and the operand "
                        f"shape, got slice_sizes {slice_sizes} for operand shape "
                        f"{operand.shape}.")
    return ShapedArray(slice_sizes, operand.dtype, operand.weak_type)


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    operand, *starts = primals
    out = dynamic_slice_p.bind(operand, *starts, slice_sizes=slice_sizes)
    if type(tangents[0]) is ad.Zero:
        return out, _zero_out(out)
    return out, dynamic_slice_p.bind(tangents[0], *starts, slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct, operand, *starts, slice_sizes):
    zeros = full(operand.aval.shape, 0, get_aval(ct).dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *starts)] + [None] * len(starts)


def _batched_index_vector(starts, dims):
    """Stack scalar start indices into index vectors ``(n,)`` or, batched, ``(B, n)``."""
    if not starts:
        return np.zeros((0,), np.int32), batching.not_mapped
    dt = np.result_type(*[get_aval(s).dtype for s in starts])
    starts = [convert_element_type(s, dt) for s in starts]
    if all(d is batching.not_mapped for d in dims):
        return concatenate([reshape(s, (1,)) for s in starts], 0), batching.not_mapped
    size = batching.axis_size_of(starts, dims)
    cols = [broadcast_in_dim(s, (size, 1), () if d is batching.not_mapped else (0,))
            for s, d in zip(starts, dims)]
    return concatenate(cols, 1), 0


def _dynamic_slice_batch(vals, dims, *, slice_sizes):
    (operand, *starts), (op_bd, *start_bds) = vals, dims
    n = len(starts)
    index, idx_bd = _batched_index_vector(starts, start_bds)
    dn = GatherDimensionNumbers(tuple(range(n)), (), tuple(range(n)))
    return _gather_batch([operand, index], [op_bd, idx_bd], dimension_numbers=dn,
                         slice_sizes=slice_sizes, unique_indices=True,
                         indices_are_sorted=True, mode=GatherScatterMode.CLIP,
                         fill_value=None)


def _dynamic_slice_lowering(ctx, operand, *starts, slice_sizes):
    if not shape_poly.is_constant_shape(slice_sizes):
        # real_dynamic_slice does not clamp: clamp the starts into [0, shape - sizes] (JAX)
        i32x1 = ir.RankedTensorType.get([1], ir.IntegerType.get_signless(32))
        at = [hlo.reshape(i32x1, hlo.convert(ir.RankedTensorType.get(
            [], ir.IntegerType.get_signless(32)), s)) for s in starts]
        sizes = mlir.shape_value(slice_sizes)
        lo = hlo.clamp(mlir.shape_value((0,) * len(starts)), hlo.concatenate(at, 0),
                       hlo.subtract(mlir.shape_value(ctx.avals_in[0].shape), sizes))
        return hlo.real_dynamic_slice(mlir.aval_to_ir_type(ctx.avals_out[0]), operand, lo,
                                      hlo.add(lo, sizes),
                                      mlir.shape_value((1,) * len(starts)))
    return hlo.dynamic_slice(operand, list(starts), mlir.dense_i64(slice_sizes))


dynamic_slice_p = standard_primitive("dynamic_slice", _dynamic_slice_abstract_eval)
ad.primitive_jvps[dynamic_slice_p] = _dynamic_slice_jvp
ad.primitive_transposes[dynamic_slice_p] = _dynamic_slice_transpose
ad.defnonlinear_operands(dynamic_slice_p, slice(1, None))   # the start indices
batching.primitive_batchers[dynamic_slice_p] = _dynamic_slice_batch
mlir.register_lowering(dynamic_slice_p, _dynamic_slice_lowering)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    # Eagerly a unit-stride slice is a dynamic_slice whose starts are operands (as in
    # JAX), so indexing with a new Python int does not compile a new executable.
    if strides is not None:   # (as JAX's: then the strict slice, even of unit strides)
        return dispatch.apply_primitive(_shapes.slice_p, x, start_indices=start_indices,
                                        limit_indices=limit_indices, strides=strides)
    sizes = tuple(hi - lo for lo, hi in zip(start_indices, limit_indices))
    starts = [scalar_array(s, np.dtype(np.int32), False) for s in start_indices]
    return dispatch.apply_primitive(dynamic_slice_p, x, *starts, slice_sizes=sizes)


dispatch.def_eager_shortcut(_shapes.slice_p, _slice_impl)


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """``operand`` with ``update`` written at ``start_indices`` (clamped into bounds).

    Args:
      operand: the array to update.
      update: the block to write, of ``operand``'s rank and dtype.
      start_indices: one scalar integer (array) per dimension; negative ones wrap.
      allow_negative_indices: whether negative indices wrap (per dimension or all).

    Returns:
      The updated copy of ``operand``.

    >>> import numpy as np
    >>> dynamic_update_slice(np.zeros(5), np.ones(2), (4,))
    Array([0., 0., 0., 1., 1.], dtype=float32)
    """
    starts = _dynamic_indices(operand, start_indices, allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *starts)


def _dynamic_update_slice_abstract_eval(operand, update, *starts):
    _check_starts("dynamic_update_slice", operand, starts)
    if update.ndim != operand.ndim or any(u > d for u, d in zip(update.shape, operand.shape)):
        raise TypeError(f"dynamic_update_slice update shape {update.shape} must have the "
                        f"rank of operand shape {operand.shape} and fit inside it.")
    if update.dtype != operand.dtype:
        raise TypeError(f"dynamic_update_slice update dtype {update.dtype.name} must equal "
                        f"the operand dtype {operand.dtype.name}.")
    return ShapedArray(operand.shape, operand.dtype, operand.weak_type)


def _dynamic_update_slice_jvp(primals, tangents):
    operand, update, *starts = primals
    t_op, t_upd = tangents[:2]
    out = dynamic_update_slice_p.bind(operand, update, *starts)
    if _both_zero(t_op, t_upd):
        return out, _zero_out(out)
    return out, dynamic_update_slice_p.bind(ad.instantiate_zeros(t_op),
                                            ad.instantiate_zeros(t_upd), *starts)


def _dynamic_update_slice_transpose(ct, operand, update, *starts):
    u_aval = update.aval if ad.is_undefined_primal(update) else get_aval(update)
    ct_op = ct_upd = None
    if ad.is_undefined_primal(operand):   # the overwritten block gets no cotangent
        ct_op = dynamic_update_slice_p.bind(ct, full(u_aval.shape, 0, get_aval(ct).dtype),
                                            *starts)
    if ad.is_undefined_primal(update):
        ct_upd = dynamic_slice_p.bind(ct, *starts, slice_sizes=u_aval.shape)
    return [ct_op, ct_upd] + [None] * len(starts)


def _dynamic_update_slice_batch(vals, dims):
    (operand, update, *starts), (op_bd, upd_bd, *start_bds) = vals, dims
    n = len(starts)
    index, idx_bd = _batched_index_vector(starts, start_bds)
    dn = ScatterDimensionNumbers(tuple(range(n)), (), tuple(range(n)))
    return _scatter_batch(scatter_p)(
        [operand, index, update], [op_bd, idx_bd, upd_bd], dimension_numbers=dn,
        indices_are_sorted=True, unique_indices=True, mode=GatherScatterMode.CLIP)


def _dynamic_update_slice_lowering(ctx, operand, update, *starts):
    return hlo.dynamic_update_slice(operand, update, list(starts))


dynamic_update_slice_p = standard_primitive("dynamic_update_slice",
                                            _dynamic_update_slice_abstract_eval)
ad.primitive_jvps[dynamic_update_slice_p] = _dynamic_update_slice_jvp
ad.primitive_transposes[dynamic_update_slice_p] = _dynamic_update_slice_transpose
ad.defnonlinear_operands(dynamic_update_slice_p, slice(2, None))   # the start indices
batching.primitive_batchers[dynamic_update_slice_p] = _dynamic_update_slice_batch
mlir.register_lowering(dynamic_update_slice_p, _dynamic_update_slice_lowering)


# ---- conveniences (compositions) ----

def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """``operand[start:limit:stride]`` along ``axis`` (None and negative bounds allowed).

    >>> import numpy as np
    >>> slice_in_dim(np.arange(6), -4, None, 2)
    Array([2, 4], dtype=int32)
    """
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    n = shape[axis]   # JAX's: None and negatives (wrapped once), no clamp: lax.slice checks
    start, limit = (d if d is None or shape_poly.is_symbolic_dim(d) or d >= 0 else d + n
                    for d in (start_index, limit_index))
    start, limit = start or 0, n if limit is None else limit
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, int(stride)
    return _shapes.slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """``operand[index]`` along ``axis`` for a static ``index`` (negative wraps).

    >>> import numpy as np
    >>> index_in_dim(np.arange(6).reshape(2, 3), -1, 1, keepdims=False)
    Array([2, 5], dtype=int32)
    """
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    index = int(index)
    if not -shape[axis] <= index < shape[axis]:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size "
                         f"{shape[axis]}")
    index = index + shape[axis] if index < 0 else index
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def _zero_index(start_index):
    """The start index of the whole dimensions, of ``start_index``'s type (as JAX)."""
    if isinstance(start_index, (int, np.integer)):
        return type(start_index)(0)
    if shape_poly.is_symbolic_dim(start_index):   # (computed as an int32)
        return np.int32(0)
    return np.zeros((), get_aval(start_index).dtype)


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *,
                         allow_negative_indices=True):
    """``dynamic_slice`` along one ``axis`` (other dimensions whole).

    >>> import numpy as np
    >>> dynamic_slice_in_dim(np.arange(6), 5, 2)
    Array([4, 5], dtype=int32)
    """
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    starts = [_zero_index(start_index)] * len(shape)
    sizes = list(shape)
    starts[axis], sizes[axis] = start_index, _shapes._ints((slice_size,), "slice_size")[0]
    return dynamic_slice(operand, starts, sizes,
                         allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    """``operand[index]`` along ``axis`` for a traced ``index`` (clamped).

    >>> import numpy as np
    >>> dynamic_index_in_dim(np.arange(6), np.int32(2), keepdims=False)
    Array(2, dtype=int32)
    """
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else squeeze(out, (int(axis) % get_aval(operand).ndim,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    """``dynamic_update_slice`` at ``start_index`` along ``axis`` (0 elsewhere).

    >>> import numpy as np
    >>> dynamic_update_slice_in_dim(np.zeros(4), np.ones(2), 1, 0)
    Array([0., 1., 1., 0.], dtype=float32)
    """
    ndim = get_aval(operand).ndim
    starts = [_zero_index(start_index)] * ndim
    starts[int(axis) % ndim] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis):
    """Write ``update`` at ``index`` along ``axis``; ``update`` may lack that axis.

    >>> import numpy as np
    >>> dynamic_update_index_in_dim(np.zeros((2, 2)), np.ones(2), 1, 0)
    Array([[0., 0.],
           [1., 1.]], dtype=float32)
    """
    ndim = get_aval(operand).ndim
    axis = int(axis) % ndim
    if get_aval(update).ndim == ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis)

