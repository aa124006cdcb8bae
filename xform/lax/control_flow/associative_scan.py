"""``associative_scan``: a parallel prefix scan (Blelloch-style odd/even recursion)
composed from strided slices, concatenation and reshapes; no primitive of its own,
so every transformation works through the lax ops it is made of.
"""
import operator

from xform.core import tree_util
from xform.core.trace import get_aval
from xform.lax.shapes import concatenate, reshape, slice as lax_slice


def associative_scan(fn, elems, reverse=False, axis=0):
    """Prefix scan of ``elems`` with the associative binary ``fn``, in O(log n) depth.

    ``result[i] = fn(...fn(fn(elems[0], elems[1]), elems[2])..., elems[i])`` along
    ``axis`` (computed in a different but, for associative ``fn``, equal grouping).
    With ``reverse=True`` it scans from the end: ``result[i]`` combines
    ``elems[n-1], ..., elems[i]`` in that order.

    Args:
      fn: an associative function of two pytrees like ``elems`` whose leaves carry the
        scanned axis; it must work elementwise along that axis (it is applied to
        slices of different lengths) and return the same structure.
      elems: a pytree of arrays, all with the same size along ``axis``.
      reverse: scan from the end.
      axis: the scanned axis (negative counts from the end).

    Returns:
      A pytree like ``elems`` of the scanned values.

    Raises:
      ValueError: if the leaves' sizes along ``axis`` differ or ``axis`` is out of range.

    >>> import numpy as np
    >>> from xform import lax
    >>> lax.associative_scan(lax.add, np.arange(5.)).tolist()
    [0.0, 1.0, 3.0, 6.0, 10.0]
    """
    leaves, tree = tree_util.tree_flatten(elems)
    if not leaves:
        return elems
    ndim = get_aval(leaves[0]).ndim
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"associative_scan axis {axis} is out of bounds for elems of "
                         f"rank {ndim} (shape {get_aval(leaves[0]).shape})")
    axis %= ndim
    shapes = [get_aval(x).shape for x in leaves]
    if any(len(s) <= axis or s[axis] != shapes[0][axis] for s in shapes):
        raise ValueError("Array inputs to associative_scan must have the same size along "
                         f"axis {axis}. (saw: {shapes})")

    def combine(a, b):
        out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"associative_scan fn must return the structure of elems, "
                            f"{tree}, but returned {out_tree}")
        return out_leaves

    def sl(x, start, stop, stride=1):
        return _slice_axis(x, axis, start, stop, stride)

    def scan_fwd(elems):
        n = get_aval(elems[0]).shape[axis]
        if n < 2:
            return elems
        # Combine adjacent pairs, scan those (they give the odd positions), then fill
        # in the even positions from them.
        odd = scan_fwd(combine([sl(e, 0, n - 1, 2) for e in elems],
                               [sl(e, 1, n, 2) for e in elems]))
        m = len_(odd[0])
        prev = odd if n % 2 else [sl(o, 0, m - 1) for o in odd]
        even = combine(prev, [sl(e, 2, n, 2) for e in elems])
        even = [concatenate([sl(e, 0, 1), r], axis) for e, r in zip(elems, even)]
        return [_interleave(a, b, axis) for a, b in zip(even, odd)]

    def scan_rev(elems):
        # The mirror image of scan_fwd (no array reversal needed): pairs are formed from
        # the end, and fn's first argument is the later element.
        n = get_aval(elems[0]).shape[axis]
        if n < 2:
            return elems
        s = n % 2
        odd = scan_rev(combine([sl(e, s + 1, n, 2) for e in elems],
                               [sl(e, s, n - 1, 2) for e in elems]))
        m = len_(odd[0])
        nxt = odd if s else [sl(o, 1, m) for o in odd]
        other = combine(nxt, [sl(e, 1 - s, n - 1, 2) for e in elems])
        other = [concatenate([r, sl(e, n - 1, n)], axis) for e, r in zip(elems, other)]
        pairs = zip(other, odd) if s else zip(odd, other)
        return [_interleave(a, b, axis) for a, b in pairs]

    def len_(x):
        return get_aval(x).shape[axis]

    out = scan_rev(leaves) if reverse else scan_fwd(leaves)
    return tree_util.tree_unflatten(tree, out)


def _slice_axis(x, axis, start, stop, stride=1):
    shape = get_aval(x).shape
    starts = [0] * len(shape)
    limits = list(shape)
    strides = [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, max(start, stop), stride
    return lax_slice(x, starts, limits, strides)


def _interleave(a, b, axis):
    """``a`` at positions 0, 2, ... and ``b`` at 1, 3, ... along ``axis``
    (``len(a)`` is ``len(b)`` or one more). Exact for every dtype: it only moves data."""
    shape_a, shape_b = get_aval(a).shape, get_aval(b).shape
    na, nb = shape_a[axis], shape_b[axis]
    head = _slice_axis(a, axis, 0, nb) if na > nb else a
    pair_shape = shape_b[:axis] + (nb, 1) + shape_b[axis + 1:]
    pairs = concatenate([reshape(head, pair_shape), reshape(b, pair_shape)], axis + 1)
    out = reshape(pairs, shape_b[:axis] + (2 * nb,) + shape_b[axis + 1:])
    if na > nb:
        out = concatenate([out, _slice_axis(a, axis, nb, na)], axis)
    return out
