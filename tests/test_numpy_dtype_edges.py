"""jax.numpy vs xform.numpy on the dtypes and values a differential sweep found them to
disagree on: small ints, bool, float16/bfloat16, float32 subnormals/inf/nan/-0, complex
with inf/nan. Both run eagerly; values must agree bit for bit (NaNs equal; a row may
give a tolerance), dtypes and weak types exactly; ERRORS rows compare the error class
and message."""
import jax.numpy as jnp
import numpy as np
import pytest

import xform.numpy as xnp
from xform.core.array import Array

I8 = np.array([-128, -1, 0, 1, 127, 5], np.int8)
U8 = np.array([0, 1, 255, 128, 7], np.uint8)
I32X = np.array([-2**31, -7, 0, 3, 2**31 - 1], np.int32)
B = np.array([True, False, True])
F32 = np.array([-np.inf, -1e30, -2.5, -1, -0.5, -0.0, 0, 1e-40, 0.5, 1, 2.5, 1e30, np.inf,
                np.nan, -3e-39], np.float32)
F16 = np.array([-np.inf, -2.5, -0.0, 0.0, 0.5, 1e4, np.nan, 65504], np.float16)
BF = np.array([-3.5, 0.0, 1.0, np.nan, np.inf, 1e30, -0.0], jnp.bfloat16)
C = np.array([0, 1 + 1j, -1 - 0j, np.inf + 0j, complex(np.nan, 1), 1e30 + 1e30j, -0.0 - 1j,
              complex(1, np.nan), 1 + 1j, 2.5 - 0.5j], np.complex64)
FIN = np.array([1.5 + 2j, -0.5 + 1j, 3 - 1j, 0.25 + 0j], np.complex64)
TIES = np.array([1 + 1j, 1 + 2j, 1 - 5j, 1 + 0j], np.complex64)
Z2 = np.zeros((4, 5), np.float32)
Z2[1:3, 1:4] = 1

ROWS = [
    ("cumulative_small_ints", lambda m: (
        m.cumulative_sum(I8), m.cumulative_sum(U8), m.cumulative_prod(I8),
        m.cumulative_sum(U8, include_initial=True), m.cumulative_sum(B))),
    ("var_std_complex", lambda m: (
        m.var(FIN), m.std(FIN), m.nanvar(C), m.nanstd(C), m.var(FIN, ddof=5),
        m.var(FIN.reshape(2, 2), 0, keepdims=True), m.var(F32[2:5], ddof=3), m.var(F16[1:3]))),
    ("var_int_dtype", lambda m: (
        m.var(I8, dtype=np.int32), m.var(I8, ddof=9), m.nanvar(U8, dtype=np.int32, ddof=9),
        m.nanvar(I8, dtype=np.int8))),
    ("spacing", lambda m: (m.spacing(F32), m.spacing(F16), m.spacing(BF))),
    ("frexp", lambda m: m.frexp(F32) + m.frexp(F16) + m.frexp(BF)),
    ("square_log_complex", lambda m: (
        m.square(C), m.log10(C), m.log2(C), m.log10(BF), m.log2(2.0), m.log10(3))),
    ("vander_keeps_dtype", lambda m: (
        m.vander(I8[3:]), m.vander(U8[:3]), m.vander(FIN, 3), m.vander(F16[4:6]))),
    ("histogram_int_extremes", lambda m: m.histogram(I32X) + (m.histogram_bin_edges(I32X),)),
    ("trim_zeros_axis", lambda m: (m.trim_zeros(Z2), m.trim_zeros(Z2, "f", axis=1),
                                   m.trim_zeros(Z2, axis=0), m.trim_zeros(Z2[:1]))),
    ("stack_bfloat16_numpy", lambda m: (m.stack(BF.reshape(1, -1)), m.vstack(BF[None]))),
    ("i0", lambda m: (m.i0(F32), m.i0(F16), m.i0(BF))),
    ("sort_complex", lambda m: (
        m.sort(C), m.argsort(C), m.argsort(C, descending=True), m.sort(C, descending=True),
        m.searchsorted(m.sort(C), C), m.searchsorted(m.sort(C), C, side="right"),
        *m.histogram(FIN, 3))),
    ("complex_order", lambda m: (
        m.maximum(C, C[::-1]), m.minimum(C, 1 + 0j), m.fmax(C, B[:1]), m.fmin(2, C),
        m.less(C, C[::-1]), m.greater_equal(C, 1), m.less_equal(1j, C), m.max(FIN),
        m.max(TIES), m.min(TIES.reshape(2, 2), 0), m.maximum.reduce(TIES))),
    ("logaddexp_complex_bf16", lambda m: (
        m.logaddexp(FIN, FIN[::-1]), m.logaddexp2(C, 1j), m.logaddexp2(U8[:3], BF[:3]),
        m.logaddexp(BF, 1.0))),
    ("vdot_complex", lambda m: (m.vdot(FIN, FIN[::-1]), m.vdot(FIN, I8[:4]))),
    ("cov_corrcoef", lambda m: (m.corrcoef(FIN, FIN[::-1]), m.cov(I8[:3], F16[4:7]),
                                m.corrcoef(U8[:3], BF[:3])), 1e-6),
    ("ldexp_fmod_ints", lambda m: (
        m.ldexp(I8[:3], np.array([0, 2**32 - 1, 7], np.uint32)), m.ldexp(F16, B[:1]),
        m.fmod(True, B), m.fmod(I8, np.int8(0)))),
    ("rint_round_count", lambda m: (
        m.rint(FIN * 2), m.bitwise_count(B), m.round(F32, 50), m.round(FIN, 40))),
    ("ediff1d_ends_cast_to_dtype", lambda m: (  # (JAX casts the ends: 2.7 -> 2)
        m.ediff1d(I32X[1:4], to_begin=2.7, to_end=np.float32(-1.5)),
        m.ediff1d(U8, to_end=np.array([3.9, 1.0], np.float32)))),
    ("windows_float_length", lambda m: (  # (int(M), as JAX: hanning(2.5) has 2 points)
        m.hanning(2.5), m.bartlett(np.float32(3.7)), m.hamming(True)), 0),
    ("angle_real_takes_default_float", lambda m: (  # (float32 for a float16 scalar)
        m.angle(np.float16(2)), m.angle(BF[1]), m.angle(I8), m.angle(F16))),
    ("isclose_jax_formula", lambda m: (  # (equal is close at any tolerance; ints use them)
        m.isclose(F32[:, None], F32[None, :]), m.isclose(F32, F32, rtol=-1.0),
        m.isclose(F32[:, None], F32[None, :], atol=np.inf, equal_nan=True),
        m.isclose(I32X, 3, rtol=0.5), m.allclose(U8, U8[::-1], atol=300),
        m.isclose(C, C[::-1], equal_nan=True), m.isclose(B, B[::-1]))),
    ("unpackbits_negative_count", lambda m: (  # (NumPy's: trims that many from the end)
        m.unpackbits(U8, count=-3), m.unpackbits(U8, count=-60),
        m.unpackbits(U8.reshape(5, 1), axis=1, count=-2, bitorder="little"))),
    ("gradient_as_jax", lambda m: (  # (JAX's formulas: bit-equal; spacing promotes f)
        m.gradient(F32[7:12]), m.gradient(I32X, 2.5), m.gradient(F16[1:6], 3),
        m.gradient(F32[7:12], np.sort(F32[7:12]) + np.arange(5, dtype=np.float32)),
        *m.gradient(Z2, 2.0, np.arange(5.0, dtype=np.float32) ** 2),
        m.asarray(len(m.gradient(2.5))))),
    ("kaiser_float_length", lambda m: m.kaiser(np.float32(4.7), 2.0), 1e-6),
]


def _same(x, j, tol):
    assert isinstance(x, Array), type(x)
    assert (x.shape, x.dtype, x.weak_type) == (j.shape, j.dtype, j.weak_type)
    a, b = np.asarray(x), np.asarray(j)
    if a.dtype.kind == "c" or a.dtype.name == "bfloat16":
        a, b = a.astype(np.complex128), b.astype(np.complex128)
    if tol:
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fn,tol", [(r[1], r[2] if len(r) > 2 else 0) for r in ROWS],
                         ids=[r[0] for r in ROWS])
def test_row(fn, tol):
    with np.errstate(all="ignore"):
        expected = fn(jnp)
    got = fn(xnp)
    expected, got = (v if isinstance(v, tuple) else (v,) for v in (expected, got))
    assert len(got) == len(expected)
    for x, j in zip(got, expected):
        _same(x, j, tol)


ERRORS = [
    ("argmax_complex", lambda m: m.argmax(FIN)),
    ("argmin_complex", lambda m: m.argmin(FIN)),
    ("nanargmax_complex", lambda m: m.nanargmax(FIN)),
    ("nanargmin_complex", lambda m: m.nanargmin(FIN)),
    ("round_bool", lambda m: m.round(B)),
    ("around_bool", lambda m: m.around(B)),
    ("clip_complex", lambda m: m.clip(FIN, 0, 1)),
    ("clip_complex_bound", lambda m: m.clip(F32, 1j)),
    ("ediff1d_bool", lambda m: m.ediff1d(B)),
    ("isneginf_complex", lambda m: m.isneginf(FIN)),
    ("isposinf_complex", lambda m: m.isposinf(FIN)),
    ("ix_bool", lambda m: m.ix_(B)),
    ("vander_bool", lambda m: m.vander(B)),
    ("std_int_dtype", lambda m: m.std(I8, dtype=np.int32)),
    ("hypot_complex", lambda m: m.hypot(FIN, 1)),
    ("ldexp_float_exponent", lambda m: m.ldexp(F32, 2.0)),
]


@pytest.mark.parametrize("fn", [e[1] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_match_jax(fn):
    def raised(m):
        try:
            fn(m)
        except Exception as e:  # noqa: BLE001 (class and message are compared)
            return type(e).__name__, str(e).split("\n")[0]
    j = raised(jnp)
    assert j is not None and raised(xnp) == j


def test_x64_promotions_match_jax(x64):
    # int arrays with Python-float operands are float64 under x64 (gradient promotes f
    # with its spacings; angle takes the default float)
    for fn in (lambda m: m.gradient(I32X, 2.5), lambda m: m.gradient(I8.astype(np.int64),
                                                                      np.float32(1.5)),
               lambda m: m.angle(I8), lambda m: m.angle(np.float32(2))):
        _same(fn(xnp), fn(jnp), 0)

