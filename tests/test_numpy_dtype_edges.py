"""jax.numpy vs xform.numpy on the dtypes and values a differential sweep found them to
disagree on: small ints, bool, float16/bfloat16, float32 subnormals/inf/nan/-0, complex
with inf/nan. Both run eagerly; values must agree bit for bit (NaNs equal; a row may
give a tolerance), dtypes and weak types exactly; ERRORS rows compare the error class
and message."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xform
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
    ("expand_dims_array_axis", lambda m: (  # (a concrete array of axes, as JAX takes)
        m.expand_dims(F32[:3], np.array([0, -1])), m.expand_dims(F32[:3], m.array(1)),
        m.expand_dims(F32[:3], np.int64(0)))),
    ("zero_d_numpy_shape", lambda m: (m.zeros(np.array(3)), m.full(np.array(2), 1.5))),
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
    ("interp_promotes_fp_on_its_own", lambda m: (  # (x with xp; an int fp is float32)
        m.interp(F16[1:5], np.arange(3, dtype=np.int32), np.array([1, -2, 4], np.int32)),
        m.interp(F32[7:11], F32[7:10], F32[7:10], left=-7.0, right=np.float16(9)),
        m.interp(F32[7:11], F32[7:10], F32[7:10], period=1.5))),
    ("take_bool_repeat_2d_rot90_float_k", lambda m: (  # (JAX accepts these)
        m.take(F32, B), m.repeat(F32[:3], np.array([[1, 0, 2]])), m.rot90(Z2, k=2.5))),
    ("full_like_complex_fill_to_bool", lambda m: (  # (x != 0, not the real part)
        m.full_like(B[:2], np.array([-0.5j, 0], np.complex64)),
        m.full((2, 2), np.array([0.5j, 0], np.complex64), dtype=bool))),
    ("intersect1d_weak_with_strong", lambda m: m.intersect1d(  # (JAX's promote: strong)
        m.broadcast_to(2.5, (3,)), np.array([2.5, 1.0], np.float32))),
    ("unwrap_as_jax", lambda m: (  # (p promotes with period: ints stay ints; p[0] as is)
        m.unwrap(np.array([0, 5, 11, 2, 8], np.int32), period=6), m.unwrap(F32[5:8]),
        m.unwrap(I8))),
]

# JAX's weak type comes from where its formula inserts a strong constant
# (``lax._const``: weak only for a weak scalar) or promotes (``jnp.array``, ``zeros``).
W3 = np.array([0.5, -1.5, 2.0], np.float32)


def _weak(m):
    return m.broadcast_to(2.5, (3,))   # a weak float32[3]


WEAK_ROWS = [
    ("const_formulas", lambda m: (
        m.hypot(I32X[:3], 2.0), m.hypot(3.0, 4.0), m.heaviside(I32X[:3], 0.5),
        m.heaviside(0.0, _weak(m)), m.deg2rad(_weak(m)), m.rad2deg(2.5), m.sinc(_weak(m)),
        m.sinc(2.5), m.angle(_weak(m), deg=True), m.round(_weak(m), 1), m.round(2.5, 1),
        m.lcm(4, 6), m.iscomplex(_weak(m)), m.isreal(2.5), m.isnan(3), m.isnan(_weak(m)))),
    ("logaddexp", lambda m: (
        m.logaddexp2(I32X[:3], 2.5), m.logaddexp2(_weak(m), _weak(m)), m.logaddexp2(2.5, 3.0),
        m.logaddexp(I32X[:3], 1j), m.logaddexp(_weak(m), _weak(m))), 1e-6),
    ("strong_results", lambda m: (
        m.polyval(np.array([1, 2, 3]), 2.0), m.polyval(_weak(m), _weak(m)), m.diagflat(2.5),
        m.diagflat(_weak(m), 1), m.cross(I32X[:3], _weak(m)), m.full_like(_weak(m), W3),
        m.histogram_bin_edges(W3, _weak(m)), m.rint(2), m.polyadd(_weak(m), W3),
        *m.polydiv(I32X[1:4], _weak(m)))),
    ("keep_weak", lambda m: (
        m.interp(I32X[:3], _weak(m), _weak(m)), m.full_like(_weak(m), 1.0),
        m.place(_weak(m), W3 > 0, np.float32(1), inplace=False),
        m.fill_diagonal(m.outer(_weak(m), _weak(m)), np.float32(1), inplace=False))),
]


@pytest.mark.parametrize("fn,tol", [(r[1], r[2] if len(r) > 2 else 0) for r in WEAK_ROWS],
                         ids=[r[0] for r in WEAK_ROWS])
def test_weak_types_eager_and_jit(fn, tol):
    # (JAX's jnp functions are jitted inside: its jit result is its eager one, and cheaper)
    expected = jax.jit(lambda: fn(jnp))()
    for got in (fn(xnp), xform.jit(lambda: fn(xnp))()):
        assert len(got) == len(expected)
        for x, j in zip(got, expected):
            _same(x, j, tol)


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
    ("choose_float_a", lambda m: m.choose(np.array([0.0, 1.0]), [I8[:2], I8[2:4]])),
    ("choose_bool_a", lambda m: m.choose(B[:2], [I8[:2], I8[2:4]])),
    ("quantile_complex", lambda m: m.quantile(FIN, 0.5)),
    ("median_complex", lambda m: m.median(FIN)),
    ("meshgrid_2d", lambda m: m.meshgrid(Z2, F32)),
    ("dtype_is_an_array", lambda m: m.zeros(3, dtype=m.ones(2))),   # (xform took its .dtype)
    ("astype_to_an_array", lambda m: m.ones(2).astype(m.ones(2, np.int8))),
    ("asarray_dtype_array", lambda m: m.asarray(I8, dtype=m.asarray(B))),
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


def test_static_array_axis_and_traced_condlist():
    # cumsum's axis is static in JAX (an Array is unhashable: ValueError); select
    # takes a traced array condlist (no truth value taken)
    for m in (jnp, xnp):
        with pytest.raises(ValueError):
            m.cumsum(Z2, axis=m.array(1))
    f = lambda m: lambda c, x: m.select(c, x, 7.0)  # noqa: E731
    args = (F32[7:10] > 0, F32[7:10])
    _same(xform.jit(f(xnp))(*args), jax.jit(f(jnp))(*args), 0)


def test_insert_one_index_array_and_traced_positions():
    # a one-element index array takes all of values there (as JAX); traced positions
    # go by JAX's scatter formula under jit
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.array([7.0, 8.0], np.float32)
    want = jax.jit(lambda: jnp.insert(a, np.array([1]), v, axis=1))()  # (eager JAX: slow)
    _same(xnp.insert(a, np.array([1]), v, axis=1), want, 0)
    obj = np.array([3, -3], np.int32)
    f = lambda m: lambda i: m.insert(a, i, v, axis=1)  # noqa: E731
    _same(xform.jit(f(xnp))(obj), jax.jit(f(jnp))(obj), 0)


def test_x64_promotions_match_jax(x64):
    # int arrays with Python-float operands are float64 under x64 (gradient promotes f
    # with its spacings; angle takes the default float)
    for fn in (lambda m: m.gradient(I32X, 2.5), lambda m: m.gradient(I8.astype(np.int64),
                                                                      np.float32(1.5)),
               lambda m: m.angle(I8), lambda m: m.angle(np.float32(2)),
               lambda m: m.unwrap(I32X), lambda m: m.sort_complex(F32[7:12]),
               lambda m: m.sort_complex(I8), lambda m: m.tri(2)):
        _same(fn(xnp), fn(jnp), 0)

