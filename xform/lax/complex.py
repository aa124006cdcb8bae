"""Complex-number primitives: complex, real, imag, conj.

All four are linear over the reals. As in JAX, cotangents are plain transposes (no
implicit conjugation): ``vjp`` of a function ``C -> R`` at ``z`` gives
``df/dx - i df/dy``, the conjugate of the steepest-ascent direction, so
``grad(f)(z)`` is the conjugate of what a gradient step should follow.
"""
import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import (broadcasting_shape, check_dtype, check_same_dtypes,
                             standard_primitive, unop)
from xform.lax.elementwise import _unbroadcast, neg

hlo = mlir.hlo

_complex_parts = frozenset({dtypes.float32, dtypes.float64})
_complex_of = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}
_part_of = {v: k for k, v in _complex_of.items()}


def _zeros_scalar(dtype):
    return np.zeros((), dtype)


def complex(x, y):
    r"""Elementwise complex number :math:`x + i y` from real and imaginary parts.

    Args:
      x, y: float32 or float64 arrays of the same dtype
        (rank-0 operands and size-1 axes broadcast).

    Returns:
      complex64 (from float32) or complex128 (from float64).

    >>> import numpy as np, xform.lax as lax
    >>> print(lax.complex(np.float32(1), np.float32(2)))
    (1+2j)
    """
    return complex_p.bind(x, y)


def _complex_abstract_eval(x, y):
    check_dtype("complex", x.dtype, _complex_parts)
    check_dtype("complex", y.dtype, _complex_parts)
    check_same_dtypes("complex", x, y)
    return ShapedArray(broadcasting_shape("complex", x, y), _complex_of[x.dtype],
                       x.weak_type and y.weak_type)


def _complex_transpose(ct, x, y):
    # <ct, x + i y> = Re(ct) x - Im(ct) y in the real pairing JAX uses (no conjugate).
    return [_unbroadcast(x.aval, real(ct)) if ad.is_undefined_primal(x) else None,
            _unbroadcast(y.aval, neg(imag(ct))) if ad.is_undefined_primal(y) else None]


complex_p = standard_primitive("complex", _complex_abstract_eval)
ad.deflinear(complex_p, _complex_transpose)
batching.defbroadcasting(complex_p)
mlir.register_lowering(complex_p, mlir.elementwise(hlo.complex))


def real(x):
    r"""Elementwise real part of a complex array.

    >>> import numpy as np, xform.lax as lax
    >>> print(lax.real(np.complex64(1 + 2j)))
    1.0
    """
    return real_p.bind(x)


real_p = unop("real", dtypes.complex_dtypes, result_dtype=_part_of.__getitem__)
ad.deflinear(real_p, lambda ct, x: [complex(ct, _zeros_scalar(get_aval(ct).dtype))])
mlir.register_lowering(real_p, mlir.elementwise(hlo.real))


def imag(x):
    r"""Elementwise imaginary part of a complex array.

    >>> import numpy as np, xform.lax as lax
    >>> print(lax.imag(np.complex64(1 + 2j)))
    2.0
    """
    return imag_p.bind(x)


imag_p = unop("imag", dtypes.complex_dtypes, result_dtype=_part_of.__getitem__)
ad.deflinear(imag_p, lambda ct, x: [complex(_zeros_scalar(get_aval(ct).dtype), neg(ct))])
mlir.register_lowering(imag_p, mlir.elementwise(hlo.imag))


def conj(x):
    r"""Elementwise complex conjugate :math:`\bar x` (a real ``x`` becomes complex).

    >>> import numpy as np, xform.lax as lax
    >>> print(lax.conj(np.complex64(1 + 2j)))
    (1-2j)
    """
    return conj_p.bind(x, input_dtype=get_aval(x).dtype)


def _conj_abstract_eval(x, *, input_dtype):
    check_dtype("conj", x.dtype, _complex_parts | dtypes.complex_dtypes)
    return ShapedArray(x.shape, _complex_of.get(x.dtype, x.dtype), x.weak_type)


def _conj_transpose(ct, x, *, input_dtype):
    return [conj(ct) if dtypes.is_complex(input_dtype) else real(ct)]


def _conj_lowering(ctx, x, *, input_dtype):
    if dtypes.is_complex(input_dtype):
        return hlo.complex(hlo.real(x), hlo.negate(hlo.imag(x)))
    return hlo.complex(x, mlir.full_like_aval(0, ctx.avals_in[0]))


conj_p = standard_primitive("conj", _conj_abstract_eval)
ad.deflinear(conj_p, _conj_transpose)
batching.defvectorized(conj_p)
mlir.register_lowering(conj_p, _conj_lowering)
