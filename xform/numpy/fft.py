"""``xform.numpy.fft``: NumPy's FFT API over the ``lax.fft`` primitive, with JAX's
dtypes (complex64 by default, complex128 under x64) and ``norm`` conventions
("backward", "ortho", "forward").

>>> import xform.numpy as jnp
>>> jnp.fft.rfft(jnp.array([1.0, 2.0, 3.0, 4.0]))
Array([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex64)
"""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.lax.fft import FftType
from xform.numpy import _util
from xform.numpy._creation import arange, array
from xform.numpy._creation import asarray as _creation_asarray
from xform.numpy._manip import roll
from xform.numpy._ufuncs import true_divide
from xform.numpy._pad import pad
from xform.numpy._shape import moveaxis
from xform.numpy._util import asarray
from xform.numpy._math import conjugate

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
           "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]


def _complex_dtype(dt):
    return dtypes.complex128 if dt in (dtypes.float64, dtypes.complex128) \
        else dtypes.complex64


def _operand(name, a, fft_type):
    a = asarray(a, name)
    dt = dtypes.to_inexact_dtype(a.aval.dtype)   # (int64 under x64: float64, as JAX's)
    if fft_type == FftType.RFFT:
        if dtypes.is_complex(dt):
            raise ValueError(f"only real valued inputs supported for rfft (jnp.fft.{name})")
        real = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
        return lax.convert_element_type(a, real)
    return lax.convert_element_type(a, _complex_dtype(dt))


def _norm(out, s, name, norm):
    if norm is None or norm == "backward":
        return out
    n = float(np.prod(s))
    inverse = name.startswith("i")
    if norm == "ortho":
        factor = np.sqrt(n) if inverse else 1 / np.sqrt(n)
    elif norm == "forward":
        factor = n if inverse else 1 / n
    else:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         '"forward".')
    real = np.dtype(dtypes.finfo(out.aval.dtype).dtype)
    return lax.mul(out, lax.convert_element_type(_util.scalar_array(factor, real, False),
                                                 out.aval.dtype))


def _fft_core(name, fft_type, a, s, axes, norm):
    a = _operand(name, a, fft_type)
    if s is not None:
        s = tuple(operator.index(x) for x in s)
        if any(x <= 0 for x in s):  # (as JAX's and NumPy's: no FFT of length 0)
            raise ValueError("Shape should be positive.")
        if axes is not None and len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    nd = a.aval.ndim
    orig_axes = axes
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(_util.canonicalize_axis(ax, nd) for ax in axes)
    if len(axes) != len(set(axes)):
        raise ValueError(f"jax.numpy.fft.{name} does not support repeated axes. Got axes "
                         f"{orig_axes}.")
    if len(axes) > 3:
        raise ValueError(f"jax.numpy.fft.{name} only supports 1D, 2D, and 3D FFTs. Got "
                         f"axes {orig_axes} with input rank {nd}.")
    if not axes:
        return a
    last = tuple(range(nd - len(axes), nd))
    a = moveaxis(a, axes, last)
    if s is not None:
        in_s = list(a.aval.shape)
        for ax, x in zip(last, s):
            in_s[ax] = x
        if fft_type == FftType.IRFFT:
            in_s[-1] = in_s[-1] // 2 + 1
        a = lax.slice(a, (0,) * nd, tuple(min(x, y) for x, y in zip(in_s, a.aval.shape)))
        a = pad(a, [(0, x - y) for x, y in zip(in_s, a.aval.shape)])
    elif fft_type == FftType.IRFFT:
        s = [a.aval.shape[ax] for ax in last[:-1]] + [max(0, 2 * (a.aval.shape[-1] - 1))]
    else:
        s = [a.aval.shape[ax] for ax in last]
    if not a.aval.size:  # nothing to transform: an empty result of the output type
        shape = a.aval.shape[:nd - len(s)] + tuple(s)
        if fft_type == FftType.RFFT:
            if not shape[-1]:  # (NumPy's error; JAX's lowering fails)
                raise ValueError(f"jax.numpy.fft.{name}: invalid number of data points (0)")
            shape = shape[:-1] + (shape[-1] // 2 + 1,)
        real = np.dtype(dtypes.finfo(a.aval.dtype).dtype)
        dt = {FftType.RFFT: _complex_dtype(real), FftType.IRFFT: real}.get(fft_type,
                                                                         a.aval.dtype)
        return moveaxis(lax.full(shape, 0, dt), last, axes)
    out = _norm(lax.fft(a, fft_type, tuple(s)), s, name, norm)
    return moveaxis(out, last, axes)


def _axis_1d(name, axis):
    if isinstance(axis, (list, tuple)):
        raise ValueError(f"jax.numpy.fft.{name} does not support multiple axes. Please "
                         f"use jax.numpy.fft.{name}n. Got axis = {list(axis)}.")


def _core_1d(name, fft_type, a, n, axis, norm):
    _axis_1d(name, axis)
    return _fft_core(name, fft_type, a, None if n is None else [n], [axis], norm)


def fft(a, n=None, axis=-1, norm=None):
    """Like numpy.fft.fft: the 1-D discrete Fourier transform along ``axis`` (cropped or
    zero-padded to ``n``)."""
    return _core_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """Like numpy.fft.ifft: the inverse of :func:`fft`."""
    return _core_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    """Like numpy.fft.rfft: the FFT of real input (non-negative frequencies only)."""
    return _core_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """Like numpy.fft.irfft: the inverse of :func:`rfft` (``n`` real outputs, by
    default ``2 * (m - 1)``)."""
    return _core_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """Like numpy.fft.hfft: the FFT of a Hermitian-symmetric signal (real output)."""
    _axis_1d("hfft", axis)
    a = conjugate(asarray(a, "hfft"))
    nn = (a.aval.shape[axis] - 1) * 2 if n is None else n
    out = _core_1d("hfft", FftType.IRFFT, a, n, axis, norm)
    return lax.mul(out, _util.scalar_array(nn, out.aval.dtype, False))


def ihfft(a, n=None, axis=-1, norm=None):
    """Like numpy.fft.ihfft: the inverse of :func:`hfft`."""
    _axis_1d("ihfft", axis)
    a = _creation_asarray(a)   # (JAX's ihfft takes lists: jnp.asarray, not a check)
    nn = a.aval.shape[axis] if n is None else n
    out = conjugate(_core_1d("ihfft", FftType.RFFT, a, n, axis, norm))
    real = np.dtype(dtypes.finfo(out.aval.dtype).dtype)
    return lax.mul(out, lax.convert_element_type(_util.scalar_array(1 / nn, real, False),
                                                 out.aval.dtype))


def fftn(a, s=None, axes=None, norm=None):
    """Like numpy.fft.fftn (over at most 3 axes)."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    """Like numpy.fft.ifftn."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """Like numpy.fft.rfftn."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """Like numpy.fft.irfftn."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def _axes_2d(name, axes):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{name} only supports 2 axes. Got axes = {axes}.")


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """Like numpy.fft.fft2."""
    _axes_2d("fft2", axes)
    return _fft_core("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """Like numpy.fft.ifft2."""
    _axes_2d("ifft2", axes)
    return _fft_core("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """Like numpy.fft.rfft2."""
    _axes_2d("rfft2", axes)
    return _fft_core("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """Like numpy.fft.irfft2."""
    _axes_2d("irfft2", axes)
    return _fft_core("irfft2", FftType.IRFFT, a, s, axes, norm)


def _freq_args(name, n, d):
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{name} only takes an int. "
                         f"Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{name} only takes a single "
                         f"value. Got d = {list(d)}.")
    return operator.index(n)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """Like numpy.fft.fftfreq: the sample frequencies ``[0, 1, ..., -1] / (d n)``."""
    n = _freq_args("fftfreq", n, d)
    out_dt = _util.user_dtype(dtype) or dtypes.default_float_dtype()
    dt = np.dtype(dtypes.finfo(dtypes.to_inexact_dtype(out_dt)).dtype)
    k = (np.arange(n) + n // 2) % max(n, 1) - n // 2
    out = lax.div(lax.convert_element_type(asarray(k.astype(np.int32)), dt),
                  _util.scalar_array(d * n, dt, False))
    return lax.convert_element_type(out, out_dt)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """Like numpy.fft.rfftfreq: the non-negative sample frequencies."""
    n = _freq_args("rfftfreq", n, d)
    dt = _util.user_dtype(dtype) or dtypes.default_float_dtype()
    # JAX's arange(dtype) / array(d * n, dtype): a true division, so integer dtypes give
    # floats (d * n truncated to the integer dtype first)
    k = arange(n // 2 + 1, dtype=dt)
    return true_divide(k, array(d * n, dtype=dt))


def _shift(name, x, axes, sign):
    x = asarray(x, name)
    if axes is None:
        axes = tuple(range(x.aval.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    shape = x.aval.shape
    shifts = [sign * (shape[ax] // 2) for ax in axes]
    return roll(x, shifts, axes) if axes else x


def fftshift(x, axes=None):
    """Like numpy.fft.fftshift: the zero frequency moved to the center."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """Like numpy.fft.ifftshift: the inverse of :func:`fftshift`."""
    return _shift("ifftshift", x, axes, -1)
