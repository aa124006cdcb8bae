"""Statistics: NaN-ignoring reductions, count_nonzero, ptp, average, quantile/
percentile/median (and nan-), cov/corrcoef, histogram. Compositions of the basic
reductions, sort and take_along_axis, with JAX's dtypes."""
import builtins
import math
import operator

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy import _reductions as red
from xform.numpy._shape import moveaxis, ravel
from xform.numpy._util import asarray, canonicalize_axes
from xform.lax import ScatterDimensionNumbers
from xform.numpy._creation import full, linspace, zeros
from xform.numpy._cumulative import cumsum, diff
from xform.numpy._math import conjugate, real
from xform.numpy._matrix import diag, ix_
from xform.numpy._products import dot
from xform.numpy._shape import atleast_2d, concatenate, squeeze, stack
from xform.numpy._sorting import bincount, searchsorted
from xform.numpy._take import ravel_multi_index, take_along_axis


@composite(static=("axis", "keepdims"))
def count_nonzero(a, axis=None, keepdims=False):
    """Like numpy.count_nonzero (default int dtype)."""
    a = asarray(a, "count_nonzero")
    return red.sum(uf.not_equal(a, 0), axis, dtype=dtypes.default_int_dtype(),
                   keepdims=keepdims)


@composite(static=("axis", "keepdims"))
def ptp(a, axis=None, out=None, keepdims=False):
    """Like numpy.ptp: ``max - min`` along ``axis``."""
    return uf.subtract(red.max(a, axis, out, keepdims), red.min(a, axis, None, keepdims))


@composite(static=("axis", "returned", "keepdims"))
def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """Like numpy.average: the (``weights``-)weighted mean; ``returned`` also gives the
    sum of the weights.

    >>> jnp.average(jnp.array([1.0, 2.0]), weights=jnp.array([3.0, 1.0]))
    Array(1.25, dtype=float32)
    """
    a = asarray(a, "average")
    if weights is None:
        avg = red.mean(a, axis, keepdims=keepdims)
        if not returned:
            return avg
        n = a.aval.size // builtins.max(avg.aval.size, 1) if a.aval.size else 0
        return avg, lax.full(avg.aval.shape, n, avg.aval.dtype)
    a, w = _util.promote_dtypes("average", a, weights, to="inexact")
    if w.aval.shape != a.aval.shape:
        if axis is None:
            raise ValueError("Axis must be specified when shapes of a and weights differ.")
        axes = canonicalize_axes(axis, a.aval.ndim)
        if w.aval.ndim != len(axes) or w.aval.shape != tuple(a.aval.shape[d] for d in axes):
            raise ValueError(f"Shape of weights {w.aval.shape} must be consistent with "
                             f"the shape of a {a.aval.shape} along axis {axis}")
        w = lax.broadcast_in_dim(w, a.aval.shape, axes)
    w_sum = red.sum(w, axis, keepdims=keepdims)
    avg = uf.true_divide(red.sum(uf.multiply(a, w), axis, keepdims=keepdims), w_sum)
    if returned:
        return avg, _util.broadcast_to(w_sum, avg.aval.shape)
    return avg


# ---- NaN-ignoring reductions ----

def _nan_reduce(fn, name, a, fill, nan_if_all_nan, axis, keepdims, **kw):
    a = asarray(a, name)
    if not dtypes.is_inexact(a.aval.dtype):
        return fn(a, axis, keepdims=keepdims, **kw)
    nan = uf.isnan(a)
    out = fn(uf.where(nan, _util.scalar_array(fill, a.aval.dtype, False), a), axis,
             keepdims=keepdims, **kw)
    if nan_if_all_nan:
        out = uf.where(red.all(nan, axis, keepdims=keepdims),
                       _util.scalar_array(np.nan, out.aval.dtype, False), out)
    return out


@composite(static=("axis", "dtype", "keepdims"))
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.nansum: NaNs count as 0."""
    return _nan_reduce(red.sum, "nansum", a, 0, False, axis, keepdims, dtype=dtype, out=out,
                       initial=initial, where=where)


@composite(static=("axis", "dtype", "keepdims"))
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.nanprod: NaNs count as 1."""
    return _nan_reduce(red.prod, "nanprod", a, 1, False, axis, keepdims, dtype=dtype,
                       out=out, initial=initial, where=where)


@composite(static=("axis", "keepdims"))
def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.nanmax: the maximum ignoring NaNs (NaN where all are NaN)."""
    return _nan_reduce(red.max, "nanmax", a, -np.inf, True, axis, keepdims, out=out,
                       initial=initial, where=where)


@composite(static=("axis", "keepdims"))
def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.nanmin: the minimum ignoring NaNs (NaN where all are NaN)."""
    return _nan_reduce(red.min, "nanmin", a, np.inf, True, axis, keepdims, out=out,
                       initial=initial, where=where)


def _nanarg(name, fn, fill, a, axis, out, keepdims):
    a = asarray(a, name)
    if not dtypes.is_inexact(a.aval.dtype):
        return fn(a, axis, out, keepdims)
    nan = uf.isnan(a)
    res = fn(uf.where(nan, _util.scalar_array(fill, a.aval.dtype, False), a), axis, out,
             keepdims)
    all_nan = red.all(nan, axis, keepdims=bool(keepdims))
    return uf.where(all_nan, _util.scalar_array(-1, res.aval.dtype, False), res)


@composite(static=("axis", "keepdims"))
def nanargmax(a, axis=None, out=None, keepdims=None):
    """Like numpy.nanargmax, but -1 (not an error) where all values are NaN."""
    return _nanarg("nanargmax", red.argmax, -np.inf, a, axis, out, keepdims)


@composite(static=("axis", "keepdims"))
def nanargmin(a, axis=None, out=None, keepdims=None):
    """Like numpy.nanargmin, but -1 (not an error) where all values are NaN."""
    return _nanarg("nanargmin", red.argmin, np.inf, a, axis, out, keepdims)


@composite(static=("axis", "dtype", "keepdims"))
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """Like numpy.nanmean: the mean of the non-NaN values."""
    a = asarray(a, "nanmean")
    if not dtypes.is_inexact(a.aval.dtype):
        return red.mean(a, axis, dtype, out, keepdims, where=where)
    dt = dtypes.to_inexact_dtype(a.aval.dtype) if dtype is None else \
        dtypes.canonicalize_dtype(dtype)
    count = red.sum(uf.logical_not(uf.isnan(a)), axis, dtype=dt, keepdims=keepdims,
                    where=where)
    return lax.div(nansum(a, axis, dt, out, keepdims, where=where), count)


@composite(static=("axis", "dtype", "keepdims"))
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    """Like numpy.nanvar: the variance of the non-NaN values (NaN where fewer than
    ``ddof + 1`` remain)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanvar is not supported.")
    a = asarray(a, "nanvar")
    comp, result_dt = red._var_promote_types(a.aval.dtype, dtype)
    a = lax.convert_element_type(a, comp)
    nan = uf.isnan(a)
    centered = uf.where(nan, _util.scalar_array(0, comp, False),
                        uf.subtract(a, nanmean(a, axis, comp, keepdims=True, where=where)))
    sq, comp = red._abs2(centered)
    count = red.sum(uf.logical_not(nan), axis, keepdims=keepdims, where=where)
    normalizer = uf.subtract(count, ddof)
    bad = uf.less_equal(normalizer, 0)
    total = red.sum(sq, axis, keepdims=keepdims, where=where)
    total = uf.where(bad, np.nan, total)  # (floats even for an integer dtype, as JAX's)
    divisor = lax.convert_element_type(uf.where(bad, 1, normalizer), total.aval.dtype)
    return lax.convert_element_type(lax.div(total, divisor), result_dt)


@composite(static=("axis", "dtype", "keepdims"))
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    """Like numpy.nanstd (square root of :func:`nanvar`)."""
    return lax.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where))


# ---- quantiles ----

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf",
            "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
            "hazen", "weibull", "median_unbiased", "normal_unbiased")


def _quantile(name, a, q, axis, method, keepdims, squash_nans, weights=None):
    if method not in _METHODS[:6]:
        raise ValueError(f"{name}: method={method!r} is not supported; use one of "
                         f"{_METHODS[:6]}")
    a = asarray(a, name)
    if dtypes.is_complex(a.aval.dtype):
        raise ValueError("quantile does not support complex input, as the operation is "
                         "poorly defined.")
    if weights is not None:
        weights = asarray(weights, "weights")
        if dtypes.is_complex(weights.aval.dtype):
            raise ValueError(f"{name}: weights cannot be complex.")
        if method != "inverted_cdf":
            raise NotImplementedError(f"{name}: method={method!r} doesn't support weights; "
                                      "only 'inverted_cdf' does.")
        a, weights = _util.promote_dtypes(name, a, weights, to="inexact")
        weights = _broadcast_weights(name, weights, a.aval.shape, axis)
    else:
        a, = _util.promote_dtypes(name, a, to="inexact")
    q = asarray(q, name, 1)  # positions and weights are computed in q's dtype, as JAX's
    if not dtypes.is_inexact(q.aval.dtype):
        q = lax.convert_element_type(q, dtypes.default_float_dtype())
    if q.aval.ndim > 1:
        raise ValueError(f"{name}: q must have rank <= 1, got shape {q.aval.shape}")
    nd = a.aval.ndim
    axes = canonicalize_axes(axis, nd)
    keep_shape = tuple(1 if d in axes else s for d, s in enumerate(a.aval.shape))
    batch = tuple(s for d, s in enumerate(a.aval.shape) if d not in axes)
    n = math.prod(a.aval.shape[d] for d in axes)   # (maybe symbolic)

    def flat(x):  # the reduced axes last, as one
        x = moveaxis(x, axes, tuple(range(nd - len(axes), nd)))
        return lax.reshape(x, batch + (n,))

    a = flat(a)
    if weights is None:
        s = lax.sort(a, len(batch))
    else:
        s, w = lax.sort((a, flat(weights)), len(batch), num_keys=1)
    nq = q.aval.ndim
    dt = q.aval.dtype
    if squash_nans:
        counts = red.sum(uf.logical_not(uf.isnan(a)), -1, dtype=dt)
    else:
        counts = lax.full(batch, _util.asarray(n), dt)   # (n may be symbolic)
    # Positions in the sorted data, shape batch + q.shape.
    qb = lax.broadcast_in_dim(q, batch + q.aval.shape, tuple(range(len(batch), len(batch) + nq)))
    cb = lax.broadcast_in_dim(counts, batch + q.aval.shape, tuple(range(len(batch))))
    one = _util.scalar_array(1, dt, False)
    zero = _util.scalar_array(0, dt, False)
    arr = lax.reshape(s, batch + (1,) * nq + (n,))

    def at(idx):
        out = take_along_axis(arr, lax.expand_dims(idx, (idx.aval.ndim,)), -1)
        return lax.squeeze(out, (out.aval.ndim - 1,))

    def clamp_index(pos, hi):
        return lax.convert_element_type(lax.clamp(zero, pos, hi), dtypes.int32)

    if method == "inverted_cdf":
        out, bad = _inverted_cdf(s, None if weights is None else w, qb, cb, at)
    else:
        pos = lax.mul(qb, lax.sub(cb, one))
        low, high = lax.floor(pos), lax.ceil(pos)
        high_w = lax.sub(pos, low)
        last = _util.scalar_operand(shape_poly.max_dim(n - 1, 0), dt, False)
        lo_v, hi_v = at(clamp_index(low, last)), at(clamp_index(high, last))
        if method == "linear":
            lo_v, hi_v = (lax.convert_element_type(v, dt) for v in (lo_v, hi_v))
            out = lax.add(lax.mul(lo_v, lax.sub(one, high_w)), lax.mul(hi_v, high_w))
        elif method == "lower":
            out = lo_v
        elif method == "higher":
            out = hi_v
        elif method == "nearest":
            out = lax.select(lax.le(high_w, _util.scalar_array(0.5, dt, False)), lo_v, hi_v)
        else:
            out = lax.mul(lax.add(lo_v, hi_v), _util.scalar_array(0.5, a.aval.dtype, False))
        bad = None
    if not squash_nans:
        has_nan = lax.broadcast_in_dim(red.any(uf.isnan(a), -1), out.aval.shape,
                                       tuple(range(len(batch))))
        bad = has_nan if bad is None else lax.bitwise_or(bad, has_nan)
    if bad is not None:
        out = lax.select(bad, lax.full_like(out, np.nan), out)
    out = lax.convert_element_type(out, a.aval.dtype)
    out = moveaxis(out, tuple(range(len(batch), len(batch) + nq)), tuple(range(nq)))
    if keepdims:
        out = lax.reshape(out, q.aval.shape + keep_shape)
    return out


def _broadcast_weights(name, weights, shape, axis):
    """Weights of ``a``'s shape, or of the reduced axes' shape (broadcast along the rest)."""
    if weights.aval.shape == shape:
        return weights
    if axis is None:
        raise ValueError(f"{name}: weights shape {weights.aval.shape} must match a's "
                         f"shape {shape} when axis is None.")
    axes = canonicalize_axes(axis, len(shape))
    want = tuple(shape[d] for d in axes)
    if weights.aval.shape != want:
        raise ValueError(f"{name}: weights shape {weights.aval.shape} must match the "
                         f"reduction axes {want}")
    return lax.broadcast_in_dim(weights, shape, axes)


def _inverted_cdf(s, w, qb, counts, at):
    """JAX's "inverted_cdf": the first sorted value whose cumulative weight reaches
    ``q * total`` (NaN data weigh 0); NaN where a weight is negative or NaN, or where
    there is no (non-NaN) data. Returns (values, NaN mask), both batch + q.shape."""
    dt = qb.aval.dtype
    nanv = uf.isnan(s)
    w = lax.full_like(s, 1) if w is None else w
    bad_w = uf.logical_or(uf.less(w, 0), uf.isnan(w))
    cw = lax.convert_element_type(cumsum(uf.where(uf.logical_or(bad_w, nanv), 0, w), -1), dt)
    nbatch = s.aval.ndim - 1
    nq = qb.aval.ndim - nbatch
    n = cw.aval.shape[-1]
    total = (lax.squeeze(lax.slice_in_dim(cw, n - 1, n, axis=-1), (nbatch,)) if n
             else lax.full(cw.aval.shape[:-1], 0, dt))
    total = lax.broadcast_in_dim(total, qb.aval.shape, tuple(range(nbatch)))
    target = lax.expand_dims(lax.mul(qb, total), (qb.aval.ndim,))
    cwb = lax.reshape(cw, cw.aval.shape[:-1] + (1,) * nq + cw.aval.shape[-1:])
    idx = red.sum(uf.less(cwb, target), -1, dtype=dtypes.int32)
    hi = lax.convert_element_type(lax.sub(counts, _util.scalar_array(1, dt, False)),
                                  dtypes.int32)
    idx = lax.max(lax.full_like(idx, 0), lax.min(idx, hi))
    any_bad = lax.broadcast_in_dim(red.any(bad_w, -1), qb.aval.shape, tuple(range(nbatch)))
    return at(idx), uf.logical_or(any_bad, lax.eq(counts, lax.full_like(counts, 0)))


@composite(static=("axis", "overwrite_input", "keepdims", "method"))
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """Like numpy.quantile for ``method`` "linear", "lower", "higher", "nearest" or
    "midpoint"; the ``q`` dimensions come first. NaN if the reduced data has a NaN.

    >>> jnp.quantile(jnp.array([1.0, 2.0, 3.0, 4.0]), 0.5)
    Array(2.5, dtype=float32)
    """
    _no_out("quantile", out)
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights)


@composite(static=("axis", "overwrite_input", "keepdims", "method"))
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """Like numpy.nanquantile: :func:`quantile` ignoring NaNs."""
    _no_out("nanquantile", out)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights)


def _percent(name, q):
    q = asarray(q, name, 1)
    q, = _util.promote_dtypes(name, q, to="inexact")
    return uf.true_divide(q, 100)


@composite(static=("axis", "overwrite_input", "keepdims", "method"))
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """Like numpy.percentile: :func:`quantile` of ``q / 100``."""
    _no_out("percentile", out)
    return _quantile("percentile", a, _percent("percentile", q), axis, method, keepdims,
                     False, weights)


@composite(static=("axis", "overwrite_input", "keepdims", "method"))
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    """Like numpy.nanpercentile."""
    _no_out("nanpercentile", out)
    return _quantile("nanpercentile", a, _percent("nanpercentile", q), axis, method,
                     keepdims, True, weights)


@composite(static=("axis", "overwrite_input", "keepdims"))
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Like numpy.median (the 0.5 quantile, "midpoint")."""
    _no_out("median", out)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False)


@composite(static=("axis", "overwrite_input", "keepdims"))
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Like numpy.nanmedian."""
    _no_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True)


def _no_out(name, out):
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")


# ---- covariance ----

@composite(static=("rowvar", "bias", "ddof", "dtype"))
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    """Like numpy.cov: the covariance matrix of the rows (variables) of ``m``. As JAX's:
    no variables give a (0, 0) array, no observations NaNs, weights count by magnitude."""
    if y is None:
        m, = _util.promote_dtypes("cov", m, to="inexact")
    else:  # promoted together, as JAX's (int8 with float16 stays float16)
        m, y = _util.promote_dtypes("cov", m, y, to="inexact")
        if y.aval.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    if m.aval.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    if dtype is not None and not dtypes.is_inexact(dtypes.canonicalize_dtype(dtype)):
        raise ValueError(f"cov: dtype must be a subclass of float or complex; got {dtype=}")
    X = atleast_2d(m)
    if not rowvar and m.aval.ndim != 1:
        X = X.T
    if X.aval.shape[0] == 0:
        return zeros((0, 0), dtypes.default_float_dtype())
    if y is not None:
        y = atleast_2d(y)
        if not rowvar and y.aval.shape[0] != 1:
            y = y.T
        X = concatenate([X, y], 0)
    if X.aval.shape[1] == 0:
        n = X.aval.shape[0]
        return full(() if n == 1 else (n, n), np.nan, X.aval.dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    for wt, what in ((fweights, "fweights"), (aweights, "aweights")):
        if wt is not None:
            wt = asarray(wt, "cov")
            if wt.aval.ndim > 1:
                raise RuntimeError(f"cannot handle multidimensional {what}")
            if wt.aval.shape[0] != X.aval.shape[1]:
                raise RuntimeError(f"incompatible numbers of samples and {what}")
            if what == "fweights" and not dtypes.is_integer(wt.aval.dtype):
                raise TypeError("fweights must be integer.")
            wt = uf.absolute(wt)  # (numpy raises on negative weights)
            if what == "aweights":
                aweights = wt
            w = wt if w is None else uf.multiply(w, wt)
    if dtype is not None:
        dtype = dtypes.canonicalize_dtype(dtype)
        X = lax.convert_element_type(X, dtype)
        w = None if w is None else lax.convert_element_type(w, dtype)
    avg, w_sum = average(X, 1, w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        f = X.aval.shape[1] - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = uf.subtract(w_sum, ddof)
    else:
        f = uf.subtract(w_sum, uf.true_divide(
            uf.multiply(ddof, red.sum(uf.multiply(w, aweights))), w_sum))
    X = uf.subtract(X, lax.expand_dims(avg, (1,)))
    X_T = X.T if w is None else uf.multiply(X, w).T
    return squeeze(uf.true_divide(dot(X, conjugate(X_T)), f))


@composite(static=("rowvar", "dtype"))
def corrcoef(x, y=None, rowvar=True, dtype=None):
    """Like numpy.corrcoef: :func:`cov` normalized by the standard deviations, clipped
    to [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if c.aval.ndim == 0:
        return uf.true_divide(c, c)
    std = lax.convert_element_type(lax.sqrt(real(diag(c))), c.aval.dtype)
    c = uf.true_divide(uf.true_divide(c, lax.expand_dims(std, (1,))),
                       lax.expand_dims(std, (0,)))
    if dtypes.is_complex(c.aval.dtype):  # each part clipped (complex values don't order)
        return lax.complex(uf.clip(real(c), -1, 1), uf.clip(lax.imag(c), -1, 1))
    return uf.clip(c, -1, 1)


# ---- histograms ----

def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """Like numpy.histogram_bin_edges for an int ``bins`` (or explicit edges)."""
    a = ravel(asarray(a, "histogram_bin_edges"))
    dt = dtypes.to_inexact_dtype(a.aval.dtype)
    if np.ndim(bins) == 1:  # explicit edges, in a's inexact dtype (JAX's)
        return lax.convert_element_type(asarray(bins, "histogram_bin_edges", 1), dt, False)
    bins = operator.index(bins)
    if range is None:
        lo, hi = red.min(a), red.max(a)
    else:
        lo, hi = (_util.scalar_array(v, dt, False) for v in range)
    lo, hi = (lax.convert_element_type(v, dt) for v in (lo, hi))
    same = lax.eq(lo, hi)
    half = _util.scalar_array(0.5, dt, False)
    lo = lax.select(same, lax.sub(lo, half), lo)
    hi = lax.select(same, lax.add(hi, half), hi)
    return linspace(lo, hi, bins + 1)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """Like numpy.histogram: ``(counts, bin_edges)``; the last bin includes its right
    edge."""
    a = asarray(a, "histogram")
    if weights is None:
        a, = _util.promote_dtypes("histogram", a, to="inexact")
        w = lax.full(a.aval.shape, 1, a.aval.dtype)
    else:  # counts in the weights' and a's common inexact dtype (JAX's)
        w = asarray(weights, "histogram", 3)
        if w.aval.shape != a.aval.shape:
            raise ValueError("weights should have the same shape as a.")
        a, w = _util.promote_dtypes("histogram", a, w, to="inexact")
    a, w = ravel(a), ravel(w)
    edges = histogram_bin_edges(a, bins, range, weights)
    n = edges.aval.shape[0]
    idx = searchsorted(edges, a, side="right")
    last = lax.broadcast_in_dim(lax.reshape(lax.slice(edges, (n - 1,), (n,)), ()),
                                a.aval.shape, ())
    idx = lax.select(lax.eq(lax.convert_element_type(a, edges.aval.dtype), last),
                     lax.full_like(idx, n - 1), idx)
    dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,))
    counts = lax.scatter_add(lax.full((n,), 0, w.aval.dtype), lax.expand_dims(idx, (1,)), w,
                             dn, mode="drop")
    counts = lax.slice(counts, (1,), (n,))
    if density:
        widths = diff(edges)
        counts = uf.true_divide(uf.true_divide(counts, widths), red.sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """Like numpy.histogramdd: counts of the ``(N, D)`` sample over a D-dimensional
    grid of bins; ``(hist, [edges per dimension])``."""
    sample = asarray(sample, "histogramdd")
    if sample.aval.ndim != 2:
        raise ValueError(f"histogramdd: sample must be 2-D (N, D), got shape "
                         f"{sample.aval.shape}")
    n, d = sample.aval.shape
    if weights is not None and _util.shape(weights) != (n,):
        raise ValueError("should have one weight for each sample.")
    if weights is None:
        sample, = _util.promote_dtypes("histogramdd", sample, to="inexact")
    else:  # weighted counts in the common inexact dtype (JAX's)
        sample, weights = _util.promote_dtypes("histogramdd", sample,
                                               asarray(weights, "histogramdd"), to="inexact")
    if isinstance(bins, (int, np.integer)):
        bins = [bins] * d
    idx, edges = [], []
    for i in builtins.range(d):
        col = lax.squeeze(lax.slice(sample, (0, i), (n, i + 1)), (1,))
        e = histogram_bin_edges(col, bins[i], None if range is None else range[i], weights)
        k = searchsorted(e, col, side="right")
        last = lax.broadcast_in_dim(lax.reshape(lax.slice(e, (e.aval.shape[0] - 1,),
                                                          (e.aval.shape[0],)), ()),
                                    col.aval.shape, ())
        k = uf.where(uf.equal(col, last), uf.subtract(k, 1), k)
        idx.append(k)
        edges.append(e)
    nbins = tuple(e.aval.shape[0] + 1 for e in edges)
    flat = ravel_multi_index(tuple(idx), nbins, mode="clip")
    hist = lax.reshape(bincount(flat, weights, length=int(np.prod(nbins))), nbins)
    hist = lax.slice(hist, (1,) * d, tuple(s - 1 for s in nbins))
    if density:
        hist = lax.convert_element_type(hist, sample.aval.dtype)
        hist = uf.true_divide(hist, red.sum(hist))
        for norm in ix_(*[diff(e) for e in edges]):
            hist = uf.true_divide(hist, norm)
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """Like numpy.histogram2d: ``(hist, x_edges, y_edges)``."""
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):
        bins = [bins, bins]
    sample = stack([asarray(x, "histogram2d"), asarray(y, "histogram2d", 1)], 1)
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]
