"""unique (and the array API's unique_*), isin and the set functions union1d,
intersect1d, setdiff1d, setxor1d.

Their output shapes depend on the values: without ``size=`` the input must be concrete;
with it the result is the first ``size`` values, padded as JAX pads (``fill_value``, or
each function's default). unique sorts the rows once, lexicographically, and selects the
first of each run; the set functions select from sorted unique values.
"""
import collections
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._cumulative import cumsum
from xform.numpy._reductions import all as _all
from xform.numpy._reductions import any as _any
from xform.numpy._reductions import max as _max
from xform.numpy._reductions import min as _min
from xform.numpy._reductions import sum as _sum
from xform.numpy._shape import concatenate, moveaxis, ravel
from xform.numpy._sorting import masked_indices
from xform.numpy._take import take
from xform.numpy._util import asarray, canonicalize_axis


def _fill(x, valid, fill_value):
    if valid is None or fill_value is None:
        return x
    fill = lax.convert_element_type(asarray(fill_value, "fill_value"), x.aval.dtype)
    return uf.where(valid, x, fill)


def _first_of_runs(s, equal_nan=True):
    """For sorted ``s``: True at the first element of each run of equal values."""
    n = s.aval.shape[0]
    hi, lo = lax.slice(s, (1,), (n,)), lax.slice(s, (0,), (n - 1,))
    new = lax.ne(hi, lo)
    if equal_nan and dtypes.is_inexact(s.aval.dtype):
        new = uf.logical_and(new, uf.logical_not(uf.logical_and(uf.isnan(hi), uf.isnan(lo))))
    return lax.concatenate([lax.full((1,), True), new], 0)


UniqueAllResult = collections.namedtuple("UniqueAllResult",
                                         "values indices inverse_indices counts")
UniqueCountsResult = collections.namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = collections.namedtuple("UniqueInverseResult",
                                             "values inverse_indices")


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, size=None, fill_value=None, sorted=True):
    """Like numpy.unique: the sorted unique values (``axis=None``: of the flattened
    input) or slices along ``axis``, with JAX's ``size`` and ``fill_value`` for use
    under jit (padding defaults to the smallest value; for an empty input a
    ``fill_value`` is needed).

    >>> jnp.unique(jnp.array([3, 1, 3, 2]))
    Array([1, 2, 3], dtype=int32)
    """
    x = asarray(ar, "unique")
    shape = x.aval.shape
    size = None if size is None else operator.index(size)
    inv_shape = shape if axis is None else None
    x, axis = (ravel(x), 0) if axis is None else (x, canonicalize_axis(axis, x.aval.ndim))
    n = x.aval.shape[axis]
    if n == 0 and size and fill_value is None:
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    x = moveaxis(x, axis, 0)
    inv_shape = (n,) if inv_shape is None else inv_shape  # (a 0-d input's is ())
    want = [k for k, f in (("index", return_index), ("inverse", return_inverse),
                           ("counts", return_counts)) if f]
    if not x.aval.size:
        if size is None:  # (as JAX: traced input needs a size, even an empty one)
            _util.concrete_or_error(x, "ar", "unique")
        out = _unique_empty(x, size, fill_value, inv_shape)
    else:
        out = _unique_sorted(x, equal_nan, size, fill_value, want)
        if return_inverse:
            out["inverse"] = lax.reshape(out["inverse"], inv_shape)
    values = moveaxis(out["values"], 0, axis)
    return tuple([values] + [out[k] for k in want]) if want else values


def _unique_empty(x, size, fill_value, inv_shape):
    """JAX's results for an input of no elements: rows of no elements (``x`` of shape
    ``(n, ..., 0, ...)``) count as one, and ``size`` pads only with a ``fill_value``."""
    n, rest, int_dt = x.aval.shape[0], x.aval.shape[1:], dtypes.default_int_dtype()
    k = 1 if not np.prod(rest, dtype=int) else 0
    values = lax.full_like(x, 0, shape=(k,) + rest)
    if size is not None and fill_value is not None:
        fill = lax.convert_element_type(asarray(fill_value, "fill_value"), x.aval.dtype)
        values = _util.broadcast_to(fill, (size,) + rest)
    return dict(values=values, index=lax.full((k,), 0, int_dt),
                inverse=lax.full(inv_shape, 0, int_dt),
                counts=lax.full((1,), n, int_dt) if n else lax.full((0,), 0, int_dt))


def _unique_sorted(x, equal_nan, size, fill_value, want):
    """Unique rows of the non-empty ``x`` (n, ...) by one lexicographic sort, and the
    extra results named in ``want``."""
    n, int_dt = x.aval.shape[0], dtypes.default_int_dtype()
    cplx = dtypes.is_complex(x.aval.dtype)
    if cplx:  # as JAX: NaN in either part is NaN (+0j)
        x = uf.where(uf.isnan(x), np.nan, x)
    rows = x if x.aval.ndim == 1 else lax.reshape(x, (n, x.aval.size // n))
    keys = (rows,) if rows.aval.ndim == 1 else tuple(
        lax.squeeze(lax.slice(rows, (0, j), (n, j + 1)), (1,))
        for j in range(rows.aval.shape[1]))
    if cplx:  # lax.sort takes real keys: (real, imag), JAX's order
        keys = sum(((lax.real(k), lax.imag(k)) for k in keys), ())
    *cols, perm = lax.sort(keys + (lax.iota(int_dt, n),), 0, num_keys=len(keys))
    mask = _first_of_runs(cols[0], equal_nan)
    for c in cols[1:]:
        mask = uf.logical_or(mask, _first_of_runs(c, equal_nan))
    pos, valid = masked_indices("unique", mask, size)
    index = take(perm, pos, mode="clip")
    values = take(x, index, axis=0, mode="clip")
    if valid is not None and fill_value is not None:
        values = _fill(values, lax.broadcast_in_dim(valid, values.aval.shape, (0,)),
                       fill_value)
    out = dict(values=values, index=index)
    if "inverse" in want:
        run = uf.subtract(cumsum(mask, dtype=int_dt), 1)
        out["inverse"] = lax.sort((perm, run), 0, num_keys=1)[1]
    if "counts" in want:
        out["counts"] = _run_lengths(mask, pos, size)
    return out


def _run_lengths(mask, pos, size):
    """The length of each run of the sorted values, starting at ``pos``; the ``size``
    form pads with 0 (as JAX: differences of the starts, the ones past the last being
    n)."""
    n, int_dt = mask.aval.shape[0], dtypes.default_int_dtype()
    if size is None:
        ends = lax.concatenate([pos, lax.full((1,), n, int_dt)], 0)
    else:
        ends = masked_indices("unique", mask, size + 1)[0]
        first = lax.eq(lax.iota(int_dt, size + 1), lax.full((size + 1,), 0, int_dt))
        ends = lax.select(uf.logical_or(first, lax.ne(ends, lax.full_like(ends, 0))),
                          ends, lax.full_like(ends, n))
    k = ends.aval.shape[0]
    return lax.sub(lax.slice(ends, (1,), (k,)), lax.slice(ends, (0,), (k - 1,)))


def unique_values(x, /, *, size=None, fill_value=None):
    """Like numpy.unique_values (NaNs are all distinct, as in the array API)."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """Like numpy.unique_counts: ``(values, counts)``."""
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size,
                                      fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    """Like numpy.unique_inverse: ``(values, inverse_indices)``."""
    return UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False,
                                       size=size, fill_value=fill_value))


def unique_all(x, /, *, size=None, fill_value=None):
    """Like numpy.unique_all: ``(values, indices, inverse_indices, counts)``."""
    return UniqueAllResult(*unique(x, return_index=True, return_inverse=True,
                                   return_counts=True, equal_nan=False, size=size,
                                   fill_value=fill_value))


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """Like numpy.isin: whether each element occurs in ``test_elements`` (compares all
    pairs, whatever the ``method``: the same booleans)."""
    element, test_elements = asarray(element, "isin"), asarray(test_elements, "isin", 1)
    return lax.reshape(_in1d(element, test_elements, invert, method, assume_unique),
                       element.aval.shape)


@composite(static=("invert", "method", "assume_unique"))  # (JAX's jitted _in1d)
def _in1d(element, test_elements, invert, method, assume_unique):
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"{method=} is not implemented; options are 'compare_all', "
                         "'binary_search', 'sort', and 'auto'")
    a, b = (ravel(v) for v in _util.promote_dtypes("isin", element, test_elements))
    if not a.aval.size or not b.aval.size:
        return lax.full(a.aval.shape, bool(invert))
    shape = a.aval.shape + b.aval.shape
    cmp = lax.ne if invert else lax.eq
    eq = cmp(lax.broadcast_in_dim(a, shape, (0,)), lax.broadcast_in_dim(b, shape, (1,)))
    return (_all if invert else _any)(eq, -1)


# ---- set operations ----

def _sort_by(keys, values):
    """``values`` (1-D) sorted by ``keys`` then by themselves; complex values by (real,
    imag), JAX's order (lax.sort takes real keys)."""
    if dtypes.is_complex(values.aval.dtype):
        keys = keys + (lax.real(values), lax.imag(values))
        return lax.sort(keys + (values,), 0, num_keys=len(keys))[-1]
    return lax.sort(keys + (values,), 0, num_keys=len(keys) + 1)[-1]


def _sorted_unique_mask(a):
    a = ravel(a)
    if dtypes.is_complex(a.aval.dtype):  # as unique: NaN in either part is NaN (+0j)
        a = uf.where(uf.isnan(a), np.nan, a)
    s = _sort_by((), a)
    return s, (_first_of_runs(s) if s.aval.shape[0] else lax.full((0,), True))


def _select(name, values, mask, size):
    """``values[mask]`` (concrete ``mask``), or its first ``size`` entries and a mask of
    the valid ones."""
    idx, valid = masked_indices(name, mask, size)
    if not values.aval.shape[0]:
        return lax.full_like(values, 0, shape=idx.aval.shape), valid
    return take(values, idx, mode="clip"), valid


def _pad(name, vals, valid, fill_value):
    """JAX's padding of a sized result: ``fill_value`` (promoted as by jnp.where), by
    default the smallest value found (NaN if one is, 0 if none is)."""
    if valid is None:
        return vals
    if fill_value is not None:
        return uf.where(valid, vals, fill_value)
    if not vals.aval.shape[0]:  # JAX's default reduces the empty result
        raise ValueError(f"jnp.{name}: size=0 needs a fill_value (zero-size array to "
                         "reduction operation max which has no identity)")
    vals = uf.where(valid, vals, lax.full_like(vals, 0))
    vals = uf.where(valid, vals, _max(vals))
    return uf.where(valid, vals, _min(vals))


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """Like numpy.union1d: the sorted unique values of both."""
    ar1, ar2 = _util.promote_dtypes("union1d", ar1, ar2)
    return unique(concatenate([ravel(ar1), ravel(ar2)]), size=size, fill_value=fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """Like numpy.intersect1d: the sorted unique values in both (``return_indices``
    adds the first index of each in ``ar1`` and ``ar2``; padding: the sizes)."""
    ar1, ar2 = _util.promote_dtypes_exact("intersect1d", ar1, ar2)  # (JAX: weak if both)
    ar1, ar2 = ravel(ar1), ravel(ar2)
    s, first = _sorted_unique_mask(ar1)
    vals, valid = _select("intersect1d", s, uf.logical_and(first, isin(s, ar2)), size)
    values = _pad("intersect1d", vals, valid, fill_value)
    if not return_indices:
        return values
    return values, _first_index(vals, ar1, valid), _first_index(vals, ar2, valid)


def _first_index(values, ar, valid):
    n = ar.aval.shape[0]
    if not n:
        return lax.full(values.aval.shape, 0, dtypes.default_int_dtype())
    shape = values.aval.shape + ar.aval.shape
    eq = lax.eq(lax.broadcast_in_dim(values, shape, (0,)),
                lax.broadcast_in_dim(ar, shape, (1,)))
    idx = lax.argmax(lax.convert_element_type(eq, np.uint8), 1, dtypes.default_int_dtype())
    return idx if valid is None else lax.select(valid, idx, lax.full_like(idx, n))


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Like numpy.setdiff1d: the sorted unique values of ``ar1`` (in ``ar1``'s dtype)
    not in ``ar2``; with ``assume_unique``, ``ar1``'s in its order. ``size`` pads with
    ``fill_value``, by default 0 (as JAX's)."""
    ar1 = ravel(asarray(ar1, "setdiff1d"))
    ar2 = ravel(asarray(ar2, "setdiff1d", 1))
    fill = lax.full_like(ar1, 0 if fill_value is None else fill_value, shape=())
    if not ar1.aval.size:
        return _util.broadcast_to(fill, (size or 0,))
    if assume_unique:
        s, keep = ar1, isin(ar1, ar2, invert=True)
    elif size == 0:  # as JAX's (its first-value test indexes the empty unique values)
        raise IndexError("jnp.setdiff1d: size=0 needs assume_unique=True or an empty ar1 "
                         "(index is out of bounds for axis 0 with size 0)")
    else:
        s, first = _sorted_unique_mask(ar1)
        keep = uf.logical_and(first, isin(s, ar2, invert=True))
    vals, valid = _select("setdiff1d", s, keep, size)
    return vals if valid is None else uf.where(valid, vals, fill)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Like numpy.setxor1d: the sorted unique values in exactly one of the inputs."""
    ar1, ar2 = _util.promote_dtypes("setxor1d", ar1, ar2)
    s1, f1 = _sorted_unique_mask(ar1)
    s2, f2 = _sorted_unique_mask(ar2)
    m1 = uf.logical_and(f1, isin(s1, ar2, invert=True))
    m2 = uf.logical_and(f2, isin(s2, ar1, invert=True))
    key = lax.convert_element_type(uf.logical_not(concatenate([m1, m2])), dtypes.int32)
    merged = _sort_by((key,), concatenate([s1, s2]))
    count = _sum(concatenate([m1, m2]), dtype=dtypes.int32)
    n = merged.aval.shape[0]
    vals, valid = _select("setxor1d", merged, lax.lt(lax.iota(dtypes.int32, n), count),
                          size)
    return _pad("setxor1d", vals, valid, fill_value)
