"""Regressions from a differential sweep of ``xform.lax`` / ``xform.nn`` activations /
``xform.scipy.special`` against JAX over dtypes, special values and parameter
variants: one small case per bug class, compared with jax at run time.
"""
import jax
import numpy as np
import pytest
from jax import lax as jlax

import xform
from xform import lax as xlax
from optable import assert_tree_same

U8 = np.array([0, 1, 128, 255], np.uint8)
U32 = np.array([0, 7, 2**32 - 1], np.uint32)


@pytest.mark.parametrize("x", [U8, U32], ids=["uint8", "uint32"])
def test_sign_and_abs_of_unsigned(x):
    # sign lowers through a select (stablehlo.sign takes no unsigned operand); abs of
    # unsigned is a TypeError at trace time, as JAX's, not an XLA verifier error.
    want = jlax.sign(x)
    assert_tree_same(xlax.sign(x), want, 0, "sign")
    assert_tree_same(xform.jit(xlax.sign)(x), want, 0, "jit sign")
    with pytest.raises(TypeError):
        jlax.abs(x)
    with pytest.raises(TypeError, match="abs does not accept dtype"):
        xlax.abs(x)


def test_bool_iota_and_bitcast_are_type_errors():
    for L in (jlax, xlax):
        with pytest.raises(TypeError):
            L.iota(np.bool_, 3)
        with pytest.raises(TypeError):
            L.bitcast_convert_type(np.array([True]), np.int8)
        with pytest.raises(TypeError):
            L.bitcast_convert_type(np.array([1], np.int8), np.bool_)
    c = np.array([1 + 2j], np.complex64)   # same type: allowed
    assert_tree_same(xlax.bitcast_convert_type(c, np.complex64),
                     jlax.bitcast_convert_type(c, np.complex64), 0, "bitcast c64")


def test_convert_element_type_of_numpy_returns_an_array():
    x = np.arange(3, dtype=np.float32)
    out = xlax.convert_element_type(x, np.float32)
    assert isinstance(out, xform.Array)
    assert_tree_same(out, jlax.convert_element_type(x, np.float32), 0, "convert")


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_])
@pytest.mark.parametrize("kind", ["FFT", "IFFT", "RFFT"])
def test_fft_casts_real_input(kind, dtype):
    x = (np.arange(4) % 3).astype(dtype)
    assert_tree_same(xlax.fft(x, kind, (4,)), jlax.fft(x, kind, (4,)), 1e-5, kind)


def test_fft_rank0_lengths_and_complex_rfft():
    x = np.array([1 + 1j, 2], np.complex64)
    assert_tree_same(xlax.fft(x, "FFT", ()), jlax.fft(x, "FFT", ()), 0, "fft ()")
    for L in (jlax, xlax):
        with pytest.raises(ValueError, match="real valued"):
            L.fft(x, "RFFT", (2,))


@pytest.mark.parametrize("padding", ["VALID", "SAME", ((1, 0), (0, 1))])
def test_reduce_window_max_min_any_init(padding):
    x = np.array([[3, -1, 7], [0, 5, -2]], np.int32)
    for name, init in (("max", 0), ("min", 4), ("max", np.int32(-100))):
        args = (x, init, getattr(jlax, name), (2, 2), (1, 2), padding)
        want = jlax.reduce_window(*args, base_dilation=(1, 2))
        got = xlax.reduce_window(x, init, getattr(xlax, name), *args[3:], base_dilation=(1, 2))
        assert_tree_same(got, want, 0, f"{name} init={init}")
        jitted = xform.jit(lambda x, i: xlax.reduce_window(
            x, i, getattr(xlax, name), *args[3:], base_dilation=(1, 2)))(x, init)
        assert_tree_same(jitted, want, 0, f"jit {name} init={init}")


def test_betaln_beta_large_arguments():
    # lgamma(a) + lgamma(b) - lgamma(a + b) cancels to 0 (float32) or NaN (float16).
    a = np.array([0.5, 3, 8, 1e4, 1e7, 2.5, 30, 2**31 - 1], np.float32)
    b = np.array([1e7, 9, 8, 2, 3e6, 100, 31, 5], np.float32)
    for dtype in (np.float32, np.float16):
        for name in ("betaln", "beta"):
            jf, xf = getattr(jax.scipy.special, name), getattr(xform.scipy.special, name)
            aa, bb = (np.minimum(v, 6e4).astype(dtype) for v in (a, b))
            assert_tree_same(xf(aa, bb), jf(aa, bb), 2e-3 if dtype == np.float16 else 2e-5,
                             f"{name} {np.dtype(dtype).name}")
    assert_tree_same(xform.grad(xform.scipy.special.betaln)(3., 20.),
                     jax.grad(jax.scipy.special.betaln)(3., 20.), 1e-5, "grad betaln")


def test_softplus_of_bool_is_weak_like_jax():
    x = np.array([True, False])
    for name in ("softplus", "mish"):
        want, got = getattr(jax.nn, name)(x), getattr(xform.nn, name)(x)
        assert_tree_same(got, want, 1e-6, name)
        assert got.weak_type == want.weak_type, name


def test_dtype_errors_match_jax():
    # argmax/argmin of complex and random_gamma_grad of ints raise, as in JAX.
    c, i = np.ones(3, np.complex64), np.int32(2)
    for L in (jlax, xlax):
        with pytest.raises(TypeError):
            L.argmax(c, 0, np.int32)
        with pytest.raises(TypeError):
            L.argmin(c, 0, np.int32)
        with pytest.raises(TypeError):
            L.random_gamma_grad(i, i)


def test_sort_complex_keys_lexicographic():
    c = np.array([1 + 2j, 1 - 1j, np.nan, -0.0 + 1j, 1j, 2 + np.nan * 1j, -3], np.complex64)
    i = np.arange(7, dtype=np.int32)
    for fn in (lambda L: L.sort(c), lambda L: L.sort_key_val(c, i),
               lambda L: L.sort((c, i[::-1]), num_keys=2)):
        assert_tree_same(fn(xlax), fn(jlax), 0, "sort complex")
    assert_tree_same(xform.numpy.argsort(c), jax.numpy.argsort(c), 0, "argsort complex")


def test_abs_derivative_at_zero_and_nan():
    # JAX's rule selects on x >= 0: slope 1 at +-0, -1 at NaN (t * sign(x) gave 0, NaN).
    x = np.array([0.0, -0.0, np.nan, -2.0, 3.0], np.float32)
    g = lambda L, f: L.vmap(L.grad(f))(x)
    assert_tree_same(g(xform, xlax.abs), g(jax, jlax.abs), 0, "abs'")
    assert_tree_same(g(xform, xform.grad(xform.nn.soft_sign)),
                     g(jax, jax.grad(jax.nn.soft_sign)), 1e-6, "soft_sign''")


def test_spence_gradient_at_special_points():
    # The constant branches (x <= 0, x == 1) get a zero gradient, not NaN.
    x = np.array([-3.0, 0.0, 0.5, 1.0, 5.0], np.float32)
    g = lambda L, f: L.vmap(L.grad(f))(x)
    assert_tree_same(g(xform, xform.scipy.special.spence), g(jax, jax.scipy.special.spence),
                     1e-5, "spence'")


def test_bool_dot_general_and_conv_as_jax():
    a = np.array([[True, False], [True, True]])
    for f in (lambda L: L.lax.dot(a, a), lambda L: L.lax.dot(a, a.astype(np.int8)),
              lambda L: L.lax.conv(np.ones((1, 1, 3, 3), bool), np.ones((1, 1, 2, 2), bool),
                                   (1, 1), "VALID")):
        got, want = f(xform), f(jax)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _rw_cases(L):
    x = np.array([[3, -1, 7], [0, 5, -2]], np.int32)
    f, b = x.astype(np.float32), x > 0
    return [(f, 1., L.add), (x, 8, L.bitwise_or), (b, True, L.max), (b, False, L.max),
            (b, True, L.min), (f, 2., L.mul), (f, 0., lambda a, c: a + 2 * c),
            ((f, x), (0., 1), lambda a, c: (L.max(a[0], c[0]), a[1] * c[1]))]


def test_generic_reduce_window(padding="SAME"):
    # Other computations or inits than add/max/min from their identities bind the
    # generic reduce_window primitive (JAX's), not an error or a folded-in init.
    for k, ((x, init, fn), (_, _, xfn)) in enumerate(zip(_rw_cases(jlax), _rw_cases(xlax))):
        want = jlax.reduce_window(x, init, fn, (2, 2), (1, 1), padding)
        got = xlax.reduce_window(x, init, xfn, (2, 2), (1, 1), padding)
        assert_tree_same(got, want, 1e-6, f"case {k}")
        if k < 3:
            jitted = xform.jit(lambda x: xlax.reduce_window(x, init, xfn, (2,), (1,), padding))
            assert_tree_same(xform.vmap(jitted)(x), jax.vmap(lambda x: jlax.reduce_window(
                x, init, fn, (2,), (1,), padding))(x), 1e-6, f"jit vmap case {k}")
    f = np.array([[1., -2., 3.], [0.5, 4., -1.]], np.float32)
    g = lambda L, J: J.jvp(lambda v: L.reduce_window(v, 2., L.mul, (2, 2), (1, 1), padding),
                           (f,), (f + 1,))
    assert_tree_same(g(xlax, xform), g(jlax, jax), 1e-5, "jvp mul")
    with pytest.raises(TypeError, match="inconsistent dtypes"):
        xlax.reduce_window(f, 1, xlax.add, (2, 2))   # a Python int init for floats


def test_complex_cumlogsumexp():
    # JAX's complex logaddexp: lexicographic max, imaginary part wrapped into [-pi, pi].
    c = np.array([1 + 2j, -3 + 0.5j, 2 - 1j, 0.1j, -3 + 0.5j], np.complex64)
    for reverse in (False, True):
        want = jlax.cumlogsumexp(c, reverse=reverse)
        assert_tree_same(xlax.cumlogsumexp(c, reverse=reverse), want, 1e-5, "cumlogsumexp")
    got = xform.jit(lambda c: xlax.cummax(c, reverse=True))(c)
    assert_tree_same(got, jlax.cummax(c, reverse=True), 0, "jit cummax")


def test_complex_conv_nan_pattern_as_jax():
    # JAX lowers complex convolutions on CPU/GPU as three real ones (Gauss's product),
    # which spreads NaN/inf differently from a direct complex convolution.
    x = np.array([[[[1 + 1j, np.nan, 2], [3, 4j, np.inf], [1, 2, 3]]]], np.complex64)
    k = np.array([[[[1, 1j], [2, -1]]]], np.complex64)
    for pad, dil in ((((1, 1), (2, 0)), (2, 1)),):
        want = np.asarray(jlax.conv_general_dilated(x, k, (1, 1), pad, lhs_dilation=dil))
        for got in (xlax.conv_general_dilated(x, k, (1, 1), pad, lhs_dilation=dil),
                    xform.jit(lambda a, b: xlax.conv_general_dilated(
                        a, b, (1, 1), pad, lhs_dilation=dil))(x, k)):
            got = np.asarray(got)
            for part in (np.real, np.imag):
                np.testing.assert_array_equal(np.isnan(part(got)), np.isnan(part(want)))
            np.testing.assert_allclose(got, want, rtol=1e-6)


F32, I8 = np.array([1.5, -2.], np.float32), np.array([3, -1], np.int8)
SCALAR_OPS = [("add", F32, 1), ("add", 1, F32), ("add", F32, 1.), ("mul", I8, 2),
              ("sub", np.array([1, 2], np.int32), 1), ("add", F32.astype(np.complex64), 1.),
              ("pow", F32, 2), ("pow", F32, np.int8(3)), ("pow", F32, 2.),
              ("shift_left", I8, 1), ("max", np.array([True]), True), ("eq", F32, 1),
              ("add", np.array([1], np.int32), 2**40)]


@pytest.mark.parametrize("name,x,y", SCALAR_OPS, ids=[f"{n}-{i}" for i, (n, _, _) in
                                                     enumerate(SCALAR_OPS)])
def test_binary_ops_take_python_scalars_as_jax(name, x, y):
    # A Python scalar is a weak array of its default dtype and lax ops need equal dtypes
    # (pow: an integer exponent), eagerly and under jit; jnp is what promotes.
    def run(L, J, jit):
        f = getattr(L, name)
        try:
            out = J.jit(f)(x, y) if jit else f(x, y)
            return np.asarray(out).dtype, np.asarray(out)
        except (TypeError, OverflowError) as e:
            return type(e), None
    for jit in (False, True):
        (gd, gv), (wd, wv) = run(xlax, xform, jit), run(jlax, jax, jit)
        assert gd == wd, (jit, gd, wd)
        if wv is not None:
            np.testing.assert_array_equal(gv, wv)


def test_pad_clamp_python_scalars_as_jax():
    for f in (lambda L: L.pad(F32, 0, [(1, 0, 0)]), lambda L: L.clamp(0, F32, 1.),
              lambda L: L.clamp(0., F32, 1.), lambda L: L.pad(F32, 0., [(1, 0, 0)])):
        try:
            want = f(jlax)
        except TypeError:
            with pytest.raises(TypeError):
                f(xlax)
            continue
        assert_tree_same(f(xlax), want, 0, "pad/clamp")


@pytest.mark.parametrize("x64_on", [False, True], ids=["x32", "x64"])
def test_dynamic_slice_start_indices_of_one_integer_type(x64_on, request):
    # JAX's dtype rule: every start index one integer type (a Python int the default
    # int, so np.int32 beside it fails under x64); the *_in_dim helpers fill the other
    # dimensions with zeros of the index's own type.
    if x64_on:
        request.getfixturevalue("x64")
    x = np.arange(20.).reshape(4, 5)
    bad = [lambda L: L.lax.dynamic_slice(x, (1, np.int16(2)), (2, 2)),
           lambda L: L.lax.dynamic_slice(x, (True, 2), (2, 2)),
           lambda L: L.jit(lambda i: L.lax.dynamic_update_slice(x, x[:2, :2], (i, 0)))(
               np.int16(1))]
    if x64_on:   # (int64 is int32 otherwise)
        bad.append(lambda L: L.lax.dynamic_slice(x, (np.int32(1), np.int64(2)), (2, 2)))
    for case in bad:
        msgs = []
        for L in (jax, xform):
            with pytest.raises(TypeError) as e:
                case(L)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]
    i = np.int32(1)
    for L in (jax, xform):
        L.lax.dynamic_slice(x, (1, 2), (2, 2))   # Python ints are one type
    assert_tree_same(*[(L.lax.dynamic_index_in_dim(x, i, 1),
                        L.lax.dynamic_update_slice_in_dim(x, x[:, :2], np.uint8(3), 1),
                        L.jit(lambda j: L.lax.dynamic_update_index_in_dim(x, x[0], j, 0))(i))
                       for L in (xform, jax)], 0, "in_dim helpers")


X34 = np.arange(12, dtype=np.float32).reshape(3, 4)
C1 = np.ones((1, 1, 4), np.float32)
# Parameters that JAX refuses, each with JAX's exception type (differential sweep).
PARAM_ERRORS = [
    lambda L: L.conv_general_dilated(C1, C1[..., :2], (1,), "SAME", lhs_dilation=(2,)),
    lambda L: L.conv_general_dilated(C1, C1[..., :2], (1,), ((-3, -2),)),
    lambda L: L.conv_general_dilated(C1, C1[..., :2], (1,), "VALID",
                                     preferred_element_type=np.float16),
    lambda L: L.conv_general_dilated(C1.astype(np.int8), C1[..., :2].astype(np.int8), (1,),
                                     "VALID", preferred_element_type=np.uint32),
    lambda L: L.squeeze(X34[:1], (0, 0)), lambda L: L.squeeze(X34[:1], (5,)),
    lambda L: L.squeeze(X34, (1,)), lambda L: L.expand_dims(X34, (3,)),
    lambda L: L.broadcasted_iota(np.int32, (2, 3), 2), lambda L: L.iota(np.int32, -1),
    lambda L: L.pad(X34, np.float32(0), [(0, 0, -1), (0, 0, 0)]),
    lambda L: L.pad(X34, np.float32(0), [(-2, -2, 0), (0, 0, 0)]),
    lambda L: L.broadcast(X34, (-1,)), lambda L: L.concatenate([], 0),
    lambda L: L.select_n(np.array([True])), lambda L: L.top_k(np.ones(2, np.complex64), 1),
    lambda L: L.slice(X34, (0, 0), (3, 4), (1,)), lambda L: L.slice(X34, (2, 0), (4, 4), (1, 1)),
    lambda L: L.slice_in_dim(X34, -5, None), lambda L: L.slice_in_dim(X34, 0, 7, axis=1),
    lambda L: L.fft(X34, "RFFT", (3,)), lambda L: L.fft(X34, "FFT", (5,)),
    lambda L: L.dot(X34, X34),
]


@pytest.mark.parametrize("case", range(len(PARAM_ERRORS)))
def test_parameter_errors_as_jax(case):
    f = PARAM_ERRORS[case]
    with pytest.raises(Exception) as want:
        f(jlax)
    with pytest.raises(type(want.value)):
        f(xlax)


def test_parameter_values_as_jax():
    c = np.array([0j, 1j, 2 + 1j, np.nan], np.complex64)
    u = np.array([1, 2], np.uint32)
    cases = [
        lambda L: L.convert_element_type(c, np.bool_),   # real part only, as JAX
        lambda L: [L.convert_element_type(v, t) for v in (float("nan"), float("inf"), 1e10,
                                                         -1.5) for t in (np.int32, np.uint8)],
        lambda L: L.bitcast_convert_type(u, np.int64),   # int32 without x64
        lambda L: L.rng_bit_generator(np.arange(4, dtype=np.uint32), (3,), np.uint64),
        lambda L: L.dot_general(c[:2], c[:2], (((0,), (0,)), ((), ())),
                                preferred_element_type=np.float32),
        lambda L: L.dot(X34, X34, dimension_numbers=(((1,), (1,)), ((), ()))),
        lambda L: L.slice_in_dim(X34, -2, -1, axis=1),
        lambda L: L.conv_general_dilated(C1.astype(np.int8), C1[..., :2].astype(np.int8),
                                         (1,), "SAME", preferred_element_type=np.float32),
    ]
    for k, f in enumerate(cases):
        assert_tree_same(f(xlax), f(jlax), 0, f"case {k}")


def test_logistic_and_division_gradient_round_as_jax():
    # logistic lowers as JAX's 1 / (1 + exp(-x)) (stablehlo.logistic rounds bf16/f16
    # differently) and d(x/y)/dy is JAX's -t x y**-2: bit-equal in the narrow floats
    import jax.numpy as jnp
    import xform.numpy as xnp
    x = np.random.RandomState(0).randn(3, 5).astype(np.float32)
    for dt in (jnp.bfloat16, np.float16):
        a = x.astype(dt)
        got = (xlax.logistic(a), xform.grad(lambda y: xnp.sum(2.5 / y))(a),
               xform.grad(lambda y: xnp.sum(xform.nn.sigmoid(y)))(a))
        want = (jlax.logistic(a), jax.grad(lambda y: jnp.sum(2.5 / y))(a),
                jax.grad(lambda y: jnp.sum(jax.nn.sigmoid(y)))(a))
        assert_tree_same(got, want, 0, f"logistic and 1/y gradient in {np.dtype(dt).name}")
