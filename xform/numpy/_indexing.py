"""Basic indexing (``x[...]``) with static ints, slices, None and Ellipsis.

An index becomes at most one ``lax.slice`` (all dimensions at once, positive strides),
one ``reverse`` per negative-step slice, and one ``lax.reshape`` that drops the
integer-indexed dimensions and inserts the ``None`` ones.

NB: an out-of-range integer raises IndexError, as in NumPy; JAX clamps it instead.
Advanced indexing (integer/boolean arrays) and traced indices are not supported yet:
they need gather / dynamic_slice, which xform.lax does not have.
"""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.core.array import Array
from xform.core.trace import Tracer
from xform.numpy._shape import reverse

_VALID = ("only integers, slices (`:`), ellipsis (`...`) and numpy.newaxis (`None`) are "
          "valid indices")


def _advanced(idx):
    return NotImplementedError(
        f"Advanced indexing (integer or boolean arrays, lists) is not supported by "
        f"xform yet: got an index of type {type(idx).__name__}. Use basic indexing "
        "(ints, slices, None, ...) or jnp.where.")


def _static_int(idx):
    """A Python int for an integer index, or raise the matching error."""
    if type(idx) is int:
        return idx
    if isinstance(idx, (bool, np.bool_)):
        raise NotImplementedError("Boolean scalar indices are not supported by xform yet.")
    if isinstance(idx, Tracer):
        value = idx.to_concrete_value()
        if value is None:
            raise NotImplementedError(
                f"Indexing with a traced value ({idx.aval.str_short()}) is not supported "
                "by xform yet: it needs dynamic_slice/gather, which xform.lax does not "
                "have. Index with a static Python int instead.")
        return _static_int(value)
    if isinstance(idx, (Array, np.ndarray, np.generic)):
        if idx.shape == () and dtypes.is_integer(idx.dtype):
            return operator.index(idx)
        if dtypes.is_integer(idx.dtype) or idx.dtype == dtypes.bool_:
            raise _advanced(idx)
        raise IndexError(f"{_VALID}; got an array of dtype {idx.dtype}.")
    if isinstance(idx, (list, tuple)):
        raise _advanced(idx)
    try:
        return operator.index(idx)
    except TypeError:
        raise IndexError(f"{_VALID}; got {idx!r}.") from None


def getitem(x, idx):
    """``x[idx]`` for basic indices."""
    shape = x.aval.shape
    items = idx if type(idx) is tuple else (idx,)
    norm = []
    for item in items:
        if item is None or item is Ellipsis or isinstance(item, slice):
            norm.append(item)
        else:
            norm.append(_static_int(item))
    n_ellipsis = sum(1 for item in norm if item is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = len(norm) - n_ellipsis - sum(1 for item in norm if item is None)
    if n_real > len(shape):
        raise IndexError(f"Too many indices: {len(shape)}-dimensional array indexed with "
                         f"{n_real} regular indices.")
    fill = [slice(None)] * (len(shape) - n_real)
    if n_ellipsis:
        at = next(i for i, item in enumerate(norm) if item is Ellipsis)
        norm[at:at + 1] = fill
    else:
        norm += fill

    start, limit, strides, out_shape, reversed_dims = [], [], [], [], []
    dim = 0
    for item in norm:
        if item is None:
            out_shape.append(1)
            continue
        n = shape[dim]
        if isinstance(item, slice):
            r = range(*item.indices(n))
            m = len(r)
            if m == 0:
                lo, hi, step = 0, 0, 1
            elif r.step > 0:
                lo, hi, step = r.start, r[-1] + 1, r.step
            else:  # take the same elements with a positive step, then reverse
                lo, hi, step = r[-1], r.start + 1, -r.step
                if m > 1:
                    reversed_dims.append(dim)
            out_shape.append(m)
        else:
            if not -n <= item < n:
                raise IndexError(f"index {item} is out of bounds for axis {dim} with "
                                 f"size {n}")
            lo, hi, step = item % n, item % n + 1, 1
        start.append(lo)
        limit.append(hi)
        strides.append(step)
        dim += 1

    y = x
    if tuple(start) != (0,) * len(shape) or tuple(limit) != shape or any(
            s != 1 for s in strides):
        y = lax.slice(y, start, limit, strides)
    for d in reversed_dims:
        y = reverse(y, d)
    if tuple(out_shape) != y.aval.shape:
        y = lax.reshape(y, tuple(out_shape))
    return y
