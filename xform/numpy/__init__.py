"""``xform.numpy``: a NumPy-compatible API over ``xform.lax`` with JAX's semantics
(JAX's result dtypes and weak types, immutable arrays).

Importing this module installs the operators and methods (``x + 1``, ``x[0]``,
``x.sum()``) on ``Array`` and on every ``Tracer``.

>>> import xform.numpy as jnp
>>> x = jnp.arange(4)
>>> (x * 2 + 1).sum(), (x / 2).dtype
(Array(16, dtype=int32), dtype('float32'))
"""
import numpy as _np

from xform.core import dtypes as _dtypes
from xform.core.array_type import Array as _PublicArray

from xform.numpy._scalar_types import (
    bfloat16, bool_, complex64, complex128, float16, float32, float64, int8, int16,
    int32, int64, uint8, uint16, uint32, uint64)
from xform.numpy._scalar_types import (  # ml_dtypes' narrow types
    float4_e2m1fn, float6_e2m3fn, float6_e3m2fn, float8_e3m4, float8_e4m3,
    float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz,
    float8_e8m0fnu, int1, int2, int4, uint1, uint2, uint4)
from xform.numpy._creation import (
    arange, array, asarray, empty, empty_like, eye, full, full_like, identity, linspace,
    ones, ones_like, zeros, zeros_like)
from xform.numpy._ufuncs import (
    abs, absolute, add, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, clip, cos,
    divide, equal, exp, exp2, floor_divide, greater, greater_equal, invert, isfinite, isinf,
    isnan, less, less_equal, log, log2, log10, logical_and, logical_not, logical_or,
    logical_xor, maximum, minimum, mod, multiply, negative, not_equal, positive, pow, power,
    reciprocal, remainder, sign, sin, sqrt, square, subtract, tanh, true_divide)
from xform.numpy._reductions import (
    all, amax, amin, any, argmax, argmin, max, mean, min, prod, std, sum, var)
from xform.numpy._products import dot, inner, matmul, outer, tensordot, vdot
from xform.numpy._shape import (
    atleast_1d, atleast_2d, atleast_3d, broadcast_arrays, broadcast_shapes, broadcast_to,
    concatenate, expand_dims, flip, hstack, matrix_transpose, moveaxis, ndim, ravel,
    reshape, shape, size, squeeze, stack, swapaxes, transpose, vstack)
from xform.numpy._math import (
    allclose, array_equal, array_equiv, bitwise_invert, cbrt, conj, conjugate, copysign,
    deg2rad, degrees, divmod, fabs, float_power, fmax, fmin, heaviside, hypot, imag,
    iscomplex, iscomplexobj, isclose, isneginf, isposinf, isreal, isrealobj, logaddexp,
    logaddexp2, nan_to_num, rad2deg, radians, real, signbit, sinc)
from xform.numpy._matrix import (
    cross, diag, diag_indices, diag_indices_from, diagflat, diagonal, fill_diagonal,
    indices, ix_, kron, mask_indices, matvec, meshgrid, trace, tri, tril, tril_indices,
    tril_indices_from, triu, triu_indices, triu_indices_from, vander, vecdot, vecmat)
from xform.numpy._einsum import einsum, einsum_path
from xform.numpy._elementwise import (
    acos, acosh, angle, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh,
    around, asin, asinh, atan, atan2, atanh, bitwise_count, bitwise_left_shift,
    bitwise_right_shift, ceil, cosh, expm1, floor, fmod, frexp, gcd, lcm, ldexp,
    left_shift, log1p, modf, nextafter, right_shift, rint, round, sinh, spacing, tan, trunc)
from xform.numpy._manip import (
    append, array_split, block, column_stack, concat, delete, dsplit, dstack, fliplr,
    flipud, hsplit, insert, permute_dims, repeat, resize, roll, rollaxis, rot90, split,
    tile, trim_zeros, unstack, vsplit)
from xform.numpy._cumulative import (
    cumprod, cumsum, cumulative_prod, cumulative_sum, diff, ediff1d, gradient, nancumprod,
    nancumsum, trapezoid)
from xform.numpy._take import (
    apply_along_axis, apply_over_axes, choose, compress, extract, piecewise, place, put,
    put_along_axis, ravel_multi_index, select, take, take_along_axis, unravel_index)
from xform.numpy._sorting import (
    argpartition, argsort, argwhere, bincount, digitize, flatnonzero, lexsort, nonzero,
    partition, searchsorted, sort, sort_complex, where)
from xform.numpy._setops import (
    intersect1d, isin, setdiff1d, setxor1d, union1d, unique, unique_all, unique_counts,
    unique_inverse, unique_values)
from xform.numpy._statistics import (
    average, corrcoef, count_nonzero, cov, histogram, histogram2d, histogram_bin_edges,
    histogramdd, median, nanargmax, nanargmin, nanmax, nanmean, nanmedian, nanmin,
    nanpercentile, nanprod, nanquantile, nanstd, nansum, nanvar, percentile, ptp, quantile)
from xform.numpy._pad import pad
from xform.numpy._polynomial import (
    convolve, correlate, interp, poly, polyadd, polyder, polydiv, polyfit, polyint,
    polymul, polysub, polyval, unwrap)
from xform.numpy._misc import (
    array_repr, array_str, astype, bartlett, blackman, can_cast, copy, from_dlpack,
    frombuffer, fromfile, fromfunction, fromiter, fromstring, geomspace, get_printoptions,
    hamming, hanning, i0, isdtype, isscalar, iterable, kaiser, load, logspace, packbits,
    printoptions, save, savez, set_printoptions, unpackbits, vectorize)
from xform.numpy._index_tricks import c_, index_exp, mgrid, ogrid, r_, s_
from xform.numpy._roots import roots
from xform.numpy._ufunc import (  # ufunc objects replace the plain functions above
    add, bitwise_and, bitwise_or, bitwise_xor, frompyfunc, logaddexp, logaddexp2,
    logical_and, logical_or, logical_xor, maximum, minimum, multiply, negative, subtract,
    ufunc)
from xform.numpy import fft
from xform.numpy import _array_methods

__array_api_version__ = "2024.12"   # the Python array API version followed (as jax.numpy)

# ---- dtypes ----
dtype = _np.dtype
result_type = _dtypes.result_type
promote_types = _dtypes.promote_types
issubdtype = _dtypes.issubdtype
finfo = _dtypes.finfo
iinfo = _dtypes.iinfo
generic, number, inexact, floating, complexfloating = (
    _np.generic, _np.number, _np.inexact, _np.floating, _np.complexfloating)
integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger
character, flexible, object_ = _np.character, _np.flexible, _np.object_
ComplexWarning = _np.exceptions.ComplexWarning
# Aliases, as in JAX (64-bit names canonicalize to 32 bits unless x64 is enabled).
bool = bool_  # noqa: A001
int_, uint, float_, complex_ = int64, uint64, float64, complex128
double, single, cdouble, csingle = float64, float32, complex128, complex64

# ---- constants ----
pi = _np.pi
e = _np.e
euler_gamma = _np.euler_gamma
inf = _np.inf
nan = _np.nan
newaxis = None


ndarray = _PublicArray   # (JAX: jnp.ndarray is jax.Array)


_array_methods.install()

from xform.numpy import linalg  # noqa: E402  (submodule; needs the names above)
