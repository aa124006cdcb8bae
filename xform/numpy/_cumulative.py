"""Cumulative reductions and differences: cumsum/cumprod (and their nan- and
array-API variants), diff, ediff1d, gradient, trapezoid."""
import operator

from xform import lax
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._reductions import _promote_integer_dtype
from xform.numpy._reductions import sum as _sum
from xform.numpy._shape import concatenate, moveaxis, ravel
from xform.numpy._util import asarray, canonicalize_axis


def _cumulative(name, reduction, a, axis, dtype, out, nan_fill=None, promote=False):
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")
    a = asarray(a, name)
    if _util.is_array(axis):   # (JAX's: a static argument, so an Array is unhashable)
        raise ValueError(f"jnp.{name}: axis must be a static int, got an array {axis!r}; "
                         "use int(axis) for a concrete one.")
    if axis is None or a.aval.ndim == 0:
        a = lax.reshape(a, (a.aval.size,))
        axis = 0
    axis = canonicalize_axis(axis, a.aval.ndim)
    if nan_fill is not None:
        a = uf.where(uf.isnan(a), _util.scalar_array(nan_fill, a.aval.dtype, False), a)
    if dtype is None:  # NB: unlike sum, only bool is promoted (to the default int)
        result = comp = (_promote_integer_dtype(a.aval.dtype)
                         if promote or a.aval.dtype == dtypes.bool_ else a.aval.dtype)
    else:
        result = dtypes.canonicalize_dtype(dtype)
        comp = result
        if result == dtypes.bool_:
            if a.aval.dtype != dtypes.bool_:
                a = uf.not_equal(a, 0)
            comp = _promote_integer_dtype(result)
    r = reduction(lax.convert_element_type(a, comp), axis)
    return lax.convert_element_type(r, result)


@composite(static=("axis", "dtype", "out"))
def cumsum(a, axis=None, dtype=None, out=None):
    """Like numpy.cumsum (flattened if ``axis`` is None; bools sum in the default int,
    other dtypes in their own, as in JAX).

    >>> jnp.cumsum(jnp.array([1, 2, 3]))
    Array([1, 3, 6], dtype=int32)
    """
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype, out)


@composite(static=("axis", "dtype", "out"))
def cumprod(a, axis=None, dtype=None, out=None):
    """Like numpy.cumprod."""
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype, out)


@composite(static=("axis", "dtype", "out"))
def nancumsum(a, axis=None, dtype=None, out=None):
    """Like numpy.nancumsum: NaNs count as 0."""
    return _cumulative("nancumsum", lax.cumsum, a, axis, dtype, out, nan_fill=0)


@composite(static=("axis", "dtype", "out"))
def nancumprod(a, axis=None, dtype=None, out=None):
    """Like numpy.nancumprod: NaNs count as 1."""
    return _cumulative("nancumprod", lax.cumprod, a, axis, dtype, out, nan_fill=1)


@composite(static=("axis", "dtype"))
def _cumsum_promoted(a, axis, dtype):
    """cumulative_sum's sum: small integers widen to the default int, as ``sum``'s."""
    return _cumulative("cumulative_sum", lax.cumsum, a, axis, dtype, None, promote=True)


def _array_api_cumulative(name, fn, x, axis, dtype, include_initial, initial):
    x = asarray(x, name)
    if x.aval.ndim == 0:
        raise ValueError(f"The input must be non-scalar to take a {name}, however a "
                         "scalar value or scalar array was given.")
    if axis is None:
        if x.aval.ndim > 1:
            raise ValueError(f"The input array has rank {x.aval.ndim}, however axis was "
                             "not set to an explicit value. The axis argument is only "
                             "optional for one-dimensional arrays.")
        axis = 0
    axis = canonicalize_axis(axis, x.aval.ndim)
    out = fn(x, axis, dtype)
    if include_initial:
        shape = list(x.aval.shape)
        shape[axis] = 1
        out = lax.concatenate([lax.full(tuple(shape), initial, out.aval.dtype), out], axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Like numpy.cumulative_sum (``include_initial`` prepends a 0)."""
    return _array_api_cumulative("cumulative_sum", _cumsum_promoted, x, axis, dtype,
                                 include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Like numpy.cumulative_prod (``include_initial`` prepends a 1)."""
    return _array_api_cumulative("cumulative_prod", cumprod, x, axis, dtype,
                                 include_initial, 1)


# ---- differences ----

def _slice_axis(a, start, stop, axis):
    lo = [0] * a.aval.ndim
    hi = list(a.aval.shape)
    lo[axis], hi[axis] = start, stop
    return lax.slice(a, lo, hi)


@composite(static=("n", "axis"))
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """Like numpy.diff: the ``n``-th discrete difference along ``axis`` (bool inputs
    give ``!=``).

    >>> jnp.diff(jnp.array([1, 4, 9, 16]))
    Array([3, 5, 7], dtype=int32)
    """
    a = asarray(a, "diff")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if a.aval.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
    axis = canonicalize_axis(axis, a.aval.ndim)
    if n == 0:  # (NumPy's and JAX's: the input, without prepend/append)
        return a
    parts = []
    for extra, what in ((prepend, "prepend"), (None, None), (append, "append")):
        if what is None:
            parts.append(a)
        elif extra is not None:
            e = asarray(extra, "diff")
            if e.aval.ndim == 0:
                shape = list(a.aval.shape)
                shape[axis] = 1
                e = _util.broadcast_to(e, tuple(shape))
            parts.append(e)
    if len(parts) > 1:
        a = concatenate(parts, axis)
    for _ in range(n):
        m = a.aval.shape[axis]
        if m == 0:
            break
        hi, lo = _slice_axis(a, 1, m, axis), _slice_axis(a, 0, m - 1, axis)
        a = uf.not_equal(hi, lo) if a.aval.dtype == dtypes.bool_ else uf.subtract(hi, lo)
    return a


@composite
def ediff1d(ary, to_end=None, to_begin=None):
    """Like numpy.ediff1d: differences of the flattened array, with optional ends."""
    ary = ravel(asarray(ary, "ediff1d"))
    if ary.aval.dtype == dtypes.bool_:  # (diff gives != for bools; JAX's ediff1d subtracts)
        raise TypeError("sub does not accept dtype bool at position 0. Accepted dtypes at "
                        "position 0 are subtypes of integer, floating, complexfloating.")
    out = diff(ary) if ary.aval.size else ary
    parts = []
    # (the ends are cast to the array's dtype, as JAX: ``to_end=2.7`` on ints is 2)
    if to_begin is not None:
        parts.append(ravel(asarray(to_begin, "ediff1d").astype(ary.aval.dtype)))
    parts.append(out)
    if to_end is not None:
        parts.append(ravel(asarray(to_end, "ediff1d").astype(ary.aval.dtype)))
    return concatenate(parts) if len(parts) > 1 else out


@composite(static=("axis", "edge_order"))
def gradient(f, *varargs, axis=None, edge_order=None):
    """Like numpy.gradient: central differences inside, one-sided at the edges
    (``edge_order`` 1); spacings are scalars or coordinate arrays.

    >>> jnp.gradient(jnp.array([1.0, 2.0, 4.0, 8.0]))
    Array([1. , 1.5, 3. , 4. ], dtype=float32)
    """
    if edge_order is not None and edge_order != 1:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not "
                                  "supported.")
    # (f and the spacings promote together, as JAX: int f with a Python-float spacing
    # is float64 under x64; JAX's formulas term by term, so results round as its do)
    f, *varargs = _util.promote_dtypes("gradient", f, *varargs, to="inexact")
    axes = (tuple(range(f.aval.ndim)) if axis is None
            else _util.canonicalize_axes(axis, f.aval.ndim))
    if not axes:
        return []
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("Invalid number of spacing arguments for jnp.gradient")
    if min(f.aval.shape[ax] for ax in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, "
                         "at least (edge_order + 1) elements are required.")
    out = [moveaxis(_one_gradient(moveaxis(f, ax, -1), h, f.aval.shape[ax]), -1, ax)
           for ax, h in zip(axes, spacings)]
    return out[0] if len(out) == 1 else out


def _one_gradient(f, h, n):
    def sl(a, lo, hi):
        return _slice_axis(a, lo, hi, a.aval.ndim - 1)
    first = uf.subtract(sl(f, 1, 2), sl(f, 0, 1))
    last = uf.subtract(sl(f, n - 1, n), sl(f, n - 2, n - 1))
    if getattr(h, "ndim", 0) == 0:  # (a Python float: the default spacing)
        inner = uf.true_divide(uf.multiply(uf.subtract(sl(f, 2, n), sl(f, 0, n - 2)), 0.5), h)
        first, last = uf.true_divide(first, h), uf.true_divide(last, h)
    elif h.ndim == 1:  # coordinates: second-order non-uniform central differences
        if h.aval.shape[0] != n:
            raise ValueError("Spacing arrays must have the same length as the dimension "
                             "along which the gradient is calculated.")
        first = uf.true_divide(first, uf.subtract(sl(h, 1, 2), sl(h, 0, 1)))
        last = uf.true_divide(last, uf.subtract(sl(h, n - 1, n), sl(h, n - 2, n - 1)))
        dx1 = uf.subtract(sl(h, 1, n - 1), sl(h, 0, n - 2))
        dx2 = uf.subtract(sl(h, 2, n), sl(h, 1, n - 1))
        a = uf.true_divide(uf.negative(dx2), uf.multiply(dx1, uf.add(dx1, dx2)))
        b = uf.true_divide(uf.subtract(dx2, dx1), uf.multiply(dx1, dx2))
        c = uf.true_divide(dx1, uf.multiply(dx2, uf.add(dx1, dx2)))
        inner = uf.add(uf.add(uf.multiply(a, sl(f, 0, n - 2)), uf.multiply(b, sl(f, 1, n - 1))),
                       uf.multiply(c, sl(f, 2, n)))
    else:
        raise ValueError("Spacing arrays must be 1D arrays or scalars.")
    return concatenate([first, inner, last], -1)


@composite(static=("axis",))
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """Like numpy.trapezoid: the trapezoid-rule integral of ``y`` along ``axis``.

    >>> jnp.trapezoid(jnp.array([1.0, 2.0, 3.0]))
    Array(4., dtype=float32)
    """
    y = asarray(y, "trapezoid")
    if x is None:
        y, = _util.promote_dtypes("trapezoid", y, to="inexact")
        d = asarray(dx, "trapezoid")
    else:
        y, x = _util.promote_dtypes("trapezoid", y, x, to="inexact")
        x = asarray(x, "trapezoid")
        d = diff(x) if x.aval.ndim == 1 else diff(x, axis=axis)
    y = moveaxis(y, axis, -1)
    n = y.aval.shape[-1]
    pairs = uf.add(_slice_axis(y, 1, n, y.aval.ndim - 1), _slice_axis(y, 0, n - 1,
                                                                       y.aval.ndim - 1))
    if x is not None and x.aval.ndim > 1:
        d = moveaxis(d, axis, -1)
    return uf.multiply(0.5, _sum(uf.multiply(d, pairs), -1))
