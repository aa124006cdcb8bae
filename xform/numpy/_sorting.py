"""Sorting and searching: sort/argsort/lexsort/partition, searchsorted/digitize,
nonzero/argwhere/flatnonzero (and the one-argument where), bincount; unique and the set
functions are in _setops.py.

Functions whose output shape depends on the values (nonzero, unique, the set ops) take
``size=`` (and ``fill_value=``) to work under jit; without it their input must be
concrete (ConcretizationTypeError otherwise). ``masked_indices`` serves both forms.
"""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.lax.sorting import argsort as _lax_argsort
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._creation import ones
from xform.numpy._cumulative import cumsum
from xform.numpy._reductions import sum as _sum
from xform.numpy._shape import moveaxis, ravel, stack
from xform.numpy._take import put_along_axis, take
from xform.numpy._util import asarray, canonicalize_axis
from xform.lax import ScatterDimensionNumbers


def _flat_axis(a, axis):
    if axis is None:
        return ravel(a), 0
    return a, canonicalize_axis(axis, a.aval.ndim)


@composite(static=("axis", "kind", "order", "stable", "descending"))
def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """Like numpy.sort (NaNs last; ``axis=None`` flattens; ``descending`` reverses).

    >>> jnp.sort(jnp.array([3, 1, 2]))
    Array([1, 2, 3], dtype=int32)
    """
    if order is not None:
        raise ValueError("The 'order' argument to jnp.sort is not supported.")
    a, axis = _flat_axis(asarray(a, "sort"), axis)
    if dtypes.is_complex(a.aval.dtype):
        out = lax.complex(*lax.sort(_complex_keys(a), axis, is_stable=stable, num_keys=2))
    else:
        out = lax.sort(a, axis, is_stable=stable)
    return lax.rev(out, (axis,)) if descending else out


def _complex_keys(a):
    """A complex array's sort keys: (real, imag), compared lexicographically as JAX's
    comparator does (NaN parts last within their key)."""
    return lax.real(a), lax.imag(a)


@composite(static=("axis", "kind", "order", "stable", "descending"))
def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False,
            dtype=None):
    """Like numpy.argsort (indices of ``dtype``, default the default integer type as
    JAX's: int64 under x64; equal keys keep their order, also when ``descending``)."""
    if kind is not None:
        raise TypeError("'kind' argument to argsort is not supported. Use stable=True or "
                        "stable=False to specify sort stability.")
    if order is not None:
        raise TypeError("'order' argument to argsort is not supported.")
    a, axis = _flat_axis(asarray(a, "argsort"), axis)
    idx_dtype = dtypes.canonicalize_dtype(dtype if dtype is not None
                                          else dtypes.default_int_dtype())
    if not dtypes.is_complex(a.aval.dtype):
        idx = _lax_argsort(a, axis, is_stable=stable, descending=descending)
        return idx if idx_dtype == np.int32 else lax.convert_element_type(idx, idx_dtype)
    keys = _complex_keys(lax.rev(a, (axis,)) if descending else a)
    iota = lax.broadcasted_iota(idx_dtype, a.aval.shape, axis)
    if descending:  # as lax.argsort: reversed keys ascending, ties in index order
        idx = lax.sort(keys + (lax.rev(iota, (axis,)),), axis, stable, 2)[2]
        return lax.rev(idx, (axis,))
    return lax.sort(keys + (iota,), axis, stable, 2)[2]


@composite(static=("axis",))
def lexsort(keys, axis=-1):
    """Like numpy.lexsort: indices sorting by the last key, then the one before, ..."""
    keys = [asarray(k, "lexsort", i) for i, k in enumerate(keys)]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if len({k.aval.shape for k in keys}) != 1:
        raise ValueError("all keys need to be the same shape")
    if keys[0].aval.ndim == 0:
        return _util.scalar_array(0, dtypes.default_int_dtype(), False)
    axis = canonicalize_axis(axis, keys[0].aval.ndim)
    iota = lax.broadcasted_iota(dtypes.default_int_dtype(), keys[0].aval.shape, axis)
    return lax.sort(tuple(keys[::-1]) + (iota,), axis, num_keys=len(keys))[-1]


def _flip_order(a):
    """An order-reversing bijection for top_k: negation, or ``~a`` for unsigned ints
    (where negating would map 0 to itself), as JAX's ``-(a + 1)``."""
    if dtypes.is_unsigned(a.aval.dtype):
        return lax.bitwise_not(a)
    return uf.negative(a)


@composite(static=("kth", "axis"))
def partition(a, kth, axis=-1):
    """Like numpy.partition: the ``kth`` smallest value at position ``kth``, smaller
    ones before it and larger ones after (each group in JAX's order, via top_k)."""
    a = moveaxis(asarray(a, "partition"), axis, -1)
    n = a.aval.shape[-1]
    kth = operator.index(kth)
    kth = kth + n if kth < 0 else kth
    if not 0 <= kth < n:
        raise ValueError(f"kth={kth} out of bounds for axis of size {n}")
    bottom = _flip_order(lax.top_k(_flip_order(a), kth + 1)[0])
    top = lax.top_k(a, n - kth - 1)[0]
    return moveaxis(lax.concatenate([bottom, top], a.aval.ndim - 1), -1, axis)


@composite(static=("kth", "axis"))
def argpartition(a, kth, axis=-1):
    """Like numpy.argpartition: indices that :func:`partition` ``a``."""
    a = moveaxis(asarray(a, "argpartition"), axis, -1)
    n = a.aval.shape[-1]
    kth = operator.index(kth)
    kth = kth + n if kth < 0 else kth
    if not 0 <= kth < n:
        raise ValueError(f"kth={kth} out of bounds for axis of size {n}")
    bottom = lax.top_k(_flip_order(a), kth + 1)[1]
    # The rest: top_k of a proxy that is 0 at the bottom indices (duplicates-safe).
    proxy = put_along_axis(ones(a.aval.shape), bottom, 0.0, -1, inplace=False)
    top = lax.top_k(proxy, n - kth - 1)[1]
    return moveaxis(lax.concatenate([bottom, top], a.aval.ndim - 1), -1, axis)


@composite
def sort_complex(a):
    """Like numpy.sort_complex: sorted along the last axis, as a complex array."""
    a = asarray(a, "sort_complex")
    if dtypes.is_complex(a.aval.dtype):
        re, im = lax.sort((lax.real(a), lax.imag(a)), -1, num_keys=2)
        return lax.complex(re, im)
    out = lax.sort(a, -1)
    wide = dtypes.to_inexact_dtype(out.aval.dtype) == dtypes.float64  # (JAX's
    complex_dt = dtypes.complex128 if wide else dtypes.complex64     # to_complex_dtype)
    return lax.convert_element_type(out, complex_dt)


# ---- searching ----

def _total_lt(x, y):
    """``x < y`` in sort order (NaNs last, as lax.sort orders them; complex values
    lexicographically by (real, imag))."""
    if dtypes.is_complex(x.aval.dtype):
        rx, ry = lax.real(x), lax.real(y)
        lt_re = _total_lt(rx, ry)
        eq_re = uf.logical_not(uf.logical_or(lt_re, _total_lt(ry, rx)))
        return uf.logical_or(lt_re, uf.logical_and(eq_re, _total_lt(lax.imag(x), lax.imag(y))))
    lt = lax.lt(x, y)
    if dtypes.is_inexact(x.aval.dtype):
        lt = uf.logical_or(lt, uf.logical_and(uf.isnan(y), uf.logical_not(uf.isnan(x))))
    return lt


@composite(static=("side", "method"))
def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Like numpy.searchsorted: where ``v``'s elements would go in the sorted 1-D
    ``a`` (NaNs sort last). ``method`` as JAX's: "scan" (default) and "scan_unrolled"
    binary-search (ceil(log2(n + 1)) steps, a loop or unrolled); "compare_all" and
    "sort" compare every pair (fast for small ``a`` only: O(n) per element).

    >>> jnp.searchsorted(jnp.array([1, 2, 3]), jnp.array([2, 5]))
    Array([1, 3], dtype=int32)
    """
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side'. Expected one "
                         "of ['left', 'right'].")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ValueError(f"invalid argument method={method!r}, expected 'scan', "
                         "'scan_unrolled', 'sort' or 'compare_all'")
    a, v = _util.promote_dtypes("searchsorted", a, v)
    if a.aval.ndim != 1:
        raise ValueError("a should be 1-dimensional")
    if sorter is not None:
        a = take(a, sorter)
    n = a.aval.shape[0]
    if method.startswith("scan") and n:
        return _binary_search(a, v, side, unrolled=method == "scan_unrolled")
    shape = v.aval.shape + (n,)
    ab = lax.broadcast_in_dim(a, shape, (len(shape) - 1,))
    vb = lax.broadcast_in_dim(v, shape, tuple(range(v.aval.ndim)))
    hit = _total_lt(ab, vb) if side == "left" else uf.logical_not(_total_lt(vb, ab))
    return lax.reduce_sum(lax.convert_element_type(hit, dtypes.int32), (len(shape) - 1,))


def _binary_search(a, v, side, *, unrolled):
    """JAX's "scan" searchsorted, vectorized over ``v``: (low, high) halves per step,
    the answer is ``high``. (Comparing all pairs was ~350x JAX for 16k x 5k.)"""
    n = a.aval.shape[0]
    def step(_, bounds):
        low, high = bounds
        mid = lax.add(low, lax.div(lax.sub(high, low), np.uint32(2)))
        at = take(a, lax.convert_element_type(mid, dtypes.int32), mode="promise_in_bounds")
        go_left = (uf.logical_not(_total_lt(at, v)) if side == "left" else
                   _total_lt(v, at))
        return lax.select(go_left, low, mid), lax.select(go_left, mid, high)
    bounds = (lax.full(v.aval.shape, 0, np.uint32), lax.full(v.aval.shape, n, np.uint32))
    levels = int(np.ceil(np.log2(n + 1)))
    if unrolled:
        for i in range(levels):
            bounds = step(i, bounds)
    else:
        bounds = lax.fori_loop(0, levels, step, bounds)
    return lax.convert_element_type(bounds[1], dtypes.int32)


@composite(static=("right", "method"))
def digitize(x, bins, right=False, *, method=None):
    """Like numpy.digitize: the bin of each ``x`` (bins increasing or decreasing)."""
    x = asarray(x, "digitize")
    bins = asarray(bins, "digitize", 1)
    if bins.aval.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got {bins}")
    n = bins.aval.shape[0]
    if n == 0:
        return lax.full(x.aval.shape, 0, dtypes.int32)
    side = "left" if right else "right"
    kw = dict(side=side) if method is None else dict(side=side, method=method)
    up = searchsorted(bins, x, **kw)
    down = uf.subtract(n, searchsorted(lax.rev(bins, (0,)), x, **kw))
    increasing = uf.greater_equal(lax.slice(bins, (n - 1,), (n,)), lax.slice(bins, (0,), (1,)))
    return uf.where(lax.reshape(increasing, ()), up, down)


# ---- value-dependent selections ----

def masked_indices(name, mask, size):
    """Positions of the true entries of the 1-D bool ``mask``, in order: all of them
    (concrete ``mask``) or the first ``size`` padded with 0, plus a validity mask."""
    if size is None:
        value = _util.concrete_or_error(mask, "mask" if name == "compress" else "a", name)
        idx = np.flatnonzero(value).astype(dtypes.default_int_dtype())
        return asarray(idx), None
    size = operator.index(size)
    # As JAX's nonzero: the k-th position is how many running counts are <= k (two
    # cumsums and a scatter-add, O(n); a stable argsort of the mask cost unique 1.5x).
    int_dt = dtypes.default_int_dtype()
    idx = cumsum(bincount(cumsum(mask, dtype=int_dt), length=size), dtype=int_dt)
    count = _sum(mask, dtype=idx.aval.dtype)
    valid = lax.lt(lax.iota(idx.aval.dtype, size), count)
    return lax.select(valid, idx, lax.full_like(idx, 0)), valid


def nonzero(a, *, size=None, fill_value=None):
    """Like numpy.nonzero: a tuple of index arrays, one per dimension.

    Args:
      a: the array.
      size: if given, the number of indices returned (padded with ``fill_value`` or
        truncated), which makes the output shape static: needed under jit.
      fill_value: padding (default 0); a scalar or one value per dimension.

    Raises:
      ConcretizationTypeError: if ``a`` is traced and ``size`` is None.

    >>> jnp.nonzero(jnp.array([0, 3, 0, 4]), size=3, fill_value=-1)
    (Array([ 1,  3, -1], dtype=int32),)
    """
    a = asarray(a, "nonzero")
    if a.aval.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "jnp.atleast_1d(scalar).nonzero() instead.")
    mask = ravel(a if a.aval.dtype == dtypes.bool_ else uf.not_equal(a, 0))
    idx, valid = masked_indices("nonzero", mask, size)
    k, int_dt = idx.aval.shape[0], dtypes.default_int_dtype()
    if a.aval.size == 0 or k == 0:  # as JAX: zeros, ``fill_value`` unused (unchecked)
        return tuple(lax.full((k,), 0, int_dt) for _ in a.aval.shape)
    coords = [idx] if a.aval.ndim == 1 else list(_unravel(idx, a.aval.shape))
    if fill_value is None:
        return tuple(coords)
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * len(coords)
    if len(fills) != len(coords) or any(np.shape(f) for f in fills):
        raise ValueError(f"fill_value must be a scalar or a tuple of length {len(coords)}; "
                         f"got {fill_value}")
    # jnp.where, as JAX: a float ``fill_value`` promotes the indices (also unpadded).
    valid = lax.full((k,), True) if valid is None else valid
    return tuple(uf.where(valid, c, f) for c, f in zip(coords, fills))


@composite(static=("size", "fill_value"))
def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """Like numpy.where: ``x`` where ``condition`` holds, else ``y``; with only
    ``condition``, :func:`nonzero` (``size``/``fill_value`` as there).

    >>> jnp.where(jnp.arange(4) > 1, 1.0, 0.0)
    Array([0., 0., 1., 1.], dtype=float32, weak_type=True)
    """
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("Either both or neither of the x and y arguments should be "
                         "provided to jnp.where, got only one of them.")
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term "
                         "where function.")
    return uf.where(condition, x, y)


def _unravel(idx, shape):
    out = []
    for d in reversed(shape):
        dd = _util.scalar_array(max(d, 1), idx.aval.dtype, False)
        out.append(lax.rem(idx, dd))
        idx = lax.div(idx, dd)
    return reversed(out)


def flatnonzero(a, *, size=None, fill_value=None):
    """Like numpy.flatnonzero (``size``/``fill_value`` as :func:`nonzero`)."""
    return nonzero(ravel(asarray(a, "flatnonzero")), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """Like numpy.argwhere: the indices of non-zero elements, one row each."""
    a = asarray(a, "argwhere")
    coords = nonzero(a if a.aval.ndim else lax.reshape(a, (1,)), size=size,
                     fill_value=fill_value)
    out = stack(coords, -1)
    return out if a.aval.ndim else lax.slice(out, (0, 0), (out.aval.shape[0], 0))


def bincount(x, weights=None, minlength=0, *, length=None):
    """Like numpy.bincount: counts (or summed ``weights``) of each non-negative int;
    ``length`` (static) is needed under jit. Negative values are clipped to 0, values
    past ``length`` dropped (as in JAX).

    >>> jnp.bincount(jnp.array([0, 1, 1, 3]))
    Array([1, 2, 0, 1], dtype=int32)
    """
    x = asarray(x, "bincount")
    if x.aval.dtype == dtypes.bool_:
        x = lax.convert_element_type(x, dtypes.int32)
    if not dtypes.is_integer(x.aval.dtype):
        raise TypeError(f"x argument to bincount must have an integer type; got "
                        f"{x.aval.dtype}")
    if x.aval.ndim != 1:
        raise ValueError("only 1-dimensional input supported.")
    minlength = operator.index(minlength)
    if length is None:
        value = _util.concrete_or_error(x, "x", "bincount")
        length = max(minlength, int(max(0, value.max())) + 1 if value.size else 0)
    length = operator.index(length)
    if weights is None:
        w = lax.full(x.aval.shape, 1, dtypes.default_int_dtype())
    else:
        w = asarray(weights, "bincount", 1)
        if w.aval.shape != x.aval.shape:
            raise ValueError(f"shape of weights {w.aval.shape} must match shape of x "
                             f"{x.aval.shape}")
    x = lax.max(x, lax.full_like(x, 0))
    dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,))
    zeros = lax.full((length,), 0, w.aval.dtype)
    return lax.scatter_add(zeros, lax.expand_dims(x, (1,)), w, dn, mode="drop")
