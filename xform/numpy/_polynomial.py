"""Polynomials (coefficients highest power first, as NumPy's poly* functions),
convolve/correlate (one ``conv_general_dilated``), interp and unwrap."""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._shape import flip
from xform.numpy._util import asarray
from xform.numpy._cumulative import cumsum, diff
from xform.numpy._manip import trim_zeros
from xform.numpy._math import conjugate
from xform.numpy._matrix import vander
from xform.numpy._products import matmul
from xform.numpy._shape import concatenate
from xform.numpy._sorting import searchsorted
from xform.numpy._take import take


def _conv(name, x, y, mode, precision, preferred_element_type):
    x, y = asarray(x, name), asarray(y, name, 1)
    if x.aval.ndim != 1 or y.aval.ndim != 1:
        raise ValueError(f"{name}() only support 1-dimensional inputs.")
    if preferred_element_type is None:
        x, y = _util.promote_dtypes(name, x, y, to="inexact")
    if not x.aval.size or not y.aval.size:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {x.aval.shape} and "
                         f"{y.aval.shape}.")
    reverse = False
    if name == "correlate":
        y = conjugate(y)
        if x.aval.shape[0] < y.aval.shape[0]:
            x, y, reverse = y, x, True
    elif x.aval.shape[0] < y.aval.shape[0]:
        x, y = y, x
    if name == "convolve":
        y = flip(y)
    m = y.aval.shape[0]
    if mode == "valid":
        padding = [(0, 0)]
    elif mode == "same":
        padding = [(m // 2, m - m // 2 - 1)]
    elif mode == "full":
        padding = [(m - 1, m - 1)]
    else:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    out = lax.conv_general_dilated(lax.reshape(x, (1, 1) + x.aval.shape),
                                   lax.reshape(y, (1, 1) + y.aval.shape), (1,), padding,
                                   precision=precision,
                                   preferred_element_type=preferred_element_type)
    out = lax.reshape(out, out.aval.shape[2:])
    return lax.rev(out, (0,)) if reverse else out


@composite(static=("mode", "precision", "preferred_element_type"))
def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """Like numpy.convolve: the discrete linear convolution of 1-D arrays ("full",
    "same" or "valid"); integer inputs are promoted to float, as in JAX.

    >>> jnp.convolve(jnp.array([1.0, 2.0]), jnp.array([1.0, 1.0, 1.0]))
    Array([1., 3., 3., 2.], dtype=float32)
    """
    return _conv("convolve", a, v, mode, precision, preferred_element_type)


@composite(static=("mode", "precision", "preferred_element_type"))
def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """Like numpy.correlate: cross-correlation ``sum_n a[n + k] conj(v[n])``."""
    return _conv("correlate", a, v, mode, precision, preferred_element_type)


# ---- polynomials ----

@composite(static=("unroll",))
def polyval(p, x, *, unroll=16):
    """Like numpy.polyval: Horner's rule over the (leading-axis) coefficients.

    >>> jnp.polyval(jnp.array([1, 0, -1]), 3)
    Array(8, dtype=int32)
    """
    del unroll
    p, x = _util.promote_dtypes("polyval", p, x)
    if p.aval.ndim == 0:   # (JAX's IndexError)
        raise IndexError("polyval: p must be at least 1-dimensional, got shape ().")
    shape = _util.broadcast_shapes(p.aval.shape[1:], x.aval.shape)
    y = lax.full(shape, 0, x.aval.dtype)   # (strong, as JAX's full_like with a dtype)
    for k in range(p.aval.shape[0]):
        y = uf.add(uf.multiply(y, x), p[k])
    return y


def _add_aligned(name, a1, a2):
    """Sum aligned at the lowest power: the shorter added into the longer's tail (as
    JAX's ``at[-n:].add``, so a 2-D operand broadcasts only into a 2-D tail)."""
    if a2.aval.shape[0] > a1.aval.shape[0]:
        a1, a2 = a2, a1
    return a1.at[a1.aval.shape[0] - a2.aval.shape[0]:].add(a2)


@composite
def polyadd(a1, a2):
    """Like numpy.polyadd (aligned at the lowest power)."""
    return _add_aligned("polyadd", *_util.promote_dtypes_exact("polyadd", a1, a2))


@composite
def polysub(a1, a2):
    """Like numpy.polysub."""
    a1, a2 = _util.promote_dtypes_exact("polysub", a1, a2)
    return _add_aligned("polysub", a1, uf.negative(a2))


def polymul(a1, a2, *, trim_leading_zeros=False):
    """Like numpy.polymul: the convolution of the coefficients."""
    a1, a2 = _util.promote_dtypes("polymul", a1, a2, to="inexact")
    if trim_leading_zeros and (a1.aval.shape[0] > 1 or a2.aval.shape[0] > 1):
        a1, a2 = trim_zeros(a1, "f"), trim_zeros(a2, "f")
    if not a1.aval.shape[0]:
        a1 = lax.full((1,), 0, a2.aval.dtype)
    if not a2.aval.shape[0]:
        a2 = lax.full((1,), 0, a1.aval.dtype)
    return convolve(a1, a2, mode="full")


def _length(name, p):
    if p.aval.ndim == 0:   # (JAX's len() of it)
        raise TypeError(f"{name}: len() of unsized object: p must be at least "
                        f"1-dimensional, got shape ().")
    return p.aval.shape[0]


def _coefficients(grid, dtype):
    """The products down axis 0 of ``max(1, grid)``, in ``dtype`` (as JAX's prod(0))."""
    return lax.reduce_prod(uf.maximum(asarray(np.ones((), dtype)),
                                      lax.convert_element_type(asarray(grid), dtype)), (0,))


@composite(static=("m",))
def polyder(p, m=1):
    """Like numpy.polyder: the ``m``-th derivative's coefficients (of a 2-D ``p``, the
    trailing axis scaled, as JAX broadcasts)."""
    p, = _util.promote_dtypes("polyder", p, to="inexact")
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    if m == 0:
        return p
    n = _length("polyder", p)
    coeff = _coefficients(np.arange(m, n)[None] - np.arange(m)[:, None], p.aval.dtype)
    return uf.multiply(lax.slice_in_dim(p, 0, max(n - m, 0)), flip(coeff, 0))


@composite(static=("m",))
def polyint(p, m=1, k=None):
    """Like numpy.polyint: the ``m``-th antiderivative, with integration constants
    ``k`` (a scalar or ``m`` values)."""
    m = operator.index(m)
    p, kk = _util.promote_dtypes("polyint", p, 0 if k is None else k, to="inexact")
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    kk = lax.reshape(kk, (kk.aval.size,))
    if kk.aval.shape[0] == 1:
        kk = _util.broadcast_to(kk, (m,))
    if kk.aval.shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    n = _length("polyint", p)
    coeff = _coefficients(np.arange(n + m)[None] - np.arange(m)[:, None], p.aval.dtype)
    return uf.true_divide(concatenate((p, kk)), flip(coeff, 0))


@composite
def poly(seq_of_zeros):
    """Like numpy.poly: the monic polynomial with the given roots, or (a non-empty square
    matrix) its characteristic polynomial, complex as its eigenvalues (as JAX's)."""
    z, = _util.promote_dtypes("poly", seq_of_zeros, to="inexact")
    z = lax.reshape(z, (z.aval.size,)) if z.aval.ndim == 0 else z
    sh = z.aval.shape
    if len(sh) == 2 and sh[0] == sh[1] and sh[0]:
        from xform.numpy import linalg  # (a cycle: numpy.linalg imports the numpy face)
        z = linalg.eigvals(z)
    if z.aval.ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if not z.aval.shape[0]:  # no roots: the constant 1 (0-d, as NumPy's and JAX's)
        return lax.full((), 1, z.aval.dtype)
    a = lax.full((1,), 1, z.aval.dtype)
    for k in range(z.aval.shape[0]):
        root = lax.slice(z, (k,), (k + 1,))
        a = convolve(a, lax.concatenate([lax.full((1,), 1, z.aval.dtype), uf.negative(root)],
                                        0), mode="full")
    return a


def polydiv(u, v, *, trim_leading_zeros=False):
    """Like numpy.polydiv: ``(quotient, remainder)``; the remainder keeps ``u``'s length
    unless ``trim_leading_zeros`` (concrete inputs only)."""
    u, v = _util.promote_dtypes("polydiv", u, v, to="inexact")
    m, n = u.aval.shape[0] - 1, v.aval.shape[0] - 1
    scale = uf.true_divide(1.0, v[0])
    q = []
    for k in range(m - n + 1):
        d = uf.multiply(scale, u[k])
        q.append(lax.reshape(d, (1,)))
        sub = lax.pad(uf.multiply(d, v), _util.scalar_array(0, u.aval.dtype, False),
                      [(k, m - n - k, 0)])
        u = uf.subtract(u, sub)
    quotient = lax.concatenate(q, 0) if q else lax.full((1,), 0, u.aval.dtype)
    quotient = lax.convert_element_type(quotient, u.aval.dtype, False)  # (JAX's zeros)
    if trim_leading_zeros:
        value = np.asarray(_util.concrete_or_error(u, "u", "polydiv"))
        tol = np.sqrt(dtypes.finfo(u.aval.dtype).eps)
        big = np.flatnonzero(np.abs(value) > tol)
        u = lax.slice(u, (int(big[0]) if big.size else value.shape[0],), u.aval.shape)
    return quotient, u


@composite(static=("deg", "rcond", "full", "cov"))
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Like numpy.polyfit: least squares on the (column-scaled) Vandermonde matrix. As
    JAX's, ``full=True`` gives ``(p, resids, rank, s, rcond)`` and ``cov`` (True or
    "unscaled") ``(p, C)``; the default ``rcond`` is ``len(x) * eps`` of ``x``'s dtype."""
    from xform.numpy import linalg  # (a cycle: numpy.linalg imports the numpy face)
    x, y = asarray(x, "polyfit"), asarray(y, "polyfit", 1)
    deg = operator.index(deg)
    order = deg + 1
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x.aval.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.aval.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.aval.ndim not in (1, 2):
        raise TypeError("expected 1D or 2D array for y")
    if x.aval.shape[0] != y.aval.shape[0]:
        raise TypeError("expected x and y to have same length")
    n = x.aval.shape[0]
    if rcond is None:
        rcond = n * float(dtypes.finfo(x.aval.dtype).eps)
    rcond = float(rcond)
    x, y = _util.promote_dtypes("polyfit", x, y, to="inexact")
    lhs, rhs = vander(x, order), y
    if w is not None:
        (w,) = _util.promote_dtypes("polyfit", asarray(w, "polyfit", 5), to="inexact")
        if w.aval.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.aval.shape[0] != n:
            raise TypeError("expected w and y to have the same length")
        lhs = uf.multiply(lhs, lax.expand_dims(w, (1,)))
        rhs = uf.multiply(rhs, w if rhs.aval.ndim == 1 else lax.expand_dims(w, (1,)))
    scale = lax.sqrt(lax.reduce_sum(uf.multiply(lhs, lhs), (0,)))
    lhs = uf.true_divide(lhs, scale)
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = uf.true_divide(c, scale if c.aval.ndim == 1 else lax.expand_dims(scale, (1,)))
    if full:
        return c, resids, rank, s, asarray(rcond, "polyfit")
    if not cov:
        return c
    vbase = uf.true_divide(linalg.inv(matmul(lhs.T, lhs)), uf.multiply(
        lax.expand_dims(scale, (1,)), lax.expand_dims(scale, (0,))))
    if cov == "unscaled":
        fac = asarray(1.0, "polyfit")
    elif n <= order:
        raise ValueError("the number of data points must exceed order to scale the "
                         "covariance matrix")
    else:
        fac = uf.true_divide(resids, n - order)
    fac = lax.reshape(fac, (fac.aval.size,))
    if y.aval.ndim == 1:
        return c, uf.multiply(vbase, lax.expand_dims(fac, (0,)))
    return c, uf.multiply(lax.expand_dims(vbase, (2,)), lax.expand_dims(fac, (0, 1)))


# ---- interpolation ----

def interp(x, xp, fp, left=None, right=None, period=None):
    """Like numpy.interp: piecewise-linear interpolation of ``(xp, fp)`` at ``x``; as
    JAX's, ``left``/``right`` may be "extrapolate" and are ignored with a ``period``.

    >>> jnp.interp(jnp.array([0.5, 2.0]), jnp.array([0.0, 1.0]), jnp.array([0.0, 10.0]))
    Array([ 5., 10.], dtype=float32)
    """
    for name, side in (("left", left), ("right", right)):
        if isinstance(side, str) and side != "extrapolate":
            raise ValueError(f"the only valid string value of `{name}` is 'extrapolate', "
                             f"but got: {side!r}")
    return _interp(x, xp, fp, None if isinstance(left, str) else left,
                   None if isinstance(right, str) else right, period,
                   extrapolate=(isinstance(left, str), isinstance(right, str)))


@composite(static=("extrapolate",))  # (JAX jits _interp with the str sides static)
def _interp(x, xp, fp, left, right, period, *, extrapolate):
    x, xp, fp = (asarray(a, "interp", i) for i, a in enumerate((x, xp, fp)))
    if xp.aval.ndim != 1 or fp.aval.ndim != 1:
        raise ValueError("xp and fp must be one-dimensional")
    if xp.aval.shape != fp.aval.shape:
        raise ValueError("xp and fp must have the same length")
    # JAX's promotion: x with xp and fp on its own, each to inexact; the formula mixes
    # them (an int fp is float32 even with float16 x and xp), weak types included
    x, xp = _util.promote_dtypes("interp", x, xp, to="inexact")
    fp, = _util.promote_dtypes("interp", fp, to="inexact")
    if dtypes.is_complex(x.aval.dtype):
        raise ValueError("jnp.interp: complex x values not supported.")
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"period must be a scalar; got {period}")
        p = uf.absolute(period)
        x = uf.remainder(x, p)
        xp = uf.remainder(xp, p)
        xp, fp = lax.sort((xp, fp), 0, num_keys=1)
        xp = concatenate([uf.subtract(xp[-1:], p), xp, uf.add(xp[:1], p)])
        fp = concatenate([fp[-1:], fp, fp[:1]])
    n = xp.aval.shape[0]
    i = uf.clip(searchsorted(xp, x, side="right"), 1, n - 1)
    x0, x1 = take(xp, uf.subtract(i, 1)), take(xp, i)
    f0, f1 = take(fp, uf.subtract(i, 1)), take(fp, i)
    dx = uf.subtract(x1, x0)
    delta = uf.subtract(x, x0)
    real = np.dtype(dtypes.finfo(xp.aval.dtype).dtype)
    small = uf.less_equal(uf.absolute(dx), np.spacing(np.finfo(real).eps))  # (JAX's bound)
    safe = uf.where(small, 1, dx)
    f = uf.where(small, f0, uf.add(f0, uf.multiply(uf.true_divide(delta, safe),
                                                   uf.subtract(f1, f0))))
    if period is None:
        if not extrapolate[0]:
            f = uf.where(uf.less(x, xp[0]), fp[0] if left is None else left, f)
        if not extrapolate[1]:
            f = uf.where(uf.greater(x, xp[-1]), fp[-1] if right is None else right, f)
    return f


@composite(static=("axis",))
def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """Like numpy.unwrap: remove jumps larger than ``discont`` by adding multiples of
    ``period``."""
    # JAX's formula term by term: p promotes with period (an int p with an int period
    # stays int; with the default float period it is the default float, float64 under x64)
    p, period = _util.promote_dtypes("unwrap", asarray(p, "unwrap"), period)
    if dtypes.is_complex(p.aval.dtype):
        raise ValueError("jnp.unwrap does not support complex inputs.")
    axis = _util.canonicalize_axis(axis, p.aval.ndim)
    n = p.aval.shape[axis]
    if n == 0:
        return p
    if discont is None:
        discont = uf.true_divide(period, 2)
    interval = (uf.floor_divide if dtypes.is_integer(p.aval.dtype) else uf.true_divide)(
        period, 2)
    dd = diff(p, axis=axis)
    ddmod = uf.subtract(uf.remainder(uf.add(dd, interval), period), interval)
    ddmod = uf.where(uf.logical_and(uf.equal(ddmod, uf.negative(interval)),
                                    uf.greater(dd, 0)), interval, ddmod)
    correct = uf.where(uf.less(uf.absolute(dd), discont), 0, uf.subtract(ddmod, dd))
    rest = uf.add(lax.slice_in_dim(p, 1, n, axis=axis), cumsum(correct, axis))
    return concatenate([lax.slice_in_dim(p, 0, 1, axis=axis), rest], axis)
