"""``xform.ds``: a slice with a (possibly traced) start and a static size, usable in
``x[...]`` and ``x.at[...]`` (``jax.ds``).

Indexing rewrites each such entry before the ordinary indexing runs: ``x[..., ds(i, n),
...]`` is ``y[..., :, ...]`` with ``y`` the ``n`` entries taken along that axis
(a dynamic_slice, or a gather for a stride), and ``x.at[...]`` updates ``y`` the same way
and writes it back. JAX's semantics: a unit-stride read normalizes a negative start and
clamps the window, a strided read clamps each index; an update does not normalize and
drops what lies out of bounds (a unit-stride window as a whole)."""
import dataclasses
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.core.pytree_registry import register_pytree_node
from xform.core.trace import Tracer
from xform.lax.slicing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from xform.numpy import _util


def _is_static(v):   # (as JAX's core.is_dim: a concrete integer scalar)
    return not isinstance(v, Tracer) and np.ndim(v) == 0 and hasattr(v, "__index__")


@dataclasses.dataclass(slots=True)
class Slice:
    """``start:start+size*stride:stride`` where ``start`` (and ``size`` where it is
    static under the caller's jit) may be an array."""
    start: object
    size: object
    stride: int = 1

    def __post_init__(self):
        if self.stride < 0:
            raise ValueError("`stride` must be >= 0.")


def _flatten(s):   # a static start or size is aux data, a dynamic one a leaf
    dyn = [None if _is_static(v) else v for v in (s.start, s.size)]
    static = tuple(v if _is_static(v) else None for v in (s.start, s.size))
    return dyn, static + (s.stride,)


def _unflatten(aux, children):
    start, size = (c if c is not None else a for c, a in zip(children, aux[:2]))
    return Slice(start, size, aux[2])


register_pytree_node(Slice, _flatten, _unflatten)


def ds(start, size=None, stride=None):
    """A :class:`Slice`: ``ds(j)`` is ``:j``, ``ds(i, n)`` is ``i:i+n``, ``ds(i, n, k)`` is
    ``i:i+n*k:k``, with ``i`` allowed to be traced; ``ds(None)`` is ``:``.

    >>> xform.jit(lambda x, i: x[xform.ds(i, 2)])(jnp.arange(10), 4)
    Array([4, 5], dtype=int32)
    """
    if start is None:
        return slice(None)
    stride = 1 if stride is None else stride
    if not isinstance(stride, int):
        raise ValueError("Non-static stride in `dslice`")
    if size is None:
        start, size = 0, start
    return Slice(start, size, stride)


dslice = ds


def has_dynamic(idx):
    """Whether ``idx`` holds a :class:`Slice` (then :func:`take`/:func:`update` apply)."""
    return type(idx) is Slice or (type(idx) is tuple and any(type(i) is Slice for i in idx))


def _consumed(entry):
    """How many operand axes an index entry (not the ellipsis) uses."""
    if entry is None or isinstance(entry, (bool, np.bool_)):
        return 0
    if isinstance(entry, (slice, Slice, int, np.integer)):
        return 1
    dt = getattr(entry, "dtype", None)
    if dt is None:   # a (nested) list: bool entries make a mask
        flat = np.ravel(np.asarray(entry, object))
        dt = np.result_type(*flat) if flat.size else np.int32
    return np.ndim(entry) if dt == np.bool_ else 1


def _split(ndim, idx):
    """[(axis, Slice)] and ``idx`` with each Slice a full slice."""
    idx = idx if type(idx) is tuple else (idx,)
    n_ellipsis = sum(i is Ellipsis for i in idx)
    used = sum(_consumed(i) for i in idx if i is not Ellipsis)
    axis, found = 0, []
    for i in idx:
        if i is Ellipsis:
            axis += max(ndim - used, 0) if n_ellipsis == 1 else 0
            continue
        if type(i) is Slice:
            found.append((axis, i))
        axis += _consumed(i)
    rest = tuple(slice(None) if type(i) is Slice else i for i in idx)
    return found, rest


def _indices(s, start):
    size = operator.index(s.size)
    return start + lax.iota(dtypes.int32, size) * s.stride if size else lax.iota(
        dtypes.int32, 0)


def _gather_along(x, axis, indices):
    """``x``'s entries ``indices`` (clamped into range) along ``axis``."""
    nd = x.aval.ndim
    dnums = GatherDimensionNumbers(
        offset_dims=tuple(d for d in range(nd) if d != axis), collapsed_slice_dims=(axis,),
        start_index_map=(axis,))
    sizes = tuple(1 if d == axis else n for d, n in enumerate(x.aval.shape))
    return lax.gather(x, indices[:, None], dnums, sizes, mode=GatherScatterMode.CLIP)


def _start(s):
    return lax.convert_element_type(_util.asarray(s.start), dtypes.int32)


def take(x, idx):
    """(the operand with every Slice's axis taken, the index left to apply to it)."""
    found, rest = _split(x.aval.ndim, idx)
    for axis, s in found:
        start = _start(s)
        if s.stride == 1:   # (dynamic_slice normalizes a negative start, then clamps)
            x = lax.dynamic_slice_in_dim(x, start, operator.index(s.size), axis)
        else:
            x = _gather_along(x, axis, _indices(s, start))
    return x, rest


def update(x, idx, apply):
    """``x`` with ``apply(sub, rest)`` (the ordinary update of the taken part ``sub`` at the
    index ``rest``) written back where the Slices point."""
    x = _util.asarray(x)
    found, rest = _split(x.aval.ndim, idx)
    subs = [x]
    for axis, s in found:   # take each Slice without normalizing the start
        sub, start = subs[-1], _start(s)
        subs.append(lax.dynamic_slice_in_dim(sub, start, operator.index(s.size), axis)
                    if s.stride == 1 else _gather_along(sub, axis, _indices(s, start)))
    new = apply(subs[-1], rest)
    for (axis, s), outer in reversed(list(zip(found, subs[:-1]))):
        new = _write_back(outer, new.astype(outer.dtype), axis, s)
    return new


def _write_back(x, new, axis, s):
    start, dim, size = _start(s), x.aval.shape[axis], operator.index(s.size)
    if s.stride == 1:   # the whole window, or nothing where it does not fit
        fits = lax.bitwise_and(lax.ge(start, lax.full((), 0, dtypes.int32)),
                               lax.le(start, lax.full((), dim - size, dtypes.int32)))
        return lax.select(lax.broadcast_in_dim(fits, x.aval.shape, ()),
                          lax.dynamic_update_slice_in_dim(x, new, start, axis), x)
    nd = x.aval.ndim
    dnums = ScatterDimensionNumbers(
        update_window_dims=tuple(d for d in range(nd) if d != axis),
        inserted_window_dims=(axis,), scatter_dims_to_operand_dims=(axis,))
    return lax.scatter(x, _indices(s, start)[:, None], new, dnums,
                       mode=GatherScatterMode.FILL_OR_DROP)
