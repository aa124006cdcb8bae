"""Shape conveniences composed from the shape primitives: tile, collapse, stack,
unstack, broadcast_to_rank, broadcast_like, broadcast_shapes and empty.

NB: JAX 0.10 declares ``tile_p``, ``stack_p`` and ``unstack_p`` (for its sharding-in-
types rules); here they are compositions of ``broadcast_in_dim``, ``reshape``,
``concatenate`` and ``slice``, whose rules (JVP, transpose, batching) already exist.
"""
import builtins
import math
import operator

import numpy as np

from xform.core import dtypes
from xform.core.trace import get_aval
from xform.lax.shapes import (broadcast, broadcast_in_dim, concatenate, expand_dims, full,
                              reshape, slice, squeeze)


def _canonical_axis(axis, ndim, name):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of rank "
                         f"{ndim - (name == 'stack')}")
    return axis % ndim


def tile(operand, reps):
    """Repeat ``operand`` ``reps[i]`` times along each dimension ``i``.

    Args:
      operand: an array.
      reps: one non-negative repeat count per dimension of ``operand``.

    >>> import numpy as np, xform.lax as lax
    >>> lax.tile(np.array([[1, 2]]), (2, 2))
    Array([[1, 2, 1, 2],
           [1, 2, 1, 2]], dtype=int32)
    """
    aval = get_aval(operand)
    reps = tuple(operator.index(r) for r in reps)
    if len(reps) != aval.ndim:
        raise TypeError(f"reps length must be equal to the ndim of x, got "
                        f"len(reps)={len(reps)} and x.ndim={aval.ndim}.")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    # (r0, s0, r1, s1, ...) with the operand's dimensions at the odd positions
    wide = tuple(k for r, s in zip(reps, aval.shape) for k in (r, s))
    out = broadcast_in_dim(operand, wide, tuple(range(1, 2 * aval.ndim, 2)))
    return reshape(out, tuple(r * s for r, s in zip(reps, aval.shape)))


def collapse(operand, start_dimension, stop_dimension=None):
    """Merge dimensions ``[start_dimension, stop_dimension)`` into one (row-major).

    >>> import numpy as np, xform.lax as lax
    >>> lax.collapse(np.zeros((2, 3, 4)), 0, 2).shape
    (6, 4)
    """
    shape = get_aval(operand).shape
    lo, hi, _ = builtins.slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise ValueError(f"Invalid dimension range passed to collapse: {shape}"
                         f"[{start_dimension}:{stop_dimension}]")
    return reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def stack(operands, axis=0):
    """Join arrays of one shape along a new dimension ``axis``.

    >>> import numpy as np, xform.lax as lax
    >>> lax.stack([np.array([1, 2]), np.array([3, 4])], axis=1)
    Array([[1, 3],
           [2, 4]], dtype=int32)
    """
    operands = list(operands)
    if not operands:
        raise ValueError("stack expects at least one operand, got 0.")
    shapes = [get_aval(x).shape for x in operands]
    if len({len(s) for s in shapes}) != 1:
        raise ValueError("Cannot stack arrays with different numbers of dimensions: got "
                         f"{', '.join(str(s) for s in shapes)}.")
    if len(set(shapes)) != 1:
        raise ValueError("All input arrays must have the same shape. Got "
                         f"{', '.join(str(s) for s in shapes)}.")
    axis = _canonical_axis(axis, len(shapes[0]) + 1, "stack")
    return concatenate([expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x, axis=0):
    """Split ``x`` along ``axis`` into a tuple of arrays without that dimension.

    >>> import numpy as np, xform.lax as lax
    >>> [a.tolist() for a in lax.unstack(np.array([[1, 2], [3, 4]]), axis=1)]
    [[1, 3], [2, 4]]
    """
    shape = get_aval(x).shape
    if not shape:
        raise ValueError("unstack requires arrays with rank > 0, however a scalar array "
                         f"of shape {shape} was passed.")
    axis = _canonical_axis(axis, len(shape), "unstack")
    starts, limits = [0] * len(shape), list(shape)
    out = []
    for i in range(shape[axis]):
        starts[axis], limits[axis] = i, i + 1
        out.append(squeeze(slice(x, starts, limits), (axis,)))
    return tuple(out)


def broadcast_to_rank(x, rank):
    """Add leading size-1 dimensions to give ``x`` rank ``rank``."""
    return broadcast(x, (1,) * (rank - np.ndim(x)))


def broadcast_like(arr, like_arr):
    """Broadcast ``arr`` (NumPy rules: trailing dimensions aligned) to ``like_arr``'s
    shape."""
    shape, old = get_aval(like_arr).shape, get_aval(arr).shape
    return broadcast_in_dim(arr, shape, tuple(range(len(shape) - len(old), len(shape))))


def broadcast_shapes(*shapes):
    """The shape NumPy broadcasting gives ``shapes``.

    Raises:
      ValueError: if the shapes are not broadcast-compatible.

    >>> import xform.lax as lax
    >>> lax.broadcast_shapes((3, 1), (1, 4), (5, 1, 1))
    (5, 3, 4)
    """
    shapes = [tuple(operator.index(d) for d in s) for s in shapes]
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0}
        if len(sizes - {1}) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={shapes}")
        out.append(max(sizes - {1}, default=min(sizes)))
    return tuple(out)


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` and ``dtype`` whose values are unspecified (zeros here, as
    XLA's CPU backend gives JAX)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return full(shape, 0, dtypes.canonicalize_dtype(np.dtype(dtype)), sharding=out_sharding)
