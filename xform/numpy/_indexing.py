"""NumPy indexing on Arrays and tracers: ``x[idx]`` and ``x.at[idx].set/add/...``.

An index is parsed once into entries (none, slice, int, bool, array) and then lowered
the cheapest way that is exact, as JAX does:
- only static ints, slices, None and Ellipsis: one ``lax.slice``, ``rev`` for negative
  steps, ``squeeze`` for the ints, ``expand_dims`` for the Nones (no gather);
- plus traced/Array scalar ints and unit-step slices: one ``dynamic_slice``;
- anything else (integer/boolean arrays, strided slices with traced ints, fill modes):
  one ``gather`` whose index vectors stack every indexed dimension. ``.at`` updates are
  always the matching ``scatter`` (the transpose of that gather).

Out-of-bounds: gathers use the requested mode; the default (PROMISE_IN_BOUNDS) clamps,
as XLA does, so ``x[jnp.array([12])]`` on 10 elements gives ``x[9]`` as in JAX. Scatters
default to FILL_OR_DROP: out-of-bounds updates are dropped. A static int out of range
clamps too (``jnp.arange(10)[11]`` is 9, through JAX's ``dynamic_slice``, which checkify
checks); NumPy would raise IndexError. Indexing an empty axis still raises.
"""
import operator
from typing import NamedTuple

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.core.array import Array
from xform.core.errors import NonConcreteBooleanIndexError
from xform.core.trace import Tracer
from xform.lax.slicing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from xform.numpy import _creation, _dslice, _ufuncs, _util
from xform.transforms.vmap import vmap

_NONE, _ELLIPSIS, _SLICE, _INT, _BOOL, _ARRAY = range(6)
_STATIC_KINDS = frozenset((_NONE, _ELLIPSIS, _SLICE, _INT))
_SLICEABLE_MODES = (None, GatherScatterMode.PROMISE_IN_BOUNDS, GatherScatterMode.CLIP)


# ---- parsing ----

def _kind(idx):
    """(kind, value) of one index entry; sequences become NumPy or xform arrays."""
    if idx is None:
        return _NONE, idx
    if idx is Ellipsis:
        return _ELLIPSIS, idx
    if isinstance(idx, slice):
        return _SLICE, idx
    if isinstance(idx, (bool, np.bool_)):
        return _BOOL, bool(idx)
    if isinstance(idx, (int, np.integer)):
        return _INT, idx
    if isinstance(idx, (Array, Tracer, np.ndarray)):
        if idx.dtype == np.bool_:
            return _BOOL, (bool(idx) if isinstance(idx, np.ndarray) and not idx.ndim else idx)
        if dtypes.is_integer(idx.dtype):
            return _ARRAY, idx
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{idx.dtype}")
    if isinstance(idx, str):
        raise TypeError(f"xform does not support string indexing; got idx={idx!r}")
    if isinstance(idx, (list, tuple)):
        if not idx:
            return _ARRAY, np.zeros((0,), np.int32)
        if _holds_arrays(idx):
            return _kind(_creation.asarray(idx))
        return _kind(np.asarray(idx))
    if isinstance(idx, (float, complex, np.generic)):
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{np.dtype(type(idx))}")
    raise IndexError("only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and "
                     f"integer or boolean arrays are valid indices. Got {idx!r}")


def _holds_arrays(seq):
    return any(_holds_arrays(e) if isinstance(e, (list, tuple)) else _util.is_array(e)
               for e in seq)


def _entries(idx, shape):
    """Parse ``idx`` into [(kind, value)]; check the ellipsis and the index count."""
    if type(idx) is not tuple:
        if isinstance(idx, list):
            raise TypeError("Using a non-tuple sequence for multidimensional indexing is not "
                            "allowed; use `arr[array(seq)]` (integer array) or `arr[tuple(seq)]` "
                            "(one index per dimension) instead of `arr[seq]`.")
        idx = (idx,)
    entries = [_kind(i) for i in idx]
    n_ellipsis = sum(kind == _ELLIPSIS for kind, _ in entries)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_ndim(v) if kind == _BOOL else kind not in (_NONE, _ELLIPSIS)
               for kind, v in entries)
    if used > len(shape):
        raise IndexError(f"Too many indices: array is {len(shape)}-dimensional, but {used} "
                         "were indexed")
    return entries


def _ndim(v):
    return v.ndim if hasattr(v, "ndim") else np.ndim(v)


def _static_slice(slc, position):
    """``slc`` with concrete int entries (Array and concrete tracer values allowed)."""
    parts = []
    for v in (slc.start, slc.stop, slc.step):
        if isinstance(v, Tracer) and v.to_concrete_value() is None:
            raise IndexError(f"Slice entries must be static integers. Got {slc} at position "
                             f"{position}: use lax.dynamic_slice for a traced start.")
        parts.append(v if v is None or shape_poly.is_symbolic_dim(v) else operator.index(v))
    if parts[2] == 0:
        raise ValueError("slice step cannot be zero")
    return slice(*parts)


def _expand_ellipsis(entries, ndim):
    """Entries with the ellipsis (and the implicit trailing dims) as full slices."""
    used = sum(_ndim(v) if kind == _BOOL else kind not in (_NONE, _ELLIPSIS)
               for kind, v in entries)
    fill = [(_SLICE, slice(None))] * (ndim - used)
    for i, (kind, _) in enumerate(entries):
        if kind == _ELLIPSIS:
            return entries[:i] + fill + entries[i + 1:]
    return entries + fill


def _static_int_out_of_range(entries, shape):
    """A static int past its non-empty axis: JAX's dynamic_slice (checkify checks it)."""
    real = any(k == _INT for k, _ in entries) and [  # (x[1:5], no int: ~0.3 us)
        e for e in _expand_ellipsis(entries, len(shape)) if e[0] != _NONE]
    return any(kind == _INT and shape[a] and not -shape[a] <= operator.index(v) < shape[a]
               for a, (kind, v) in enumerate(real or ()))


def _check_int(i, axis, size):
    """A static int index, normalized and clamped into range; IndexError on an empty axis."""
    if size == 0:
        raise IndexError(f"index is out of bounds for axis {axis} with size 0")
    return min(max(i + size if i < 0 else i, 0), size - 1)


# ---- x[idx] ----

def getitem(x, idx):
    """``x[idx]``: NumPy's basic and advanced indexing with JAX's semantics."""
    return rewriting_take(x, idx)


def rewriting_take(x, idx, *, indices_are_sorted=False, unique_indices=False, mode=None,
                   fill_value=None, normalize=True):
    """``x[idx]`` lowered to slice, dynamic_slice or gather (the cheapest that fits)."""
    x = _util.asarray(x)
    if _dslice.has_dynamic(idx):
        x, idx = _dslice.take(x, idx)
    shape = x.aval.shape
    entries = _entries(idx, shape)
    parsed = None if mode is None else GatherScatterMode.from_any(mode)
    if parsed in _SLICEABLE_MODES:  # all of them clamp static ints, as the gather would
        kinds = {kind for kind, _ in entries}
        if kinds <= _STATIC_KINDS and not _static_int_out_of_range(entries, shape):
            return _static_take(x, _expand_ellipsis(entries, len(shape)))
        if kinds <= _STATIC_KINDS | {_ARRAY} and all(
                kind != _ARRAY or not _ndim(v) for kind, v in entries) and all(
                kind != _SLICE or _static_slice(v, i).step in (None, 1, -1)
                for i, (kind, v) in enumerate(entries)):
            return _dynamic_take(x, _expand_ellipsis(entries, len(shape)), normalize)
    g = _to_gather(x, entries, normalize)
    if fill_value is not None:
        fill_value = _util.concrete_or_error(fill_value, "fill_value", "ndarray.at[].get")
        if np.ndim(fill_value):
            raise ValueError("fill_value argument to indexed get() must be a scalar")
        fill_value = fill_value.item()
    y = g.operand
    if 0 in g.slice_shape:
        return lax.full(g.slice_shape, _util.scalar_operand(0, x.aval.dtype, x.aval.weak_type))
    if g.indices is not None:
        y = lax.gather(y, g.indices, g.dnums, g.slice_sizes,
                       unique_indices=unique_indices or g.unique,
                       indices_are_sorted=indices_are_sorted or g.unique, mode=parsed,
                       fill_value=fill_value)
    return lax.expand_dims(y, g.newaxis_dims) if g.newaxis_dims else y


def _symbolic_slice(s, n):
    """``(lo, hi, step, reverse_first)`` of slice ``s`` of a symbolic dimension ``n``: a
    negative step slices the reversed axis. The size is JAX's (``canonicalize_slice``);
    ``hi - lo`` spans it exactly for a unit step or a size known >= 1."""
    start, step, size = shape_poly.canonicalize_slice(s, n)
    if step < 0:
        start, step = n - 1 - start, -step
    if step == 1:
        hi = start + size
    elif shape_poly.max_dim(size, 1) == size:    # first to last element
        hi = start + (size - 1) * step + 1
    else:
        hi = shape_poly.min_dim(n, start + size * step)
    return start, hi, step, s.step is not None and s.step < 0


def _static_take(x, entries):
    """Static ints/slices/None: slice + rev + squeeze + expand_dims."""
    shape = x.aval.shape
    start, limit, strides, rev_axes, squeeze_axes, newaxis_dims = [], [], [], [], [], []
    pre_rev_axes = []
    out_pos = axis = 0
    for position, (kind, v) in enumerate(entries):
        if kind == _NONE:
            newaxis_dims.append(out_pos)
            out_pos += 1
            continue
        n = shape[axis]
        if kind == _INT:
            i = _check_int(operator.index(v), axis, n)
            lo, hi, step = i, i + 1, 1
            squeeze_axes.append(axis)
        elif shape_poly.is_symbolic_dim(n):
            lo, hi, step, rev = _symbolic_slice(_static_slice(v, position), n)
            if rev:
                pre_rev_axes.append(axis)
            out_pos += 1
        else:
            r = range(*_static_slice(v, position).indices(n))
            if not r:
                lo = hi = 0
                step = 1
            elif r.step > 0:
                lo, hi, step = r.start, r[-1] + 1, r.step
            else:  # the same elements with a positive step, then reversed
                lo, hi, step = r[-1], r.start + 1, -r.step
                if len(r) > 1:
                    rev_axes.append(axis)
            out_pos += 1
        start.append(lo)
        limit.append(hi)
        strides.append(step)
        axis += 1
    y = lax.rev(x, pre_rev_axes) if pre_rev_axes else x
    if tuple(start) != (0,) * len(shape) or tuple(limit) != shape or set(strides) - {1}:
        y = lax.slice(y, start, limit, None if set(strides) <= {1} else strides)
    return _reverse_squeeze_expand(y, rev_axes, squeeze_axes, newaxis_dims)


def _dynamic_take(x, entries, normalize):
    """Scalar (traced) ints and unit-step slices: dynamic_slice + rev + squeeze."""
    shape = x.aval.shape
    index_dtype = _index_dtype(shape)
    starts, sizes, rev_axes, squeeze_axes, newaxis_dims = [], [], [], [], []
    out_pos = axis = 0
    for position, (kind, v) in enumerate(entries):
        if kind == _NONE:
            newaxis_dims.append(out_pos)
            out_pos += 1
            continue
        n = shape[axis]
        if kind == _INT:
            i = operator.index(v)   # past the axis: JAX's unclamped start, for checkify
            starts.append(np.array(i + n if i < 0 else i, index_dtype) if n and not -n <= i < n
                          else _check_int(i, axis, n))
            sizes.append(1)
            squeeze_axes.append(axis)
        elif kind == _ARRAY:
            if n == 0:
                raise IndexError(f"index is out of bounds for axis {axis} with size 0")
            starts.append(lax.convert_element_type(_util.asarray(v), index_dtype))
            sizes.append(1)
            squeeze_axes.append(axis)
        else:
            start, step, size = shape_poly.canonicalize_slice(_static_slice(v, position), n)
            starts.append(start if step > 0 else 0 if size == 0 else start - (size - 1))
            sizes.append(size)
            if step < 0 and size != 1:
                rev_axes.append(axis)
            out_pos += 1
        axis += 1
    static = [type(s) is int or shape_poly.is_symbolic_dim(s) for s in starts]
    wrap = [normalize and not st and type(s) is not np.ndarray for s, st in zip(starts, static)]
    starts = [_util.scalar_operand(s, index_dtype, False) if st else s
              for s, st in zip(starts, static)]
    y = lax.dynamic_slice(x, starts, sizes, allow_negative_indices=wrap)
    return _reverse_squeeze_expand(y, rev_axes, squeeze_axes, newaxis_dims)


def _reverse_squeeze_expand(y, rev_axes, squeeze_axes, newaxis_dims):
    """The shared tail of both slicing forms: negative steps, int indices, None."""
    if rev_axes:
        y = lax.rev(y, rev_axes)
    if squeeze_axes:
        y = lax.squeeze(y, squeeze_axes)
    if newaxis_dims:
        y = lax.expand_dims(y, newaxis_dims)
    return y


# ---- the gather form of an index (shared by x[idx] and x.at[idx]) ----

class _Gather(NamedTuple):
    operand: object        # x, with a size-1 dim inserted per scalar-bool index
    indices: object        # index vectors (last dim), or None when nothing is indexed
    dnums: GatherDimensionNumbers
    slice_sizes: tuple
    slice_shape: tuple     # shape of x[idx] (with the None dims)
    newaxis_dims: tuple    # positions of the None dims in slice_shape
    scalar_bool_dims: tuple
    unique: bool           # no advanced index: indices unique and sorted


def _index_dtype(shape):
    big = any(not shape_poly.is_symbolic_dim(d) and d >= 2 ** 31 for d in shape)
    return np.dtype(np.int64 if big else np.int32)   # symbolic dims are int32 values


def _expand_bool_arrays(entries, shape):
    """Boolean array entries (concrete only) as their integer ``nonzero`` entries."""
    out, axis = [], 0
    for position, (kind, v) in enumerate(entries):
        if kind == _ELLIPSIS:
            axis += len(shape) - sum(_ndim(u) if k == _BOOL else k not in (_NONE, _ELLIPSIS)
                                     for k, u in entries)
        if kind != _BOOL:
            out.append((kind, v))
            axis += kind in (_SLICE, _INT, _ARRAY)
            continue
        if isinstance(v, Tracer):
            concrete = v.to_concrete_value()
            if concrete is None:
                raise NonConcreteBooleanIndexError(v)
            v = concrete
        mask = np.asarray(v)
        if not mask.ndim:
            out.append((_BOOL, bool(mask)))
            continue
        want = shape[axis:axis + mask.ndim]
        if any(s not in (0, w) for s, w in zip(mask.shape, want)):
            raise IndexError(f"boolean index did not match shape of indexed array in index "
                             f"{position}: got {mask.shape}, expected {list(want)}")
        out.extend((_ARRAY, i) for i in np.nonzero(mask))
        axis += mask.ndim
    return out


def _normalized(v, size, dtype, normalize):
    """An index array as ``dtype`` with negative entries wrapped (NumPy or traced).

    NB: converted to ``dtype`` before wrapping, so an int8 index into a dimension of
    200 cannot overflow (JAX wraps in the index's own dtype)."""
    if isinstance(v, (np.ndarray, int, np.integer)):
        v = np.asarray(v)
        wrap = normalize and not dtypes.is_unsigned(v.dtype)
        v = v.astype(dtype)
        return np.where(v < 0, v + size, v).astype(dtype) if wrap else v
    v = _util.asarray(v)
    wrap = normalize and not dtypes.is_unsigned(v.aval.dtype)
    if v.aval.dtype != dtype:
        v = lax.convert_element_type(v, dtype)
    if wrap:
        v = lax.select(lax.lt(v, _util.scalar_operand(0, dtype, False)),
                       lax.add(v, _util.scalar_operand(size, dtype, False)), v)
    return v


def _to_gather(x, entries, normalize):
    """The gather (operand, index vectors, dimension numbers) computing ``x[idx]``."""
    entries = _expand_bool_arrays(entries, x.aval.shape)
    adv_positions = [i for i, (kind, _) in enumerate(entries) if kind in (_ARRAY, _INT)]
    contiguous = all(b - a == 1 for a, b in zip(adv_positions, adv_positions[1:]))
    # scalar booleans: a new size-1 axis indexed by arange(0) or arange(1)
    shape = list(x.aval.shape)
    expanded, scalar_bool_dims, axis = [], [], 0
    for kind, v in _expand_ellipsis(entries, len(shape)):
        if kind == _BOOL:
            scalar_bool_dims.append(axis)
            shape.insert(axis, 1)
            kind, v = _ARRAY, np.arange(int(v))
        expanded.append((kind, v))
        axis += kind != _NONE
    operand = lax.expand_dims(x, scalar_bool_dims) if scalar_bool_dims else x
    entries = expanded
    index_dtype = _index_dtype(shape)
    advanced = any(kind == _ARRAY and _ndim(v) for kind, v in entries)
    adv_idx = [i for i, (kind, _) in enumerate(entries) if kind in (_ARRAY, _INT)] \
        if advanced else []
    parts = []             # (index array, first dim in the batch shape)
    batch_shape = []       # shape of the index arrays (without the vector dim)
    offset_dims, collapsed, start_index_map = [], [], []
    slice_sizes, slice_shape, newaxis_dims = [], [], []
    out_pos = axis = 0     # out_pos: position in the gather output (no None dims)
    for position, (kind, v) in enumerate(entries):
        if adv_idx and position == (adv_idx[0] if contiguous else 0):
            axes = [sum(k != _NONE for k, _ in entries[:i]) for i in adv_idx]
            arrays = [_normalized(entries[i][1], shape[a], index_dtype, normalize)
                      for i, a in zip(adv_idx, axes)]
            try:
                bshape = _util.broadcast_shapes(*(_util.shape(a) for a in arrays))
            except ValueError as e:  # ValueError, as in JAX (NumPy: IndexError)
                raise ValueError(f"{e}: the integer-array indices of an index must "
                                 "broadcast together") from None
            parts.extend((a, len(batch_shape), bshape) for a in arrays)
            batch_shape.extend(bshape)
            start_index_map.extend(axes)
            collapsed.extend(axes)
            slice_shape.extend(bshape)
            out_pos += len(bshape)
        if position in adv_idx:
            slice_sizes.append(1)
            axis += 1
            continue
        if kind == _NONE:
            newaxis_dims.append(len(slice_shape))
            slice_shape.append(1)
            continue
        n = shape[axis]
        if kind in (_INT, _ARRAY):  # a scalar index
            if n == 0:
                raise IndexError(f"index is out of bounds for axis {axis} with size 0")
            parts.append((_normalized(v, n, index_dtype, normalize), len(batch_shape), ()))
            collapsed.append(axis)
            start_index_map.append(axis)
            slice_sizes.append(1)
        else:
            start, step, size = shape_poly.canonicalize_slice(_static_slice(v, position), n)
            slice_shape.append(size)
            if step == 1:
                if size != n:
                    parts.append((_index_value(start, index_dtype), len(batch_shape), ()))
                    start_index_map.append(axis)
                slice_sizes.append(size)
                offset_dims.append(out_pos)
            else:  # a strided slice gathers its elements as a batch dimension
                parts.append((_index_value(start, index_dtype, step, size),
                              len(batch_shape), (size,)))
                batch_shape.append(size)
                start_index_map.append(axis)
                collapsed.append(axis)
                slice_sizes.append(1)
            out_pos += 1
        axis += 1
    dnums = GatherDimensionNumbers(tuple(offset_dims), tuple(sorted(collapsed)),
                                   tuple(start_index_map))
    return _Gather(operand, _stack_indices(parts, batch_shape, index_dtype), dnums,
                   tuple(slice_sizes), tuple(slice_shape), tuple(newaxis_dims),
                   tuple(scalar_bool_dims), not advanced)


def _index_value(start, dtype, step=None, size=None):
    """``start`` (or ``start + step*arange(size)``): NumPy where static, else computed
    from the dimension variables."""
    if not any(shape_poly.is_symbolic_dim(d) for d in (start, step, size)):
        return np.asarray(start if step is None else start + step * np.arange(size), dtype)
    start = _util.scalar_operand(start, dtype, False)
    return start if step is None else lax.add(
        lax.mul(lax.iota(dtype, size), _util.scalar_operand(step, dtype, False)), start)


def _stack_indices(parts, batch_shape, dtype):
    """One index array of shape ``batch_shape + (len(parts),)``: each part broadcast
    with its dimensions starting at its recorded position (NumPy when all static)."""
    if not parts:
        return None
    full = tuple(batch_shape)
    # an advanced index aligns its trailing dims with its block (NumPy broadcasting)
    if all(isinstance(a, np.ndarray) for a, _, _ in parts):
        cols = []
        for a, start, block in parts:
            lead = start + len(block) - a.ndim
            a = a.reshape((1,) * lead + a.shape + (1,) * (len(full) - lead - a.ndim))
            cols.append(np.broadcast_to(a, full))
        return np.stack(cols, axis=-1).astype(dtype)
    cols = []
    for a, start, block in parts:
        a = _util.asarray(a) if isinstance(a, np.ndarray) else a
        lead = start + len(block) - a.aval.ndim
        cols.append(lax.broadcast_in_dim(a, full + (1,), tuple(range(lead, lead + a.aval.ndim))))
    return lax.concatenate(cols, len(full))


# ---- x.at[idx] ----

def _scatter_update(x, idx, y, scatter_op, indices_are_sorted, unique_indices, mode,
                    normalize):
    """``x[idx] op= y`` as a scatter, returned in ``x``'s dtype and weak type."""
    if _dslice.has_dynamic(idx):
        return _dslice.update(x, idx, lambda sub, rest: _scatter_update(
            sub, rest, y, scatter_op, indices_are_sorted, unique_indices, mode, normalize))
    x = _util.asarray(x)
    dtype, weak = x.aval.dtype, x.aval.weak_type
    if type(y) is int and dtypes.is_integer(dtype) and \
            np.iinfo(dtype).min <= y <= np.iinfo(dtype).max:
        y = _util.scalar_operand(y, dtype, False)
    g = _to_gather(x, _entries(idx, x.aval.shape), normalize)
    if 0 in g.slice_shape:
        return x
    operand, y = _util.promote_dtypes("ndarray.at", g.operand, y)
    y = _util.broadcast_to(y, g.slice_shape)
    if g.newaxis_dims:
        y = lax.squeeze(y, g.newaxis_dims)
    dn = ScatterDimensionNumbers(g.dnums.offset_dims, g.dnums.collapsed_slice_dims,
                                 g.dnums.start_index_map)
    # no index vectors (every dimension taken whole): one window, the whole operand
    indices = np.zeros((0,), np.int32) if g.indices is None else g.indices
    out = scatter_op(operand, indices, y, dn, indices_are_sorted=indices_are_sorted or g.unique,
                     unique_indices=unique_indices or g.unique, mode=mode)
    if g.scalar_bool_dims:
        out = lax.squeeze(out, g.scalar_bool_dims)
    return lax.convert_element_type(out, dtype, weak)


def _scatter_sub(operand, indices, updates, dn, **kw):
    return lax.scatter_add(operand, indices, _ufuncs.negative(updates), dn, **kw)


class _IndexUpdateHelper:
    """``x.at``: index it (``x.at[idx]``) to get a ref with pure update methods.

    >>> import xform.numpy as jnp
    >>> jnp.zeros(4).at[jnp.array([1, 1, 3])].add(1.)
    Array([0., 2., 0., 1.], dtype=float32)
    """
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
    """``x.at[idx]``: functional versions of ``x[idx] = v``, ``x[idx] += v``, ...

    Every method returns an updated copy of ``x`` in ``x``'s dtype (values are cast).
    Keyword arguments: ``indices_are_sorted``/``unique_indices`` (promises that may
    speed things up), ``mode`` (``'promise_in_bounds'``, ``'clip'``, or ``'drop'``/
    ``'fill'``, the default for updates, which drops out-of-bounds updates), and
    ``wrap_negative_indices`` (default True).
    """
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None, out_sharding=None, wrap_negative_indices=True):
        """``x[idx]``; with ``mode='fill'`` out-of-bounds entries are ``fill_value``
        (default NaN for inexact dtypes, the extreme value for integers).
        ``out_sharding``: the result's sharding (explicit mode: its type)."""
        out = rewriting_take(self.array, self.index, indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=mode,
                             fill_value=fill_value, normalize=wrap_negative_indices)
        return _creation._placed(out, out_sharding, ".get")

    def _update(self, op, name, out_sharding, values, indices_are_sorted, unique_indices,
                mode, wrap_negative_indices, array=None):
        """Each update's ``out_sharding``: the result's sharding (explicit mode: its type;
        JAX's error names the method, ``name``)."""
        return _creation._placed(_scatter_update(
            self.array if array is None else array, self.index, values, op,
            indices_are_sorted, unique_indices, mode, wrap_negative_indices), out_sharding, name)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True, out_sharding=None):
        """``x[idx] = values`` (with repeated indices, which update wins is unspecified)."""
        return self._update(lax.scatter, ".set", out_sharding, values,
                            indices_are_sorted, unique_indices, mode, wrap_negative_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True, out_sharding=None):
        """``x[idx] += values`` (repeated indices accumulate)."""
        return self._update(lax.scatter_add, ".add", out_sharding, values,
                            indices_are_sorted, unique_indices, mode, wrap_negative_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True, out_sharding=None):
        """``x[idx] -= values`` (repeated indices accumulate)."""
        return self._update(_scatter_sub, ".subtract", out_sharding, values,
                            indices_are_sorted, unique_indices, mode, wrap_negative_indices)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True, out_sharding=None):
        """``x[idx] *= values`` (repeated indices accumulate)."""
        return self._update(lax.scatter_mul, ".multiply", out_sharding, values,
                            indices_are_sorted, unique_indices, mode, wrap_negative_indices)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               wrap_negative_indices=True, out_sharding=None):
        """``x[idx] /= values``: ``x`` divided by a scatter-multiplied array of ones (so
        integer ``x`` gives a float result, as ``true_divide`` does)."""
        ones = _creation.ones_like(self.array)
        return _creation._placed(_ufuncs.true_divide(self.array, self._update(
            lax.scatter_mul, None, None, values, indices_are_sorted, unique_indices, mode,
            wrap_negative_indices, ones)), out_sharding, ".divide")

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True, out_sharding=None):
        """``x[idx] **= values``: ``x`` to the power of a scatter-multiplied array of ones."""
        ones = _creation.ones_like(self.array)
        return _creation._placed(_ufuncs.power(self.array, self._update(
            lax.scatter_mul, None, None, values, indices_are_sorted, unique_indices, mode,
            wrap_negative_indices, ones)), out_sharding, ".power")

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True, out_sharding=None):
        """``x[idx] = minimum(x[idx], values)``."""
        return self._update(lax.scatter_min, ".min", out_sharding, values,
                            indices_are_sorted, unique_indices, mode, wrap_negative_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True, out_sharding=None):
        """``x[idx] = maximum(x[idx], values)``."""
        return self._update(lax.scatter_max, ".max", out_sharding, values,
                            indices_are_sorted, unique_indices, mode, wrap_negative_indices)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """``x[idx] = func(x[idx])`` for a unary scalar ``func``, applied once per occurrence
        of an index (repeated indices apply it repeatedly, as JAX's ``scatter_apply``).

        >>> import xform.numpy as jnp
        >>> jnp.arange(4.).at[jnp.array([1, 1, 3])].apply(lambda v: v * 10)
        Array([  0., 100.,   2.,  30.], dtype=float32)
        """
        x = _util.asarray(self.array)
        counts = _IndexUpdateRef(_creation.zeros(x.aval.shape, np.int32), self.index).add(
            1, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices)

        def once_more(i, y):  # func on every element (vmapped over scalars), kept where due
            fy = vmap(func)(lax.reshape(y, (y.aval.size,)))
            fy = lax.convert_element_type(lax.reshape(fy, x.aval.shape), x.aval.dtype,
                                          x.aval.weak_type)
            return lax.select(_ufuncs.greater(counts, i), fy, y)
        return lax.fori_loop(0, lax.reduce_max(counts, tuple(range(x.aval.ndim))), once_more, x)


def at(x):
    """The ``x.at`` property."""
    return _IndexUpdateHelper(x)


def setitem(x, idx, value):
    """``x[idx] = value``: arrays are immutable, so point to ``.at``."""
    raise TypeError(f"'{type(x).__name__}' object does not support item assignment. xform "
                    "arrays are immutable (as JAX's): instead of ``x[idx] = y``, use "
                    "``x = x.at[idx].set(y)``.")
