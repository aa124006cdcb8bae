"""Op-table rows of the fft primitive (xform/lax/fft.py): FFT/IFFT/RFFT/IRFFT over
1 to 3 trailing dimensions. Complex results are differentiated through real/imag/complex
wrappers (check_grads needs real arrays at both ends)."""
from optable import C64, F32, domains, rec


def _fft(fft_type, lengths):
    return lambda L, x: L.fft(x, fft_type, lengths)


def _real_to_real(fft_type, lengths, n_half=None):
    """A real-to-real function through a complex fft: complex input from two real
    halves of ``x``'s last axis, real output as real and imaginary parts."""
    def call(L, x):
        z = x if fft_type == "RFFT" else L.complex(x, L.mul(x, x))
        y = L.fft(z, fft_type, lengths)
        if fft_type == "IRFFT":
            return y
        return L.add(L.real(y), L.mul(L.imag(y), L.imag(y)))
    return call


RECORDS = [
    rec("fft_fft", 1, (C64,), [((3, 8),)], domains("real"), None, call=_fft("FFT", (8,))),
    rec("fft_ifft_2d", 1, (C64,), [((2, 4, 6),)], domains("real"), None,
        call=_fft("IFFT", (4, 6))),
    rec("fft_fft_3d", 1, (C64,), [((2, 3, 4),)], domains("real"), None,
        call=_fft("FFT", (2, 3, 4))),
    rec("fft_rfft", 1, (F32,), [((3, 8),), ((7,),)], domains("real"), None,
        call=lambda L, x: L.fft(x, "RFFT", x.shape[-1:])),
    rec("fft_rfft_2d", 1, (F32,), [((2, 4, 5),)], domains("real"), None,
        call=_fft("RFFT", (4, 5))),
    rec("fft_irfft", 1, (C64,), [((3, 5),)], domains("real"), None, call=_fft("IRFFT", (8,))),
    rec("fft_irfft_odd", 1, (C64,), [((2, 3, 4),)], domains("real"), None,
        call=_fft("IRFFT", (3, 7))),
    rec("fft_grad_fft", 1, (F32,), [((2, 6),)], domains("real"), 2,
        call=_real_to_real("FFT", (6,))),
    rec("fft_grad_ifft", 1, (F32,), [((3, 4),)], domains("real"), 1,
        call=_real_to_real("IFFT", (3, 4))),
    rec("fft_grad_rfft", 1, (F32,), [((2, 7),)], domains("real"), 2,
        call=_real_to_real("RFFT", (7,))),
    rec("fft_grad_irfft", 1, (F32,), [((2, 5),)], domains("real"), 2,
        call=_real_to_real("IRFFT", (8,))),
    rec("fft_grad_irfft_odd", 1, (F32,), [((4,),)], domains("real"), 1,
        call=_real_to_real("IRFFT", (7,))),
]
