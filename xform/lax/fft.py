"""The fft primitive: XLA's FFT over the trailing ``len(fft_lengths)`` dimensions
(1 to 3), in four types: FFT and IFFT (complex to complex), RFFT (real to the
``n // 2 + 1`` non-negative frequencies), IRFFT (back to ``n`` real values).

All four are linear. The transposes follow JAX: FFT and IFFT are symmetric matrices
(their own transposes); RFFT = FFT of the real input, sliced, so its transpose pads the
cotangent, FFTs it and keeps the real part; IRFFT's transpose is an RFFT weighted by
the multiplicity of each frequency (1 for DC and Nyquist, 2 otherwise), conjugated.
"""
import enum
import math

import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import standard_primitive
from xform.lax.complex import conj, real
from xform.lax.elementwise import convert_element_type, mul
from xform.lax.shapes import broadcast_in_dim, pad

hlo = mlir.hlo

_REAL = frozenset({dtypes.float32, dtypes.float64})
_COMPLEX = frozenset({dtypes.complex64, dtypes.complex128})
_complex_of = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}
_real_of = {v: k for k, v in _complex_of.items()}


class FftType(enum.IntEnum):
    """The transform: FFT/IFFT complex to complex, RFFT real to complex (half
    spectrum), IRFFT complex (half spectrum) to real."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


def fft(x, fft_type, fft_lengths):
    """XLA's FFT of the trailing ``len(fft_lengths)`` dimensions of ``x``.

    Args:
      x: complex64/complex128 for FFT, IFFT and IRFFT; float32/float64 for RFFT.
      fft_type: a ``FftType`` or its name ("FFT", "IFFT", "RFFT", "IRFFT").
      fft_lengths: the transform's logical sizes (1 to 3 of them). They must equal the
        trailing dimensions, except IRFFT's last input dimension, which is
        ``fft_lengths[-1] // 2 + 1``.

    Returns:
      The transform (IFFT and IRFFT are normalized by ``1 / prod(fft_lengths)``).

    Raises:
      ValueError: for a wrong dtype or dimensions that don't match ``fft_lengths``
        (JAX's type).

    >>> import numpy as np
    >>> print(fft(np.array([1.0, 0.0, 0.0, 0.0], np.float32), "RFFT", (4,)))
    [1.+0.j 1.+0.j 1.+0.j]
    """
    if isinstance(fft_type, str):
        try:
            fft_type = FftType[fft_type.upper()]
        except KeyError:
            raise ValueError(f"fft_type must be one of FFT, IFFT, RFFT, IRFFT; got "
                             f"{fft_type!r}") from None
    fft_lengths = tuple(int(n) for n in fft_lengths)
    # As JAX, the wrapper casts: RFFT to the inexact dtype, the others to complex.
    dt = dtypes.dtype(x)
    if fft_type == FftType.RFFT:
        if dtypes.is_complex(dt):
            raise ValueError("only real valued inputs supported for rfft")
        x = convert_element_type(x, dtypes.to_inexact_dtype(dt))
    elif not dtypes.is_complex(dt):
        inexact = dtypes.to_inexact_dtype(dt)
        x = convert_element_type(x, dtypes.complex128 if inexact == dtypes.float64
                                 else dtypes.complex64)
    if not fft_lengths:
        return x   # XLA has no rank-0 FFT
    return fft_p.bind(x, fft_type=FftType(fft_type), fft_lengths=fft_lengths)


def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    if not 1 <= k <= 3:
        raise ValueError(f"fft supports 1 to 3 fft_lengths, got {fft_lengths}")
    if x.ndim < k:
        raise ValueError(f"fft: operand of shape {x.shape} has fewer than "
                         f"len(fft_lengths)={k} dimensions")
    if x.dtype not in (_REAL if fft_type == FftType.RFFT else _COMPLEX):
        want = "float32 or float64" if fft_type == FftType.RFFT else "complex64 or complex128"
        raise ValueError(f"{fft_type.name} input must be {want}, got {x.dtype.name}")
    lead, tail = x.shape[:-k], x.shape[-k:]
    expected = list(fft_lengths)
    if fft_type == FftType.IRFFT:
        expected[-1] = fft_lengths[-1] // 2 + 1
    if tuple(tail) != tuple(expected):
        raise ValueError(f"fft ({fft_type.name}): the trailing dimensions {tuple(tail)} of "
                         f"the operand must be {tuple(expected)} for fft_lengths "
                         f"{fft_lengths}")
    if fft_type == FftType.RFFT:
        out = lead + tuple(fft_lengths[:-1]) + (fft_lengths[-1] // 2 + 1,)
        return ShapedArray(out, _complex_of[x.dtype], x.weak_type)
    if fft_type == FftType.IRFFT:
        return ShapedArray(lead + tuple(fft_lengths), _real_of[x.dtype], x.weak_type)
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _rfft_transpose(ct, fft_lengths):
    # rfft(x) = fft(complex(x))[..., :n//2+1]: pad, FFT (its own transpose), real part.
    aval = get_aval(ct)
    config = [(0, 0, 0)] * (aval.ndim - 1) + [(0, fft_lengths[-1] - aval.shape[-1], 0)]
    zero = np.zeros((), aval.dtype)
    return real(fft(pad(ct, zero, config), FftType.FFT, fft_lengths))


def _irfft_transpose(ct, fft_lengths):
    x = fft(ct, FftType.RFFT, fft_lengths)
    m = get_aval(x).shape[-1]
    odd = fft_lengths[-1] % 2
    weights = np.concatenate([[1.0], np.full(m - 2 + odd, 2.0), np.ones(1 - odd)])
    weights = (weights / math.prod(fft_lengths)).astype(get_aval(x).dtype)
    scale = broadcast_in_dim(weights, get_aval(x).shape, (get_aval(x).ndim - 1,))
    return conj(mul(scale, x))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    return [fft(ct, fft_type, fft_lengths)]


def _fft_batch(vals, dims, *, fft_type, fft_lengths):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return fft(x, fft_type, fft_lengths), 0


def _fft_lowering(ctx, x, *, fft_type, fft_lengths):
    aval_out, = ctx.avals_out
    op = hlo.FftOp(x, hlo.FftTypeAttr.get(fft_type.name), mlir.dense_i64(fft_lengths),
                   results=[mlir.aval_to_ir_type(aval_out)])
    return op.result


fft_p = standard_primitive("fft", _fft_abstract_eval)
ad.deflinear(fft_p, _fft_transpose)
batching.primitive_batchers[fft_p] = _fft_batch
mlir.register_lowering(fft_p, _fft_lowering)
