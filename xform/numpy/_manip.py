"""More array manipulation: roll, rot90, flips, splits, tile, repeat, block and the
stacking helpers, append/delete/insert, resize, trim_zeros. Static shapes throughout:
the arguments that decide the output shape must be concrete."""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.interpreters.composite import composite
from xform.core.trace import Tracer
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._shape import (atleast_3d, concatenate, flip, moveaxis, ravel, reshape,
                                transpose)
from xform.numpy._util import asarray, canonicalize_axis
from xform.numpy._cumulative import cumsum
from xform.numpy._take import take
from xform.numpy._sorting import argsort, nonzero


def _slice_axis(a, start, stop, axis):
    start_idx = [0] * a.aval.ndim
    limit = list(a.aval.shape)
    start_idx[axis], limit[axis] = start, stop
    return lax.slice(a, start_idx, limit)


@composite(static=("shift", "axis"))
def roll(a, shift, axis=None):
    """Like numpy.roll: elements shifted along ``axis`` (flattened if None), wrapping
    around; ``shift`` and ``axis`` may be tuples.

    >>> jnp.roll(jnp.arange(4), 1)
    Array([3, 0, 1, 2], dtype=int32)
    """
    a = asarray(a, "roll")
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.aval.shape)
    axes = np.atleast_1d(np.asarray(axis))
    if isinstance(shift, Tracer):   # a traced shift: JAX's dynamic roll
        return _roll_dynamic(a, asarray(shift, "roll", 1), axes)
    shifts = np.atleast_1d(_util.concrete_or_error(shift, "shift", "roll"))
    shifts, axes = np.broadcast_arrays(shifts, axes)
    for s, ax in zip(shifts.tolist(), axes.tolist()):
        ax = canonicalize_axis(ax, a.aval.ndim)
        n = a.aval.shape[ax]
        if n == 0:
            continue
        s = (-s if shape_poly.is_symbolic_dim(s) else -int(s)) % n
        if shape_poly.is_symbolic_dim(s) or s:
            a = lax.concatenate([_slice_axis(a, s, n, ax), _slice_axis(a, 0, s, ax)], ax)
    return a


def _roll_dynamic(a, shift, axes):
    """Each axis's window of ``[a, a]`` from ``n - shift % n`` (a traced shift)."""
    if shift.aval.ndim > 1:
        raise ValueError("'shift' and 'axis' arguments to roll must be scalars or 1D arrays")
    n = np.broadcast_shapes(shift.aval.shape, axes.shape)[0] if axes.ndim else 1
    shifts = _util.broadcast_to(shift, (n,))
    for k, ax in enumerate(np.broadcast_to(axes, (n,)).tolist()):
        ax = canonicalize_axis(ax, a.aval.ndim)
        size = np.int32(a.aval.shape[ax])
        x = uf.remainder(lax.convert_element_type(shifts[k], np.int32), max(size, 1))
        a = lax.dynamic_slice_in_dim(lax.concatenate([a, a], ax), size - x,
                                     a.aval.shape[ax], ax)
    return a


@composite(static=("k", "axes"))
def rot90(m, k=1, axes=(0, 1)):
    """Like numpy.rot90: rotate by 90 degrees ``k`` times in the ``axes`` plane."""
    m = asarray(m, "rot90")
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    ax0, ax1 = (canonicalize_axis(x, m.aval.ndim) for x in axes)
    if ax0 == ax1:
        raise ValueError("Axes must be different")
    k = k % 4   # (not operator.index: a float k takes JAX's branches, 2.5 as 3)
    if k == 0:
        return m
    if k == 2:
        return flip(m, (ax0, ax1))
    perm = list(range(m.aval.ndim))
    perm[ax0], perm[ax1] = perm[ax1], perm[ax0]
    if k == 1:
        return transpose(flip(m, ax1), perm)
    return flip(transpose(m, perm), ax1)


def fliplr(m):
    """Like numpy.fliplr (reverse axis 1)."""
    return flip(m, 1)


def flipud(m):
    """Like numpy.flipud (reverse axis 0)."""
    return flip(m, 0)


@composite(static=("axis", "start"))
def rollaxis(a, axis, start=0):
    """Like numpy.rollaxis: move ``axis`` to before position ``start``."""
    a = asarray(a, "rollaxis")
    nd = a.aval.ndim
    axis = canonicalize_axis(axis, nd)
    if not -nd <= start <= nd:
        raise ValueError(f"start={start} must satisfy {-nd} <= start <= {nd}")
    start = start + nd if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start)


def permute_dims(a, /, axes):
    """Like numpy.permute_dims (the array API name of transpose)."""
    return transpose(a, axes)


def concat(arrays, /, *, axis=0):
    """Like numpy.concat (the array API name of concatenate)."""
    return concatenate(arrays, axis)


@composite(static=("axis",))
def unstack(x, /, *, axis=0):
    """Like numpy.unstack: a tuple of the slices along ``axis``."""
    x = asarray(x, "unstack")
    if x.aval.ndim == 0:
        raise ValueError("Unstack requires arrays with rank > 0, however a scalar array "
                         "was passed.")
    axis = canonicalize_axis(axis, x.aval.ndim)
    return tuple(lax.squeeze(_slice_axis(x, i, i + 1, axis), (axis,))
                 for i in range(x.aval.shape[axis]))


def column_stack(tup):
    """Like numpy.column_stack: 1-D inputs become columns."""
    arrays = [asarray(x, "column_stack", i) for i, x in enumerate(tup)]
    arrays = [lax.reshape(x, (x.aval.size, 1)) if x.aval.ndim < 2 else x for x in arrays]
    return concatenate(arrays, 1)


def dstack(tup, dtype=None):
    """Like numpy.dstack: stack along the third axis."""
    return concatenate([atleast_3d(asarray(x, "dstack", i)) for i, x in enumerate(tup)],
                       2, dtype)


@composite
def block(arrays):
    """Like numpy.block: assemble an array from nested lists of blocks."""
    def depth(x):
        return 1 + depth(x[0]) if isinstance(x, list) and x else (1 if isinstance(x, list)
                                                                    else 0)

    def leaves(x):
        return [y for z in x for y in leaves(z)] if isinstance(x, list) else [x]

    if isinstance(arrays, tuple):
        raise TypeError("jnp.block: arrays is a tuple; only lists can be used to arrange "
                        "blocks.")
    list_ndim = depth(arrays)
    ndim = max([list_ndim] + [np.ndim(x) if not _util.is_array(x) else x.aval.ndim
                              for x in leaves(arrays)])

    def rec(x, d):
        if not isinstance(x, list):
            x = asarray(x, "block")
            return lax.reshape(x, (1,) * (ndim - x.aval.ndim) + x.aval.shape)
        if not x:
            raise ValueError("jnp.block: lists cannot be empty")
        return concatenate([rec(y, d + 1) for y in x], ndim - list_ndim + d)

    return rec(arrays, 0)


# ---- splits ----

def _split(name, ary, indices_or_sections, axis, strict):
    ary = asarray(ary, name)
    axis = canonicalize_axis(axis, ary.aval.ndim)
    n = ary.aval.shape[axis]
    sections = _util.concrete_or_error(indices_or_sections, "indices_or_sections", name)
    if sections.ndim == 0:
        k = int(sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        q, r = divmod(n, k)
        if strict and r != 0:
            raise ValueError(f"array split does not result in an equal division: rest is {r}")
        return list(lax.split(ary, [q + 1] * r + [q] * (k - r), axis))   # (as JAX)
    else:
        bounds = [0] + [min(max(int(i) + n if i < 0 else int(i), 0), n)
                        for i in sections.tolist()] + [n]
    return [_slice_axis(ary, lo, max(lo, hi), axis) for lo, hi in zip(bounds, bounds[1:])]


def split(ary, indices_or_sections, axis=0):
    """Like numpy.split: equal sections (an int) or split points (a sequence).

    >>> [p.tolist() for p in jnp.split(jnp.arange(4), 2)]
    [[0, 1], [2, 3]]
    """
    return _split("split", ary, indices_or_sections, axis, True)


def array_split(ary, indices_or_sections, axis=0):
    """Like numpy.array_split: like :func:`split`, but sections may be unequal."""
    return _split("array_split", ary, indices_or_sections, axis, False)


def _nd_split(name, ary, indices_or_sections, axis, min_ndim):
    a = asarray(ary, name)
    if a.aval.ndim < min_ndim:
        raise ValueError(f"{name} only works on arrays of {min_ndim} or more dimensions")
    return _split(name, a, indices_or_sections, axis, True)


def hsplit(ary, indices_or_sections):
    """Like numpy.hsplit (axis 1, or 0 for 1-D arrays)."""
    a = asarray(ary, "hsplit")
    return _nd_split("hsplit", a, indices_or_sections, 0 if a.aval.ndim == 1 else 1, 1)


def vsplit(ary, indices_or_sections):
    """Like numpy.vsplit (axis 0)."""
    return _nd_split("vsplit", ary, indices_or_sections, 0, 2)


def dsplit(ary, indices_or_sections):
    """Like numpy.dsplit (axis 2)."""
    return _nd_split("dsplit", ary, indices_or_sections, 2, 3)


# ---- tile, repeat, resize ----

def tile(A, reps):
    """Like numpy.tile: ``A`` repeated ``reps`` times along each axis.

    >>> jnp.tile(jnp.array([1, 2]), 2)
    Array([1, 2, 1, 2], dtype=int32)
    """
    A = asarray(A, "tile")
    reps = tuple(operator.index(r) for r in np.atleast_1d(np.asarray(reps)).tolist())
    nd = max(len(reps), A.aval.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    A = lax.reshape(A, (1,) * (nd - A.aval.ndim) + A.aval.shape)
    shape = A.aval.shape
    big = tuple(d for r, s in zip(reps, shape) for d in (r, s))
    out = lax.broadcast_in_dim(A, big, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(out, tuple(r * s for r, s in zip(reps, shape)))


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Like numpy.repeat: each element repeated ``repeats`` times (an int, or one count
    per element, which must then be concrete unless ``total_repeat_length`` is given).

    >>> jnp.repeat(jnp.array([1, 2]), 2)
    Array([1, 1, 2, 2], dtype=int32)
    """
    a = asarray(a, "repeat")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.aval.ndim)
    n = a.aval.shape[axis]
    if _util.is_array(repeats) and repeats.aval.shape and total_repeat_length is not None:
        return _repeat_traced(a, repeats, axis, total_repeat_length)
    reps = _util.concrete_or_error(repeats, "repeats", "repeat").ravel()  # (as JAX's)
    if reps.size == 1:
        r = int(reps.reshape(()))
        if r < 0:
            raise ValueError(f"repeats may not contain negative values, got {r}")
        shape = a.aval.shape
        out = lax.broadcast_in_dim(a, shape[:axis + 1] + (r,) + shape[axis + 1:],
                                   tuple(i for i in range(a.aval.ndim + 1) if i != axis + 1))
        out = lax.reshape(out, shape[:axis] + (n * r,) + shape[axis + 1:])
    else:
        if reps.shape != (n,):
            raise ValueError(f"repeats has shape {reps.shape}, which does not match the "
                             f"{n} elements along axis {axis}")
        if (reps < 0).any():
            raise ValueError("repeats may not contain negative values")
        out = take(a, np.repeat(np.arange(n), reps), axis=axis)
    if total_repeat_length is not None:
        out = _fit_length(out, a, total_repeat_length, axis)
    return out


def _fit_length(x, a, length, axis):
    """Cut ``x`` to ``length`` along ``axis``, or pad it with ``a``'s last element (its
    count may be 0), as JAX's ``total_repeat_length``; an empty ``a`` stays as it is."""
    n, n_a = x.aval.shape[axis], a.aval.shape[axis]
    if n_a == 0:
        return a
    if n >= length:
        return _slice_axis(x, 0, length, axis)
    shape = list(x.aval.shape)
    shape[axis] = length - n
    fill = _util.broadcast_to(_slice_axis(a, n_a - 1, n_a, axis), tuple(shape))
    return lax.concatenate([x, fill], axis)


def _repeat_traced(a, repeats, axis, total):
    """repeat with traced per-element counts: output position k takes element i where
    ``cumsum(repeats)[i-1] <= k < cumsum(repeats)[i]`` (a comparison count)."""
    ends = cumsum(lax.convert_element_type(repeats, dtypes.int32))
    k = lax.iota(dtypes.int32, total)
    idx = lax.reduce_sum(lax.convert_element_type(
        lax.ge(lax.broadcast_in_dim(k, (total, ends.aval.shape[0]), (0,)),
               lax.broadcast_in_dim(ends, (total, ends.aval.shape[0]), (1,))),
        dtypes.int32), (1,))
    idx = lax.min(idx, _util.scalar_array(a.aval.shape[axis] - 1, dtypes.int32, False))
    return take(a, idx, axis=axis)


@composite(static=("new_shape",))
def resize(a, new_shape):
    """Like numpy.resize: the flattened input repeated (cyclically) to ``new_shape``."""
    a = ravel(asarray(a, "resize"))
    new_shape = _util.canonical_shape(new_shape, "new_shape")
    size = int(np.prod(new_shape, dtype=np.int64))
    if a.aval.size == 0 or size == 0:
        return lax.full(new_shape, _util.scalar_array(0, a.aval.dtype, False))
    reps = -(-size // a.aval.size)
    return lax.reshape(lax.slice(tile(a, reps), (0,), (size,)), new_shape)


# ---- append, delete, insert, trim_zeros ----

@composite(static=("axis",))
def append(arr, values, axis=None):
    """Like numpy.append (flattens both when ``axis`` is None)."""
    if axis is None:
        return concatenate([ravel(asarray(arr, "append")), ravel(asarray(values,
                                                                         "append", 1))], 0)
    return concatenate([arr, values], axis)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """Like numpy.delete; ``obj`` (a slice, int, index array or boolean mask) must be
    concrete."""
    del assume_unique_indices
    _util.check_arraylike("delete", arr)
    a = asarray(arr, "delete")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.aval.ndim)
    n = a.aval.shape[axis]
    if shape_poly.is_symbolic_dim(n) and isinstance(obj, (int, np.integer)) \
            and not isinstance(obj, bool):   # (as JAX: the pieces before and after)
        i = obj + n if obj < 0 else obj
        return lax.concatenate([_slice_axis(a, 0, i, axis), _slice_axis(a, i + 1, n, axis)],
                               axis)
    if isinstance(obj, slice):
        drop = np.arange(n)[obj]
    else:
        _util.check_arraylike("delete", obj)
        drop = _util.concrete_or_error(obj, "obj", "delete")
        if drop.dtype == np.bool_:  # a mask of the entries to delete
            if drop.shape != (n,):
                raise ValueError("np.delete(arr, obj): for boolean indices, obj must be "
                                 "one-dimensional with length matching specified axis.")
            drop = np.flatnonzero(drop)
        if not np.issubdtype(drop.dtype, np.integer):
            raise ValueError("index array argument obj to delete must be one dimensional "
                             "or a slice, with integer values")
        if ((drop < -n) | (drop >= n)).any():
            raise IndexError(f"index {drop.tolist()} is out of bounds for axis {axis} "
                             f"with size {n}")
        drop = drop % n if n else drop
    keep = np.setdiff1d(np.arange(n), drop)
    pieces = [_slice_axis(a, int(i), int(i) + 1, axis) for i in keep]
    return lax.concatenate(pieces, axis) if pieces else _slice_axis(a, 0, 0, axis)


def insert(arr, obj, values, axis=None):
    """Like numpy.insert; ``obj`` (an int, slice or index array) must be concrete."""
    _util.check_arraylike("insert", arr, values)
    a = asarray(arr, "insert")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.aval.ndim)
    n = a.aval.shape[axis]
    if isinstance(obj, slice):
        idx = np.arange(n + 1)[obj]
    elif isinstance(obj, Tracer) and obj.to_concrete_value() is None:
        return _insert_traced(a, obj, values, axis)
    else:
        idx = _util.concrete_or_error(obj, "obj", "insert")
        if idx.size and not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"jnp.insert(): index array must be integer typed; got {idx}")
    scalar = idx.ndim == 0
    idx = np.atleast_1d(idx)  # negatives wrap, then out-of-range positions clip (as JAX)
    idx = np.clip(np.where(idx < 0, idx + n, idx), 0, n)
    values = lax.convert_element_type(asarray(values, "insert", 2), a.aval.dtype,
                                      a.aval.weak_type)
    vshape = list(a.aval.shape)
    if idx.size == 1:  # all of ``values`` goes in at that one position (JAX's: [i] too)
        if values.aval.ndim < a.aval.ndim:
            values = lax.reshape(values, (1,) * (a.aval.ndim - values.aval.ndim)
                                 + values.aval.shape)
        if scalar:
            values = moveaxis(values, 0, axis)
        vshape[axis] = values.aval.shape[axis]
        idx = np.full(vshape[axis], idx[0])
    else:
        vshape[axis] = len(idx)
    v = _util.broadcast_to(values, tuple(vshape))
    chunks = [_slice_axis(v, j, j + 1, axis) for j in range(len(idx))]
    order = np.argsort(idx, kind="stable")
    pieces, prev = [], 0
    for j in order:
        pos = int(idx[j])
        if pos > prev:
            pieces.append(_slice_axis(a, prev, pos, axis))
            prev = pos
        pieces.append(chunks[j])
    if prev < n:
        pieces.append(_slice_axis(a, prev, n, axis))
    return lax.concatenate(pieces, axis) if pieces else a


def _insert_traced(a, idx, values, axis):
    """insert at traced positions, by JAX's formula: the values' positions are the
    sorted indices plus their rank, ``a`` fills the rest (the count is static)."""
    if idx.aval.ndim > 1:
        raise ValueError(f"jnp.insert(): obj must be a slice, a one-dimensional array, or "
                         f"a scalar; got shape {idx.aval.shape}")
    if not dtypes.is_integer(idx.aval.dtype):
        raise ValueError(f"jnp.insert(): index array must be integer typed; got "
                         f"{idx.aval.dtype}")
    values = lax.convert_element_type(asarray(values, "insert", 2), a.aval.dtype,
                                      a.aval.weak_type)
    if values.aval.ndim < a.aval.ndim:   # (ndmin=a.ndim)
        values = lax.reshape(values, (1,) * (a.aval.ndim - values.aval.ndim)
                             + values.aval.shape)
    if idx.aval.size == 1:
        if idx.aval.ndim == 0:
            values = moveaxis(values, 0, axis)
        idx = lax.broadcast_in_dim(lax.reshape(idx, ()), (values.aval.shape[axis],), ())
    n = a.aval.shape[axis]
    k = _util.broadcast_shapes(idx.aval.shape, (values.aval.shape[axis],))[0]
    idx = _util.broadcast_to(idx, (k,))
    idx = uf.clip(uf.where(uf.less(idx, 0), uf.add(idx, n), idx), 0, n)
    values_ind = idx.at[argsort(idx)].add(lax.iota(idx.aval.dtype, k))
    a_ind = nonzero(lax.full((n + k,), True).at[values_ind].set(False), size=n)[0]
    shape = list(a.aval.shape)
    shape[axis] += k
    out = _util.filled_like(lax.full(tuple(shape), 0, a.aval.dtype), 0)
    out = lax.convert_element_type(out, a.aval.dtype, a.aval.weak_type)
    pre = (slice(None),) * axis
    return out.at[pre + (values_ind,)].set(values).at[pre + (a_ind,)].set(a)


def trim_zeros(filt, trim="fb", axis=None):
    """Like numpy.trim_zeros on a concrete array (the result's shape depends on the
    values): along each of ``axis`` (default all), drops the leading ('f') and/or
    trailing ('b') slices that are all zero.

    NB: a complex value counts as nonzero when either part is (JAX's 1-D case looks at
    the real part only, through its ``any`` over no axes)."""
    value = _util.concrete_or_error(filt, "filt", "trim_zeros")
    a = asarray(filt, "trim_zeros")
    axes = range(value.ndim) if axis is None else _util.canonicalize_axes(axis, value.ndim)
    trim = trim.lower()
    if not axes or ("f" not in trim and "b" not in trim):
        return a
    nonzero = value != 0
    lo, hi = [0] * value.ndim, list(value.shape)
    for ax in axes:
        mask = nonzero.any(axis=tuple(d for d in range(value.ndim) if d != ax))
        if not mask.any():
            lo[ax] = hi[ax] = 0
            continue
        nz = np.flatnonzero(mask)
        lo[ax] = int(nz[0]) if "f" in trim else 0
        hi[ax] = int(nz[-1]) + 1 if "b" in trim else value.shape[ax]
    return lax.slice(a, tuple(lo), tuple(hi))
