"""``xform.scipy.signal``: N-d convolution and correlation (direct, as one XLA convolution,
or through FFTs) with ``jax.scipy.signal``'s semantics, and (from ``_spectral``)
``detrend`` and the windowed-FFT estimators ``stft``, ``istft``, ``csd``, ``welch``.

NB: as in JAX, only ``boundary='fill', fillvalue=0`` is supported by the 2-D functions."""
import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.numpy import _util
from xform.scipy._spectral import csd, detrend, istft, stft, welch  # noqa: F401
from xform.transforms.vmap import vmap

_MODES = ("full", "same", "valid")


def _inexact(name, *xs):
    return _util.promote_dtypes(name, *xs, to="inexact")


def fftconvolve(in1, in2, mode="full", axes=None):
    """N-d convolution through FFTs, as ``scipy.signal.fftconvolve``; ``axes`` picks the
    convolved axes (the others are mapped over and must match).

    >>> xform.scipy.signal.fftconvolve(jnp.array([1., 2.]), jnp.array([1., 1.]))
    Array([1., 3., 2.], dtype=float32)
    """
    in1, in2 = _inexact("fftconvolve", in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    if mode not in _MODES:
        raise ValueError("mode must be one of ['same', 'full', 'valid']")

    def conv(a, b):
        return _fftconvolve_unbatched(a, b, mode)
    if axes is None:
        return conv(in1, in2)
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    axes = tuple(_util.canonicalize_axis(ax, in1.ndim) for ax in axes)
    mapped = set(range(in1.ndim)) - set(axes)
    if any(in1.shape[i] != in2.shape[i] for i in mapped):
        raise ValueError(f"mapped axes must have same shape; got in1.shape={in1.shape} "
                         f"in2.shape={in2.shape} axes={axes}")
    for ax in sorted(mapped):
        conv = vmap(conv, in_axes=ax, out_axes=ax)
    return conv(in1, in2)


def _fftconvolve_unbatched(in1, in2, mode):
    full_shape = tuple(s1 + s2 - 1 for s1, s2 in zip(in1.shape, in2.shape))
    if mode == "valid":
        no_swap = all(s1 >= s2 for s1, s2 in zip(in1.shape, in2.shape))
        swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
        if not (no_swap or swap):
            raise ValueError("For 'valid' mode, One input must be at least as large as the "
                             "other in every dimension.")
        if swap:
            in1, in2 = in2, in1
    if all(s1 == 1 or s2 == 1 for s1, s2 in zip(in1.shape, in2.shape)):
        conv = in1 * in2
    else:
        complex_in = jnp.iscomplexobj(in1)
        fft = jnp.fft.fftn if complex_in else jnp.fft.rfftn
        ifft = jnp.fft.ifftn if complex_in else jnp.fft.irfftn
        conv = ifft(fft(in1, full_shape) * fft(in2, full_shape), full_shape)
    out_shape = {"full": full_shape, "same": in1.shape,
                 "valid": tuple(s1 - s2 + 1 for s1, s2 in zip(in1.shape, in2.shape))}[mode]
    start = tuple((f - o) // 2 for f, o in zip(full_shape, out_shape))
    return lax.dynamic_slice(conv, start, out_shape)


def _convolve_nd(in1, in2, mode, precision):
    if mode not in _MODES:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    in1, in2 = _util.asarray(in1, "convolve", 0), _util.asarray(in2, "convolve", 1)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 must have the same number of dimensions")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"zero-size arrays not supported in convolutions, got shapes "
                         f"{in1.shape} and {in2.shape}.")
    in1, in2 = _inexact("convolve", in1, in2)
    no_swap = all(s1 >= s2 for s1, s2 in zip(in1.shape, in2.shape))
    swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    if not (no_swap or swap):
        raise ValueError("One input must be smaller than the other in every dimension.")
    shape_o = in2.shape
    if swap:
        in1, in2 = in2, in1
    shape = in2.shape
    in2 = jnp.flip(in2)
    if mode == "valid":
        padding = [(0, 0)] * len(shape)
    elif mode == "same":
        padding = [(s - 1 - (so - 1) // 2, s - so + (so - 1) // 2)
                   for s, so in zip(shape, shape_o)]
    else:
        padding = [(s - 1, s - 1) for s in shape]
    out = lax.conv_general_dilated(in1[None, None], in2[None, None], (1,) * len(shape),
                                   padding, precision=precision)
    return out[0, 0]


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """N-d convolution, as ``scipy.signal.convolve`` (``method``: "auto"/"direct" is one
    XLA convolution, "fft" is :func:`fftconvolve`).

    >>> xform.scipy.signal.convolve(jnp.array([1., 2., 3.]), jnp.array([0., 1.]), "same")
    Array([0., 1., 2.], dtype=float32)
    """
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method in ("direct", "auto"):
        return _convolve_nd(in1, in2, mode, precision)
    raise ValueError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")


def _check_2d(name, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs.")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """2-D convolution, as ``scipy.signal.convolve2d`` (zero fill only)."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd(in1, in2, mode, precision)


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """N-d cross-correlation, as ``scipy.signal.correlate``: convolution with the flipped
    conjugate of ``in2``."""
    in2 = _util.asarray(in2, "correlate", 1)
    return convolve(in1, jnp.flip(jnp.conj(in2)), mode, precision=precision, method=method)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """2-D cross-correlation, as ``scipy.signal.correlate2d`` (zero fill only)."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in1, in2 = _util.asarray(in1, "correlate2d", 0), _util.asarray(in2, "correlate2d", 1)
    swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    same_shape = in1.shape == in2.shape
    if mode == "same" or (mode == "valid" and not (swap and not same_shape)) or (
            mode not in ("same", "valid") and not swap):
        return jnp.flip(_convolve_nd(jnp.flip(in1), jnp.conj(in2), mode, precision))
    out = _convolve_nd(jnp.flip(in2), jnp.conj(in1), mode, precision)
    return out if mode == "valid" else jnp.conj(out)
