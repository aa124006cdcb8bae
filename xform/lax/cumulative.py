"""Cumulative reductions along one axis: cumsum, cumprod, cummax, cummin, cumlogsumexp.

Lowered, like JAX on CPU/GPU, to a ``reduce_window`` whose window spans the whole axis
(XLA rewrites it into an efficient scan). cumsum is linear (its transpose is the
reversed cumsum); the other JVPs are, as in JAX, the JVP of a parallel prefix scan
built from slices, pads and the elementwise combiner, so ties in cummax/cummin split
the tangent the way ``lax.max``/``lax.min`` do.
"""
import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import check_dtype, inexact, numeric, standard_primitive
from xform.lax import elementwise as _ew
from xform.lax import rounding as _rounding, shapes
from xform.lax.complex import complex as _make_complex, imag as _imag, real as _real
from xform.lax import special as _special
from xform.lax.reductions import _canonical_axes, _highest, _lowest
from xform.lax.windowed import lax_body, lower_reduce_window



# ---- the parallel prefix scan (for the JVPs) ----

def _slice_axis(x, axis, start, stop, stride=1):
    shape = get_aval(x).shape
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, stop, stride
    return shapes.slice(x, starts, limits, strides)


def _interleave(a, b, axis):
    """``a``'s elements at even positions along ``axis``, ``b``'s at odd ones."""
    na, nb = get_aval(a).shape[axis], get_aval(b).shape[axis]
    n = na + nb
    cfg_a = [(0, 0, 0)] * get_aval(a).ndim
    cfg_b = list(cfg_a)
    cfg_a[axis], cfg_b[axis] = (0, n - 2 * na + 1, 1), (1, n - 2 * nb, 1)
    return _ew.add(shapes.pad(a, _ew._const(a, 0), cfg_a), shapes.pad(b, _ew._const(b, 0), cfg_b))


def associative_scan(fn, x, axis, reverse=False):
    """Inclusive scan of ``x`` along ``axis`` with a commutative, associative ``fn``.

    Combine neighbours pairwise, scan the half-length result recursively, then fill
    in the remaining positions: O(log n) depth of slices, pads and ``fn``.
    """
    n = get_aval(x).shape[axis]
    if n < 2:
        return x
    m = (n - 1) // 2            # positions filled in after the recursion, minus one
    if not reverse:             # pairs (0, 1), (2, 3), ...: odd[k] is the prefix at 2k+1
        odd = associative_scan(fn, fn(_slice_axis(x, axis, 0, n - 1, 2),
                                      _slice_axis(x, axis, 1, n, 2)), axis)
        even = fn(_slice_axis(odd, axis, 0, m), _slice_axis(x, axis, 2, n, 2))
        even = shapes.concatenate([_slice_axis(x, axis, 0, 1), even], axis)
        return _interleave(even, odd, axis)
    s = n % 2                   # pairs (s, s+1), (s+2, s+3), ...: aligned to the end
    odd = associative_scan(fn, fn(_slice_axis(x, axis, s, n - 1, 2),
                                  _slice_axis(x, axis, s + 1, n, 2)), axis, True)
    rest = fn(_slice_axis(x, axis, 1 - s, n - 1, 2), _slice_axis(odd, axis, 1 - s, 1 - s + m))
    rest = shapes.concatenate([rest, _slice_axis(x, axis, n - 1, n)], axis)
    return _interleave(odd, rest, axis) if s == 0 else _interleave(rest, odd, axis)


# ---- the primitives ----

def _cumulative_abstract_eval(name, allowed):
    def rule(x, *, axis, reverse):
        check_dtype(name, x.dtype, allowed)
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: axis {axis} is out of bounds for array of shape "
                             f"{x.shape}")
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return rule


def _cumulative_batch(prim):
    def rule(vals, dims, *, axis, reverse):
        (x,), (d,) = vals, dims
        return prim.bind(x, axis=axis + (d <= axis), reverse=reverse), d
    return rule


def _cumulative_lowering(combine, identity):
    def rule(ctx, x, *, axis, reverse):
        shape = ctx.avals_in[0].shape
        if shape[axis] == 0:
            return x
        ones = [1] * len(shape)
        window, padding = list(ones), [(0, 0)] * len(shape)
        window[axis] = shape[axis]
        padding[axis] = (0, shape[axis] - 1) if reverse else (shape[axis] - 1, 0)
        dt = ctx.avals_in[0].dtype
        return lower_reduce_window(ctx, [x], [identity(dt)], lax_body(ctx, combine, dt),
                                   window, ones, padding, ones, ones)[0]
    return rule


def _scan_jvp(prim, fn):
    def jvp(primals, tangents, *, axis, reverse):
        (x,), (t,) = primals, tangents
        _, (t_out,) = ad.jvp_flat(lambda v: [associative_scan(fn, v, axis, reverse)],
                                  [x], [t])
        return prim.bind(x, axis=axis, reverse=reverse), t_out
    return jvp


def _cumulative(name, combine, identity, doc, allowed=numeric):
    prim = standard_primitive(name, _cumulative_abstract_eval(name, allowed))
    batching.primitive_batchers[prim] = _cumulative_batch(prim)
    mlir.register_lowering(prim, _cumulative_lowering(combine, identity))

    def wrapper(operand, axis=0, reverse=False):
        ndim = get_aval(operand).ndim
        (axis,) = _canonical_axes((axis,), ndim, name) if ndim else (int(axis),)
        return prim.bind(operand, axis=axis, reverse=bool(reverse))
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = doc
    return prim, wrapper


cumsum_p, cumsum = _cumulative("cumsum", _ew.add, lambda dt: 0, """\
Cumulative sum along ``axis`` (from the end if ``reverse``).

    >>> cumsum(jnp.array([1., 2., 3.]), reverse=True)
    Array([6., 5., 3.], dtype=float32)
    """)
ad.deflinear(cumsum_p, lambda ct, x, *, axis, reverse: [
    cumsum_p.bind(ct, axis=axis, reverse=not reverse)])

cumprod_p, cumprod = _cumulative("cumprod", _ew.mul, lambda dt: 1, """\
Cumulative product along ``axis`` (from the end if ``reverse``).

    >>> cumprod(jnp.array([1., 2., 3.]))
    Array([1., 2., 6.], dtype=float32)
    """)
ad.primitive_jvps[cumprod_p] = _scan_jvp(cumprod_p, _ew.mul)

cummax_p, cummax = _cumulative("cummax", _ew.max, _lowest, """\
Cumulative maximum along ``axis`` (from the end if ``reverse``).

    >>> cummax(jnp.array([1., 3., 2.]))
    Array([1., 3., 3.], dtype=float32)
    """)
ad.primitive_jvps[cummax_p] = _scan_jvp(cummax_p, _ew.max)

cummin_p, cummin = _cumulative("cummin", _ew.min, _highest, """\
Cumulative minimum along ``axis`` (from the end if ``reverse``).

    >>> cummin(jnp.array([2., 3., 1.]))
    Array([2., 2., 1.], dtype=float32)
    """)
ad.primitive_jvps[cummin_p] = _scan_jvp(cummin_p, _ew.min)


def _logaddexp(x, y):
    """JAX's ``logaddexp`` formula (its cumlogsumexp combiner): for reals max +
    log1p(exp(-|x - y|)), x + y where x - y is NaN (NaNs, or like-signed infinities); for
    complex (ordered lexicographically by max) max + log1p(exp(x + y - 2 max)) with the
    imaginary part wrapped into [-pi, pi]."""
    amax = _ew.max(x, y)
    if not dtypes.is_complex(get_aval(x).dtype):
        delta = _ew.sub(x, y)
        return _ew.select(_ew.ne(delta, delta), _ew.add(x, y), _ew.add(
            amax, _special.log1p(_ew.exp(_ew.neg(_ew.abs(delta))))))
    out = _ew.add(amax, _special.log1p(_ew.exp(_ew.sub(_ew.add(x, y), _ew.add(amax, amax)))))
    im = _imag(out)
    pi, two_pi = _ew._const(im, np.pi), _ew._const(im, 2 * np.pi)
    r = _rounding.rem(_ew.add(im, pi), two_pi)
    r = _ew.select(_ew.lt(r, _ew._const(im, 0)), _ew.add(r, two_pi), r)
    return _make_complex(_real(out), _ew.sub(r, pi))


cumlogsumexp_p, cumlogsumexp = _cumulative("cumlogsumexp", _logaddexp,
                                           lambda dt: -np.inf, """\
Cumulative ``log(sum(exp(x)))`` along ``axis`` (from the end if ``reverse``), computed
    stably (``logaddexp`` as the window's combiner).

    >>> cumlogsumexp(jnp.array([0., 0., 0.]))
    Array([0.       , 0.6931472, 1.0986123], dtype=float32)
    """, allowed=inexact)
ad.primitive_jvps[cumlogsumexp_p] = _scan_jvp(cumlogsumexp_p, _logaddexp)
