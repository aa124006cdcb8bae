"""jnp.pad: every NumPy mode, axis by axis, with slices, reversals and concatenation
(constant/empty as one lax.pad; wrap as a static take)."""
import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy import _reductions as red
from xform.numpy._util import asarray
from xform.numpy._creation import linspace
from xform.numpy._shape import flip
from xform.numpy._statistics import median
from xform.numpy._take import take

_MODES = ("constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum",
          "reflect", "symmetric", "wrap", "empty")


def _pairs(name, value, ndim, allow_none=False):
    if allow_none and value is None:
        return [(None, None)] * ndim
    arr = np.asarray(_util.concrete_or_error(value, name, "pad")
                     if _util.is_array(value) else value)
    if arr.ndim > 2 or (arr.ndim == 2 and arr.shape[1] not in (1, 2)):
        raise ValueError(f"jnp.pad: {name} must be a scalar, a pair, or one pair per "
                         f"axis; got shape {arr.shape}")
    try:
        arr = np.broadcast_to(arr, (ndim, 2))
    except ValueError:
        raise ValueError(f"jnp.pad: {name} of shape {np.shape(value)} does not fit an "
                         f"array of {ndim} dimensions") from None
    return [tuple(row) for row in arr.tolist()]


def _sl(x, lo, hi, axis):
    start = [0] * x.aval.ndim
    limit = list(x.aval.shape)
    start[axis], limit[axis] = lo, hi
    return lax.slice(x, start, limit)


def _widen(x, width, axis):
    """``x`` (size 1 along ``axis``) broadcast to ``width`` along it."""
    shape = list(x.aval.shape)
    shape[axis] = width
    return _util.broadcast_to(x, tuple(shape))


def _edge(x, before, after, axis):
    n = x.aval.shape[axis]
    parts = [_widen(_sl(x, 0, 1, axis), before, axis)] if before else []
    parts.append(x)
    if after:
        parts.append(_widen(_sl(x, n - 1, n, axis), after, axis))
    return lax.concatenate(parts, axis) if len(parts) > 1 else x


def _reflect(x, before, after, axis, symmetric, odd):
    """NumPy's iterative reflection: each round mirrors at most one period of the
    current array on both sides (the odd type mirrors around the edge value)."""
    while before or after:
        n = x.aval.shape[axis]
        period = n if symmetric else n - 1
        if period == 0:  # singleton axis: NumPy extends the edge
            return _edge(x, before, after, axis)
        b, a = min(before, period), min(after, period)
        parts = []
        if b:
            left = lax.rev(_sl(x, 0, b, axis) if symmetric else _sl(x, 1, b + 1, axis), (axis,))
            if odd:
                left = uf.subtract(uf.multiply(2, _widen(_sl(x, 0, 1, axis), b, axis)), left)
            parts.append(left)
        parts.append(x)
        if a:
            right = lax.rev(_sl(x, n - a, n, axis) if symmetric
                            else _sl(x, n - 1 - a, n - 1, axis), (axis,))
            if odd:
                right = uf.subtract(uf.multiply(2, _widen(_sl(x, n - 1, n, axis), a, axis)),
                                    right)
            parts.append(right)
        x = lax.concatenate([lax.convert_element_type(p, x.aval.dtype) for p in parts], axis)
        before, after = before - b, after - a
    return x


def _wrap(x, before, after, axis):
    n = x.aval.shape[axis]
    idx = np.arange(-before, n + after) % n
    return take(x, asarray(idx.astype(np.int32)), axis=axis, mode="promise_in_bounds")


def _linear_ramp(x, before, after, axis, ends):
    n = x.aval.shape[axis]
    dt = x.aval.dtype
    parts = []
    if before:
        edge = lax.squeeze(_sl(x, 0, 1, axis), (axis,))
        parts.append(linspace(_full_as(edge, ends[0]), edge, before, endpoint=False,
                              dtype=dt, axis=axis))
    parts.append(x)
    if after:
        edge = lax.squeeze(_sl(x, n - 1, n, axis), (axis,))
        parts.append(flip(linspace(_full_as(edge, ends[1]), edge, after, endpoint=False,
                                   dtype=dt, axis=axis), axis))
    return lax.concatenate(parts, axis) if len(parts) > 1 else x


def _block(x, axis, width, value):
    shape = list(x.aval.shape)
    shape[axis] = width
    return lax.broadcast_in_dim(_util.scalar_operand(value, x.aval.dtype, False),
                                tuple(shape), ())


def _full_as(x, value):
    return lax.broadcast_in_dim(_util.scalar_operand(value, x.aval.dtype, False),
                                x.aval.shape, ())


def _stat(x, before, after, axis, fn, lengths):
    n = x.aval.shape[axis]
    dt = x.aval.dtype
    parts = []

    def stat(lo, hi):
        s = fn(_sl(x, lo, hi, axis), axis=axis, keepdims=True)
        if dt != np.bool_ and not dtypes.is_inexact(dt) and dtypes.is_inexact(s.aval.dtype):
            # (integers round, as JAX's; a bool mean is true when nonzero)
            s = lax.round(s, lax.RoundingMethod.TO_NEAREST_EVEN)
        return lax.convert_element_type(s, dt)

    if before:
        k = n if lengths[0] is None else max(1, min(int(lengths[0]), n))
        parts.append(_widen(stat(0, k), before, axis))
    parts.append(x)
    if after:
        k = n if lengths[1] is None else max(1, min(int(lengths[1]), n))
        parts.append(_widen(stat(n - k, n), after, axis))
    return lax.concatenate(parts, axis) if len(parts) > 1 else x


def pad(array, pad_width, mode="constant", **kwargs):
    """Like numpy.pad, for every mode: "constant" (``constant_values``), "edge",
    "reflect"/"symmetric" (``reflect_type`` "even" or "odd"), "wrap", "linear_ramp"
    (``end_values``), "maximum"/"minimum"/"mean"/"median" (``stat_length``), "empty".

    Args:
      array: the array.
      pad_width: an int, a ``(before, after)`` pair, or one pair per axis (static).
      mode: one of the modes above.

    Returns:
      The padded array, same dtype.

    >>> jnp.pad(jnp.array([1, 2, 3]), 2, mode="reflect")
    Array([3, 2, 1, 2, 3, 2, 1], dtype=int32)
    """
    x = asarray(array, "pad")
    nd = x.aval.ndim
    widths = _pairs("pad_width", pad_width, nd)
    int_ = lambda w: w if shape_poly.is_symbolic_dim(w) else int(w)  # noqa: E731
    if any(int_(w) != w or w < 0 for pair in widths for w in pair):
        raise ValueError(f"jnp.pad: pad_width must be non-negative integers, got "
                         f"{pad_width!r}")
    widths = [(int_(b), int_(a)) for b, a in widths]   # (symbolic ones too, as JAX)
    if callable(mode) or mode not in _MODES:
        raise NotImplementedError(f"jnp.pad: mode {mode!r} is not supported; use one of "
                                  f"{_MODES}")
    allowed = {"constant": {"constant_values"}, "linear_ramp": {"end_values"},
               "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
               "maximum": {"stat_length"}, "minimum": {"stat_length"},
               "mean": {"stat_length"}, "median": {"stat_length"}}.get(mode, set())
    bad = set(kwargs) - allowed
    if bad:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {bad}")
    if mode in ("constant", "empty"):
        values = kwargs.get("constant_values", 0)
        if np.ndim(values) == 0 and not (_util.is_array(values) and values.aval.ndim):
            fill = lax.convert_element_type(asarray(values, "pad"), x.aval.dtype)
            return lax.pad(x, fill, [(b, a, 0) for b, a in widths])
        values = _pairs("constant_values", values, nd)
        for axis, ((b, a), (vb, va)) in enumerate(zip(widths, values)):
            parts = [_block(x, axis, b, vb)] if b else []
            parts.append(x)
            if a:
                parts.append(_block(x, axis, a, va))
            x = lax.concatenate(parts, axis) if len(parts) > 1 else x
        return x
    if mode == "linear_ramp":
        ends = _pairs("end_values", kwargs.get("end_values", 0), nd)
    elif mode in ("maximum", "minimum", "mean", "median"):
        lengths = _pairs("stat_length", kwargs.get("stat_length"), nd, allow_none=True)
    odd = kwargs.get("reflect_type", "even") == "odd"
    for axis, (b, a) in enumerate(widths):
        if not (b or a):
            continue
        if x.aval.shape[axis] == 0:
            raise ValueError(f"jnp.pad: can't extend empty axis {axis} using modes other "
                             "than 'constant' or 'empty'")
        if mode == "edge":
            x = _edge(x, b, a, axis)
        elif mode in ("reflect", "symmetric"):
            x = _reflect(x, b, a, axis, mode == "symmetric", odd)
        elif mode == "wrap":
            x = _wrap(x, b, a, axis)
        elif mode == "linear_ramp":
            x = _linear_ramp(x, b, a, axis, ends[axis])
        else:
            fn = {"maximum": red.max, "minimum": red.min, "mean": red.mean,
                  "median": median}[mode]
            x = _stat(x, b, a, axis, fn, lengths[axis])
    return x
