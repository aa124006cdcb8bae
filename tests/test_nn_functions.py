"""xform.nn functions vs jax.nn: values, dtypes and weak types at ordinary and extreme
inputs, gradients vs jax.grad (finite where JAX's are), check_grads order 2 under
hypothesis, jit and vmap vs eager, the softmax-family arguments, one_hot, standardize,
attention, errors and the docstring examples."""
import doctest
import functools
import warnings

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings

import xform
import xform.numpy as jnp
from xform import nn
from xform.nn import _activations, _functions
from xform.scipy.special import _basic as special_basic
from xform.test_util import arrays, check_grads, float_elements

ELEMENTWISE = ["relu", "relu6", "squareplus", "softplus", "sparse_plus", "soft_sign",
               "sigmoid", "sparse_sigmoid", "silu", "mish", "log_sigmoid", "elu",
               "leaky_relu", "hard_tanh", "celu", "selu", "gelu", "hard_sigmoid",
               "hard_silu", "log1mexp", "identity"]
EXTREME = np.array([-np.inf, -1e4, -1000., -88., -50., -20., -6., -3., -1., -0.5, -1e-3,
                    0., 1e-3, 0.5, 1., 3., 6., 20., 50., 88., 1000., 1e4, np.inf])
TOL = {np.float32: 2e-6, np.float16: 2e-3, ml_dtypes.bfloat16: 1e-2}


def both(name):
    """xform's function and the jax oracle: jax.nn's under jax.jit (keyword arguments
    static), one compile per call instead of one per op for the unjitted ones."""
    jf = getattr(jax.nn, name)
    return getattr(nn, name), lambda *args, **kw: jax.jit(functools.partial(jf, **kw))(*args)


def assert_same(actual, expected, tol=2e-6, weak=True):
    """Equal values (NaN where JAX has NaN, same infinities) and dtypes (and weak types)."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype, (a.dtype, e.dtype)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=tol,
                               atol=tol)
    if weak:
        assert getattr(actual, "weak_type", False) == getattr(expected, "weak_type", False)


# ---- elementwise activations ----

@pytest.mark.parametrize("name", ELEMENTWISE)
@pytest.mark.parametrize("dtype", list(TOL), ids=lambda d: np.dtype(d).name)
def test_elementwise_values_and_dtypes(name, dtype):
    xf, jf = both(name)
    x = EXTREME.astype(dtype)
    assert_same(xf(jnp.asarray(x)), jf(x), TOL[dtype])


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_weak_types_and_ints(name):
    xf, jf = both(name)
    for v in (1.5, -2.0):   # Python scalars give weak results (gelu: strong, as JAX)
        assert_same(xf(v), jf(v))
    if name not in ("sigmoid", "silu", "swish", "mish", "log_sigmoid", "softplus",
                    "log1mexp", "elu", "celu", "selu"):
        ints = np.array([-3, 0, 2, 7], np.int32)   # integer in, JAX's dtype out
        assert_same(xf(jnp.asarray(ints)), jf(ints))


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_grads_match_jax(name):
    """Elementwise derivatives at ordinary and extreme inputs, incl. the kinks (relu'(0)),
    finite where JAX's are, through jit and vmap too."""
    xf, jf = both(name)
    x = EXTREME[1:-1].astype(np.float32)
    expected = jax.jit(jax.vmap(jax.grad(jf)))(x)
    assert_same(xform.jit(xform.vmap(xform.grad(xf)))(x), expected, 1e-5, weak=False)


def test_aliases():
    assert nn.swish is nn.silu and nn.hard_swish is nn.hard_silu
    assert nn.tanh is jnp.tanh


def test_relu_kinks():
    assert float(xform.grad(nn.relu)(0.)) == 0.
    assert float(xform.grad(nn.relu6)(0.)) == 0.
    assert float(xform.grad(nn.relu6)(6.)) == 0.
    assert float(xform.grad(nn.hard_tanh)(0.5)) == 1.
    assert float(xform.grad(xform.grad(nn.relu))(2.)) == 0.


def test_extreme_stability():
    for v in (1000., -1000.):
        assert np.isfinite(float(nn.softplus(v))) and np.isfinite(float(nn.log_sigmoid(v)))
        assert np.isfinite(float(xform.grad(nn.softplus)(v)))
        assert np.isfinite(float(xform.grad(nn.log_sigmoid)(v)))
    assert float(nn.log_sigmoid(-1000.)) == -1000.
    assert float(nn.softplus(1000.)) == 1000.
    assert np.isfinite(float(xform.grad(nn.elu)(1000.)))   # the untaken expm1 branch
    assert np.isfinite(float(xform.grad(nn.log1mexp)(1e-3)))


def test_softplus_derivatives_are_jax_bit_for_bit():
    # differentiated through logaddexp's rule as JAX's: a sigmoid custom JVP was an ulp
    # off in float32 and ~1% in bfloat16 (optax's sigmoid cross-entropy gradients)
    for dt in (np.float32, ml_dtypes.bfloat16):
        x = np.linspace(-20, 20, 201).astype(dt)
        for order in (1, 2):
            xf, jf = nn.softplus, jax.nn.softplus
            for _ in range(order):
                xf, jf = xform.grad(xf), jax.grad(jf)
            np.testing.assert_array_equal(np.asarray(xform.vmap(xf)(x), np.float32),
                                          np.asarray(jax.vmap(jf)(x), np.float32))


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_jit_vmap_match_eager(name):
    xf = getattr(nn, name)
    x = np.linspace(-4, 8, 24, dtype=np.float32).reshape(4, 6)
    looped = np.stack([np.asarray(xf(jnp.asarray(r))) for r in x.T], 1)
    # gelu runs op by op eagerly (as in JAX): 1 ulp off its jitted value
    assert_same(xform.jit(xform.vmap(xf, 1, 1))(x), looped, 1e-6, weak=False)


def test_gelu_both_forms():
    x = EXTREME.astype(np.float32)
    _, jf = both("gelu")
    for approximate in (True, False):
        assert_same(nn.gelu(x, approximate), jf(x, approximate=approximate))
        assert_same(nn.gelu(2, approximate), jf(2, approximate=approximate))
        d = lambda lib: lib.jit(lib.vmap(lib.grad(lambda v: lib.nn.gelu(v, approximate))))
        assert_same(d(xform)(x[1:-1]), d(jax)(x[1:-1]), 1e-5, weak=False)


def test_parameters():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    assert_same(nn.elu(x, 0.5), jax.nn.elu(x, 0.5))
    assert_same(nn.celu(x, alpha=2.), jax.nn.celu(x, alpha=2.))
    assert_same(nn.leaky_relu(x, 0.2), jax.nn.leaky_relu(x, 0.2))
    assert_same(nn.squareplus(x, b=1), jax.nn.squareplus(x, b=1))
    assert_same(nn.squareplus(x.astype(np.float16)), jax.nn.squareplus(x.astype(np.float16)))


SMOOTH = {"softplus": nn.softplus, "silu": nn.silu, "mish": nn.mish,
          "squareplus": nn.squareplus, "gelu": nn.gelu,
          "gelu_exact": lambda x: nn.gelu(x, approximate=False),
          "selu": nn.selu}   # selu: smooth away from 0 (checked there)


@pytest.mark.parametrize("name", SMOOTH)
@settings(max_examples=3)
@given(x=arrays((3,), np.float64))
def test_elementwise_check_grads(x64, name, x):
    if name == "selu":
        x = np.where(np.abs(x) < 0.1, 0.5, x)
    check_grads(SMOOTH[name], (x,), order=2, modes=("fwd", "rev"))


@given(x=arrays((3,), np.float64, elements=float_elements(0.25, 5.)))
def test_log1mexp_check_grads(x64, x):
    check_grads(nn.log1mexp, (x,), order=2, modes=("fwd", "rev"))


# ---- glu ----

def test_glu():
    x = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    assert_same(nn.glu(x), jax.nn.glu(x))
    assert_same(nn.glu(x, axis=0 if x.shape[0] % 2 == 0 else -1), jax.nn.glu(x))
    assert_same(xform.grad(lambda v: nn.glu(v, 1).sum())(x),
                jax.grad(lambda v: jax.nn.glu(v, 1).sum())(x), 1e-6)
    with pytest.raises(ValueError, match=r"size of axis 0 of x \(shape \(3, 4\)\) must be "
                                         r"divisible by 2, got 3"):
        nn.glu(x, axis=0)


# ---- softmax, log_softmax, logsumexp, logmeanexp ----

RNG = np.random.RandomState(0)
X = RNG.randn(3, 4, 5).astype(np.float32) * 3
W = X > -1.


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp", "logmeanexp"])
def test_softmax_family_values(name):
    xf, jf = both(name)
    default = {"softmax": -1, "log_softmax": -1}.get(name)
    listed = [1, 2] if name in ("softmax", "logsumexp") else (1, 2)   # jax jits the others
    for axis, mask in ((default, W), (0, None), ((0, 2), W), (listed, None), (None, W)):
        kw = {} if axis is default else dict(axis=axis)
        assert_same(xf(X, where=mask, **kw), jf(X, where=mask, **kw), 1e-6)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        assert_same(xf(X.astype(dtype)), jf(X.astype(dtype)), TOL[dtype])
    assert_same(xf(X[0, 0].astype(np.int32)), jf(X[0, 0].astype(np.int32)), 1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_softmax_family_extreme(name):
    xf, jf = both(name)
    rows = np.array([[1e30, 1e30, 0.], [1000., -1000., 0.], [-1e30, -1e30, -1e30],
                     [np.inf, 1., 0.], [-np.inf, 1., 0.], [-np.inf, -np.inf, -np.inf],
                     [np.nan, 1., 0.], [3.4e38, 3.4e38, 3.4e38]], np.float32)
    assert_same(xf(rows), jf(rows))
    assert_same(xf(rows, axis=-1), jf(rows, axis=-1))
    g = lambda lib, f: lib.jit(lib.vmap(lib.grad(lambda r: (f(r) * np.arange(3.)).sum())))
    ours, theirs = g(xform, xf)(rows), g(jax, jf)(rows)
    assert (np.isfinite(ours) == np.isfinite(theirs)).all()
    assert_same(ours, theirs, 1e-6, weak=False)


def test_logsumexp_options():
    b = RNG.randn(3, 4, 5).astype(np.float32)
    _, jlse = both("logsumexp")
    for kw in (dict(b=b), dict(b=b, axis=1, keepdims=True), dict(b=b, return_sign=True),
               dict(b=np.abs(b), axis=(0, 2), where=W), dict(keepdims=True),
               dict(axis=-1, return_sign=True, where=W)):
        ours, theirs = nn.logsumexp(X, **kw), jlse(X, **kw)
        for o, t in zip(*(v if isinstance(v, tuple) else (v,) for v in (ours, theirs))):
            assert_same(o, t, 1e-6)
    assert float(nn.logsumexp(jnp.array([np.inf, 1.]))) == np.inf
    assert float(nn.logsumexp(jnp.array([-np.inf, -np.inf]))) == -np.inf
    assert_same(nn.logsumexp(1.5), jlse(1.5))   # weak in, weak out
    assert_same(nn.logsumexp(3), jlse(3))
    assert_same(nn.logmeanexp(X, axis=1, keepdims=True), jax.nn.logmeanexp(X, axis=1,
                                                                            keepdims=True))
    z = X[0].astype(np.complex64) + 1j
    assert_same(nn.logsumexp(z, axis=0), jlse(z, axis=0), 1e-6)
    gb = xform.grad(lambda a, b: nn.logsumexp(a, b=b), (0, 1))(X[0, 0], np.abs(b[0, 0]))
    jb = jax.grad(lambda a, b: jax.nn.logsumexp(a, b=b), (0, 1))(X[0, 0], np.abs(b[0, 0]))
    for o, t in zip(gb, jb):
        assert_same(o, t, 1e-6, weak=False)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_grads_transforms(name):
    """Gradients with where= vs jax; vmap with a batched mask vs a loop; jit vs eager."""
    xf, jf = both(name)
    ct = RNG.randn(*X.shape).astype(np.float32)
    loss = lambda lib, f: lambda x, w: (lib.numpy.where(w, f(x, where=w), 0) * ct).sum()
    assert_same(xform.grad(loss(xform, xf))(X, W), jax.grad(loss(jax, jf))(X, W), 1e-5,
                weak=False)
    looped = np.stack([np.asarray(xf(X[:, i], axis=0, where=W[:, i])) for i in range(4)], 1)
    assert_same(xform.vmap(lambda x, w: xf(x, axis=0, where=w), 1, 1)(X, W), looped,
                weak=False)
    assert_same(xform.jit(lambda x: xf(x, axis=(0, 2)))(X), xf(X, axis=(0, 2)), 1e-6)


FAMILY = {"softmax": nn.softmax, "log_softmax": nn.log_softmax,
          "logsumexp_b": lambda x: nn.logsumexp(x, axis=0, b=np.array([[1.], [2.]])),
          "softmax_where": lambda x: nn.softmax(x, where=np.array([True, False, True]))}


@pytest.mark.parametrize("name", FAMILY)
@settings(max_examples=3)
@given(x=arrays((2, 3), np.float64))
def test_softmax_family_check_grads(x64, name, x):
    check_grads(FAMILY[name], (x,), order=2, modes=("fwd", "rev"))


# ---- standardize, one_hot ----

def test_standardize():
    mean, var = X.mean(-1, keepdims=True), X.var(-1, keepdims=True)
    for kw in ({}, dict(axis=0), dict(axis=(0, 2), algorithm="stable"), dict(where=W),
               dict(mean=mean), dict(mean=mean, variance=var, epsilon=0.1),
               dict(axis=(1,), where=W, algorithm="stable")):
        assert_same(nn.standardize(X, **kw), jax.nn.standardize(X, **kw), 2e-6)
    h = X.astype(np.float16)
    assert_same(nn.standardize(h), jax.nn.standardize(h), TOL[np.float16])
    f = lambda lib: lib.grad(lambda x: (lib.nn.standardize(x, algorithm="stable") ** 3).sum())
    assert_same(f(xform)(X), f(jax)(X), 1e-4, weak=False)
    with pytest.raises(ValueError, match="Unknown algorithm 'slow'. Expected 'fast' or "
                                         "'stable'"):
        nn.standardize(X, algorithm="slow")


@given(x=arrays((2, 4), np.float64))
@settings(max_examples=3)
def test_standardize_check_grads(x64, x):
    x = x + np.arange(4.)   # keep the variance away from 0
    check_grads(lambda v: nn.standardize(v, algorithm="stable"), (x,), order=2)


def test_one_hot():
    idx = np.array([[0, 2, -1], [3, 1, 1]], np.int32)
    for kw in ({}, dict(axis=0), dict(axis=1), dict(dtype=jnp.int32),
               dict(dtype=jnp.bfloat16, axis=-2)):
        assert_same(nn.one_hot(idx, 3, **kw), jax.nn.one_hot(idx, 3, **kw))
    assert_same(nn.one_hot(2, 4), jax.nn.one_hot(2, 4))
    looped = np.stack([np.asarray(nn.one_hot(r, 4)) for r in idx])
    assert_same(xform.vmap(lambda r: nn.one_hot(r, 4))(idx), looped)
    assert_same(xform.jit(lambda r: nn.one_hot(r, 4, axis=0))(idx), nn.one_hot(idx, 4, axis=0))
    with pytest.warns(DeprecationWarning, match="should be integer-typed; got dtype=float32"):
        assert_same(nn.one_hot(np.array([1., 2.5], np.float32), 3),
                    jax.nn.one_hot(np.array([1, 5], np.int32), 3))
    with pytest.raises(xform.errors.ConcretizationTypeError, match="num_classes"):
        xform.jit(nn.one_hot)(idx, 3)
    with pytest.raises(ValueError, match="axis 3 is out of bounds"):
        nn.one_hot(idx, 3, axis=3)


def test_one_hot_x64(x64):
    assert_same(nn.one_hot(np.array([1]), 2), jax.nn.one_hot(np.array([1]), 2))


# ---- dot_product_attention ----

def test_dot_product_attention():
    """MHA/GQA with bias, masks, causal, windows and sequence lengths vs jax; the residual;
    gradients; rank-3 inputs; vmap vs a loop; bfloat16."""
    r = np.random.RandomState(1)
    B, T, S, N, K, H = 2, 5, 6, 4, 2, 8
    q, k, v = (r.randn(*s).astype(np.float32) for s in ((B, T, N, H), (B, S, K, H),
                                                         (B, S, K, H)))
    bias, mask = r.randn(B, N, T, S).astype(np.float32), r.rand(1, 1, T, S) > 0.3
    lens = dict(query_seq_lengths=np.array([3, 5], np.int32),
                key_value_seq_lengths=np.array([6, 2], np.int32))
    _, jf = both("dot_product_attention")
    for kw in (dict(bias=bias, mask=mask), dict(is_causal=True, local_window_size=(1, 2)),
               dict(scale=0.3, bias=bias[:, :1], local_window_size=1, **lens)):
        assert_same(nn.dot_product_attention(q, k, v, **kw), jf(q, k, v, **kw), 1e-6)
    for o, t in zip(nn.dot_product_attention(q, k, v, is_causal=True, return_residual=True),
                    jf(q, k, v, is_causal=True, return_residual=True)):
        assert_same(o, t, 1e-6)
    loss = lambda lib: lib.jit(lib.grad(lambda *a: (lib.nn.dot_product_attention(
        *a, bias=bias, is_causal=True) ** 2).sum(), (0, 1, 2)))
    for o, t in zip(loss(xform)(q, k, v), loss(jax)(q, k, v)):
        assert_same(o, t, 1e-5, weak=False)
    assert_same(nn.dot_product_attention(q[0], k[0], v[0]), jf(q[0], k[0], v[0]), 1e-6)
    looped = np.stack([np.asarray(nn.dot_product_attention(q[i], k[i], v[i]))
                       for i in range(B)])
    assert_same(xform.vmap(nn.dot_product_attention)(q, k, v), looped, 1e-6)
    bq, bk = q.astype(jnp.bfloat16), k.astype(jnp.bfloat16)
    assert_same(nn.dot_product_attention(bq, bk, bk), jf(bq, bk, bk), 1e-2)


def test_dot_product_attention_errors():
    q, k = np.ones((1, 2, 3, 4), np.float32), np.ones((1, 2, 2, 4), np.float32)
    with pytest.raises(ValueError, match="number of query heads must be a multiple of "
                                         "key/value heads, but got 3 vs 2"):
        nn.dot_product_attention(q, k, k)
    v5 = np.ones((1, 2, 2, 5), np.float32)
    with pytest.raises(ValueError, match=r"value shape should be \(1, 2, 2, 4\): but got "
                                         r"\(1, 2, 2, 5\)"):  # (jax.nn's, with its options)
        nn.dot_product_attention(q[:, :, :2], k, v5, implementation="xla")
    # a value depth other than the key's is Flax's plain call (jax.nn rejects it)
    assert nn.dot_product_attention(q[:, :, :2], k, v5).shape == (1, 2, 2, 5)
    # A float mask is Flax's (xform.nn.dot_product_attention is flax.linen's too): accepted.
    fmask = np.tril(np.ones((1, 1, 2, 2), np.float32))
    assert_same(nn.dot_product_attention(k, k, k, mask=fmask),
                nn.dot_product_attention(k, k, k, mask=fmask > 0), 1e-6)
    for impl, err in (("cudnn", RuntimeError), ("bogus", ValueError)):  # JAX's on CPU
        with pytest.raises(err, match="cuDNN is not detected|Unsupported implementation"):
            jax.nn.dot_product_attention(k, k, k, implementation=impl)
        with pytest.raises(err, match="cuDNN is not detected|Unsupported implementation"):
            nn.dot_product_attention(k, k, k, implementation=impl)


# ---- xform.scipy.special ----

SPECIAL1 = ["erf", "erfc", "gammaln", "digamma", "expit", "logit", "entr"]


@pytest.mark.parametrize("name", SPECIAL1 + ["xlogy", "xlog1py", "logsumexp", "softmax"])
def test_scipy_special_values_and_grads(name):
    import jax.scipy.special as jsp
    from xform.scipy import special as xsp
    xf, jf = getattr(xsp, name), jax.jit(getattr(jsp, name))
    x = np.array([-2., -0.5, 0., 1e-3, 0.25, 0.5, 0.9, 1., 3., 30.], np.float32)
    args = (x, np.array([0., 0., 0., 2., -1., 0.5, 1e-3, -1., 2., 0.], np.float32))
    args = args if name in ("xlogy", "xlog1py") else args[:1]
    assert_same(xf(*args), jf(*args), 2e-6)
    assert_same(xf(*(a.astype(np.float16) for a in args)),
                jf(*(a.astype(np.float16) for a in args)), 2e-3)
    if name == "softmax":   # axis -1 of a scalar: an error in both
        return
    assert_same(xf(*(0.5 for _ in args)), jf(*(0.5 for _ in args)))   # weak
    assert_same(xf(*(np.int32(2) for _ in args)), jf(*(np.int32(2) for _ in args)))
    if name != "logsumexp":
        d = lambda lib, f: lib.jit(lib.vmap(lib.grad(f, tuple(range(len(args))))))
        for o, t in zip(d(xform, xf)(*args), d(jax, getattr(jsp, name))(*args)):
            assert (np.isfinite(o) == np.isfinite(t)).all(), (o, t)
            assert_same(o, t, 1e-5, weak=False)


def test_scipy_special_check_grads_and_errors(x64):
    from xform.scipy import special as xsp
    p = np.array([0.2, 0.5, 0.7])
    for f, args in ((xsp.logit, (p,)), (xsp.xlogy, (p - 0.5, p)), (xsp.xlog1py, (p, p)),
                    (xsp.entr, (p,)), (xsp.digamma, (p + 1,))):
        check_grads(f, args, order=2, modes=("fwd", "rev"))
    import jax.scipy.special as jsp
    for argnum in (0, 1):   # at the corners: -inf and nan at (0, 0), as jax
        for y in (0., 1.):
            assert_same(xform.grad(xsp.xlogy, argnum)(0., y),
                        jax.grad(jsp.xlogy, argnum)(0., y), weak=False)
    with pytest.raises(ValueError, match="entr does not support complex-valued inputs"):
        xsp.entr(np.array([1j]))


# ---- docstring examples ----

@pytest.mark.parametrize("module", [_activations, _functions, special_basic],
                         ids=lambda m: m.__name__)
def test_docstring_examples(module):
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        tests = finder.find(module, module.__name__, globs={})
        if module is _activations:   # custom_jvp objects: not found as functions
            for name in ("relu", "relu6", "log1mexp"):
                tests += finder.find(getattr(module, name), name, globs={})
        for test in tests:
            runner.run(test)
    assert runner.failures == 0 and runner.tries > 8
