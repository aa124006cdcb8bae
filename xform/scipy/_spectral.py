"""``scipy.signal``'s detrending and windowed-FFT estimators (``detrend``, ``stft``,
``istft``, ``csd``, ``welch``) with ``jax.scipy.signal``'s semantics; re-exported by
:mod:`xform.scipy.signal`.

Segments are read with one gather (``x[..., starts[:, None] + arange(nperseg)]``) where
JAX vmaps a dynamic_slice; ``istft``'s overlap-add is one scatter-add where JAX reshapes
and sums. Both agree with JAX's to rounding."""
import operator
import warnings

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.numpy import _util


def _inexact(name, *xs):
    return _util.promote_dtypes(name, *xs, to="inexact")


def _static_int(v, what):
    return operator.index(_util.concrete_or_error(v, what, "scipy.signal")[()].item())


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """Remove the mean ("constant") or a least-squares line per segment between
    breakpoints ``bp`` ("linear") along ``axis``, as ``scipy.signal.detrend``.

    >>> xform.scipy.signal.detrend(jnp.array([1., 2., 6.]), type="constant")
    Array([-2., -1.,  3.], dtype=float32)
    """
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    x, = _inexact("detrend", jnp.asarray(data))
    if type == "constant":
        return x - x.mean(axis, keepdims=True)
    axis = _util.canonicalize_axis(operator.index(axis), x.ndim)
    n = x.shape[axis]
    bps = np.sort(np.unique(np.r_[0, bp, n]))
    if bps[0] < 0 or bps[-1] > n:
        raise ValueError("Breakpoints must be non-negative and less than length of data "
                         "along given axis.")
    x = jnp.moveaxis(x, axis, 0)
    shape = x.shape
    x = x.reshape(n, -1)
    for lo, hi in zip(bps[:-1], bps[1:]):
        m = int(hi - lo)
        a = jnp.stack([jnp.ones(m, x.dtype), jnp.arange(1, m + 1, dtype=x.dtype) / m], 1)
        coef = jnp.linalg.lstsq(a, x[lo:hi])[0]
        x = x.at[lo:hi].add(-jnp.matmul(a, coef, precision=lax.Precision.HIGHEST))
    return jnp.moveaxis(x.reshape(shape), 0, axis)


def _hann_or_scipy(window, n, dtype):
    if window == "hann":   # the default, without SciPy
        win = jnp.array([1.0]) if n == 1 else jnp.sin(
            jnp.linspace(0, np.pi, n, endpoint=False)) ** 2
        return win.astype(dtype)
    try:
        from scipy.signal import get_window
    except ImportError as err:
        raise ImportError(f"scipy must be available to use window={window!r}") from err
    return jnp.array(get_window(window, n), dtype=dtype)


def _window(window, nperseg, input_length, dtype):
    """(the window array, nperseg), from a window name/tuple or array, as SciPy's."""
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else int(nperseg)
        if n > input_length:
            warnings.warn(f"nperseg={n} is greater than input_length={input_length}, "
                          f"using nperseg={input_length}")
            n = input_length
        return _hann_or_scipy(window, n, dtype), n
    win = jnp.asarray(window, dtype=dtype)
    n = win.size if nperseg is None else int(nperseg)
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    if input_length < win.size:
        raise ValueError("window is longer than input signal")
    if n != win.size:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, n


def _odd_ext(x, n):
    """``x`` extended by ``n`` points at each end, odd about the end points (last axis)."""
    if n < 1:
        return x
    if n > x.shape[-1] - 1:
        raise ValueError(f"The extension length n ({n}) is too big. It must not exceed "
                         f"x.shape[axis]-1, which is {x.shape[-1] - 1}.")
    left = 2 * x[..., :1] - jnp.flip(x[..., 1:n + 1], -1)
    right = 2 * x[..., -1:] - jnp.flip(x[..., -(n + 1):-1], -1)
    return jnp.concatenate([left, x, right], -1)


def _pad_last(mode, **kw):
    return lambda x, n: jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)], mode, **kw)


_BOUNDARY = {"even": _pad_last("reflect"), "odd": _odd_ext, "constant": _pad_last("edge"),
             "zeros": _pad_last("constant", constant_values=0.0), None: lambda x, n: x}


def _segments_fft(x, win, detrend_func, nperseg, noverlap, nfft, sides):
    """The windowed FFT of each segment of the last axis: (..., segments, freqs)."""
    starts = np.arange(0, x.shape[-1] - nperseg + 1, nperseg - noverlap)
    frames = detrend_func(x[..., starts[:, None] + np.arange(nperseg)])
    if jnp.iscomplexobj(win):
        frames = frames.astype(jnp.result_type(frames, win))
    frames = win * frames
    return jnp.fft.fft(frames, n=nfft) if sides == "twosided" else jnp.fft.rfft(
        jnp.real(frames), n=nfft)


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend_type, return_onesided,
              scaling, axis, mode, boundary=None, padded=False):
    """(freqs, segment times, spectrum) shared by stft (mode "stft") and csd/welch
    ("psd"; the cross spectrum when ``y`` is given), as SciPy's _spectral_helper."""
    if mode not in ("psd", "stft"):
        raise ValueError(f"Unknown value for mode {mode}, must be one of: ('psd', 'stft')")
    if boundary not in _BOUNDARY:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"{list(_BOUNDARY)}")
    axis = operator.index(axis)
    if y is None:
        x, = _inexact("spectral_helper", x)
        axis = _util.canonicalize_axis(axis, x.ndim)
        outer = x.shape[:axis] + x.shape[axis + 1:]
    else:
        if mode != "psd":
            raise ValueError("two-argument mode is available only when mode=='psd'")
        x, y = _inexact("spectral_helper", x, y)
        if x.ndim != y.ndim:
            raise ValueError(f"two-arguments must have the same rank ({x.ndim} vs {y.ndim}).")
        axis = _util.canonicalize_axis(axis, x.ndim)
        try:
            outer = jnp.broadcast_shapes(x.shape[:axis] + x.shape[axis + 1:],
                                         y.shape[:axis] + y.shape[axis + 1:])
        except ValueError as err:
            raise ValueError("x and y cannot be broadcast together.") from err
    result_dtype = jnp.result_type(x.dtype, np.complex64)
    freq_dtype = np.finfo(result_dtype).dtype
    if nperseg is not None:
        nperseg = _static_int(nperseg, "nperseg")
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    win, nperseg = _window(window, nperseg, x.shape[axis], x.dtype)
    noverlap = nperseg // 2 if noverlap is None else _static_int(noverlap, "noverlap")
    nfft = nperseg if nfft is None else _static_int(nfft, "nfft")
    if x.size == 0 or (y is not None and y.size == 0):
        n = x.shape[axis] if y is None else min(x.shape[axis], y.shape[axis])
        shape = x.shape if y is None else outer[:axis] + (n,) + outer[axis:]
        return (jnp.zeros(shape, freq_dtype), jnp.zeros(shape, freq_dtype),
                jnp.zeros(shape, result_dtype))
    x = jnp.moveaxis(x, axis, -1)
    if y is not None:
        y = jnp.moveaxis(y, axis, -1) if y.ndim > 1 else y
        n = max(x.shape[-1], y.shape[-1])   # zero-pad the shorter one
        x, y = (jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, n - v.shape[-1])]) for v in (x, y))
    if nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    nstep = nperseg - noverlap
    ext = _BOUNDARY[boundary]
    x = ext(x, nperseg // 2) if boundary is not None else x
    y = ext(y, nperseg // 2) if boundary is not None and y is not None else y
    if padded:
        nadd = (-(x.shape[-1] - nperseg) % nstep) % nperseg
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nadd)])
        y = None if y is None else jnp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, nadd)])
    if isinstance(detrend_type, str):
        detrend_func = lambda d: detrend(d, type=detrend_type, axis=-1)  # noqa: E731
    elif callable(detrend_type):   # (as JAX: the canonical axis is never -1, so it moves)
        detrend_func = lambda d: jnp.moveaxis(  # noqa: E731
            detrend_type(jnp.moveaxis(d, axis, -1)), -1, axis)
    elif not detrend_type:
        detrend_func = lambda d: d  # noqa: E731
    else:
        raise ValueError(f"Unsupported detrend type: {detrend_type}")
    if scaling == "density":
        scale = 1.0 / (fs * (win * win).sum())
    elif scaling == "spectrum":
        scale = 1.0 / win.sum() ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling}")
    scale = jnp.sqrt(scale) if mode == "stft" else scale
    sides = "onesided" if return_onesided else "twosided"
    if return_onesided and (jnp.iscomplexobj(x) or (y is not None and jnp.iscomplexobj(y))):
        sides = "twosided"
        warnings.warn("Input data is complex, switching to return_onesided=False")
    freqs = (jnp.fft.fftfreq if sides == "twosided" else jnp.fft.rfftfreq)(
        nfft, 1 / fs, dtype=freq_dtype)
    result = _segments_fft(x, win, detrend_func, nperseg, noverlap, nfft, sides)
    if y is not None:
        result = jnp.conj(result) * _segments_fft(y, win, detrend_func, nperseg, noverlap,
                                                  nfft, sides)
    elif mode == "psd":
        result = jnp.conj(result) * result
    result = result * scale.astype(result_dtype)
    if sides == "onesided" and mode == "psd":   # fold the negative frequencies in
        result = result.at[..., 1:None if nfft % 2 else -1].multiply(2)
    time = jnp.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, nstep, dtype=freq_dtype) / fs
    if boundary is not None:
        time = time - (nperseg / 2) / fs
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = jnp.real(result)
    return freqs, time, jnp.moveaxis(result, -1, axis)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """The short-time Fourier transform, as ``scipy.signal.stft``.

    Returns:
      (frequencies, segment times, STFT of shape (..., freqs, times) along ``axis``).

    >>> f, t, z = xform.scipy.signal.stft(jnp.ones(16), nperseg=8)
    >>> f.shape, t.shape, z.shape, z.dtype
    ((5,), (5,), (5, 5), dtype('complex64'))
    """
    return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     "spectrum", axis, "stft", boundary, padded)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1,
        average="mean"):
    """The cross power spectral density by Welch's method, as ``scipy.signal.csd``:
    segment periodograms averaged by ``average`` ("mean" or "median").

    Returns:
      (frequencies, Pxy).
    """
    freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend,
                              return_onesided, scaling, axis, "psd")
    if y is not None:
        pxy = pxy + 0j   # complex even when x is y
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                ii = jnp.arange(2., pxy.shape[-1], 2)   # the median's bias vs the mean
                bias = (1 + jnp.sum(1. / (ii + 1) - 1. / ii)).astype(pxy.dtype)
                pxy = (jnp.median(jnp.real(pxy), axis=-1) + 1j * jnp.median(
                    jnp.imag(pxy), axis=-1) if jnp.iscomplexobj(pxy) else jnp.median(
                    pxy, axis=-1)) / bias
            elif average == "mean":
                pxy = pxy.mean(axis=-1)
            else:
                raise ValueError(f'average must be "median" or "mean", got {average}')
        else:
            pxy = jnp.reshape(pxy, pxy.shape[:-1])
    return freqs, pxy


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """The power spectral density by Welch's method, as ``scipy.signal.welch``.

    >>> f, p = xform.scipy.signal.welch(jnp.arange(16.) % 2, nperseg=8)
    >>> int(jnp.argmax(p)), float(f[jnp.argmax(p)])
    (4, 0.5)
    """
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap,
                     nfft=nfft, detrend=detrend, return_onesided=return_onesided,
                     scaling=scaling, axis=axis, average=average)
    return freqs, jnp.real(pxx)


def _overlap_add(frames, step):
    """Sum the (..., nframes, seglen) frames into one signal, frame i at offset i*step."""
    *batch, nframes, seglen = frames.shape
    pos = (np.arange(nframes)[:, None] * step + np.arange(seglen)).ravel()
    out = jnp.zeros((*batch, step * (nframes - 1) + seglen), frames.dtype)
    return out.at[..., pos].add(frames.reshape(*batch, nframes * seglen))


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
    """The inverse short-time Fourier transform, as ``scipy.signal.istft``.

    NB: the returned times count the samples of the time axis (JAX counts ``x.shape[0]``,
    the leading axis, which differs for batched input).

    Returns:
      (times, the signal).
    """
    Zxx = _util.asarray(Zxx, "istft")
    if Zxx.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    freq_axis = _util.canonicalize_axis(freq_axis, Zxx.ndim)
    time_axis = _util.canonicalize_axis(time_axis, Zxx.ndim)
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    Zxx = Zxx.astype(jnp.result_type(Zxx.dtype, np.complex64))
    n_default = 2 * (Zxx.shape[freq_axis] - 1) if input_onesided else Zxx.shape[freq_axis]
    nperseg = _static_int(nperseg or n_default, "nperseg")
    if nperseg < 1:
        raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft = n_default + (1 if input_onesided and nperseg == n_default + 1 else 0)
    else:
        nfft = _static_int(nfft, "nfft")
    if nfft < nperseg:
        raise ValueError(f"FFT length ({nfft}) must be longer than nperseg ({nperseg}).")
    noverlap = _static_int(noverlap or nperseg // 2, "noverlap")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    nstep = nperseg - noverlap
    outer = tuple(i for i in range(Zxx.ndim) if i not in (time_axis, freq_axis))
    Zxx = jnp.transpose(Zxx, outer + (freq_axis, time_axis))
    ifft = jnp.fft.irfft if input_onesided else jnp.fft.ifft
    xsubs = ifft(Zxx, axis=-2, n=nfft)[..., :nperseg, :]     # (..., nperseg, frames)
    if isinstance(window, (str, tuple)):
        win = _hann_or_scipy(window, nperseg, xsubs.dtype)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1:
            raise ValueError("window must be 1-D")
        if win.shape[0] != nperseg:
            raise ValueError(f"window must have length of {nperseg}")
    xsubs = xsubs * win.sum()   # undo the "spectrum" scaling
    frames = jnp.swapaxes(xsubs * win[:, None], -2, -1)
    x = _overlap_add(frames, nstep)
    norm = _overlap_add(jnp.broadcast_to(win * win, frames.shape[-2:]), nstep)
    if boundary:
        x, norm = x[..., nperseg // 2:-(nperseg // 2)], norm[nperseg // 2:-(nperseg // 2)]
    x = x / jnp.where(jnp.real(norm) > 1e-10, norm, 1.0)   # (norm is real-valued)
    n = x.shape[-1]
    if x.ndim > 1 and time_axis != Zxx.ndim - 1:
        x = jnp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    return jnp.arange(n, dtype=np.finfo(x.dtype).dtype) / fs, x
