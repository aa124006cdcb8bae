"""The samplers beyond uniform/normal against jax.random: the same values for the same
key, bit for bit, under jit, jit(vmap) over keys and eagerly, every float dtype;
gradients of the reparameterized gamma family; argument errors."""
import re

import jax
import jax.random as jr
import numpy as np
import pytest

import xform
import xform.random as random

F32 = np.float32
A4 = np.array([0.3, 1.0, 2.5, 10.0], F32)

# name -> (args, kwargs, ulps): ulps is how far apart the two programs may be (0: bit for
# bit). xform mirrors JAX's jit boundaries (each sampler's impl is a jitted call, its
# parameters call arguments), embeds small closed-over arrays (A4 here) as constants as
# JAX does, and factors Cholesky with LAPACK's potrf on CPU as JAX: so XLA folds and
# fuses both programs alike and every budget is 0.
CASES = {
    "weibull_min": ((1.5, 2.0), dict(shape=(5,)), 0),
    "maxwell": ((), dict(shape=(5,)), 0),
    "double_sided_maxwell": ((0.5, 2.0), dict(shape=(5,)), 0),
    "multivariate_normal": ((np.array([1., 2.], F32), np.array([[2., .5], [.5, 1.]], F32)),
                            dict(shape=(4,)), 0),
    "orthogonal": ((3,), dict(shape=(2,)), 0),
    "triangular": ((0.0, 0.3, 1.0), dict(shape=(5,)), 0),
    "wald": ((1.5,), dict(shape=(5,)), 0),
    "gamma": ((A4,), {}, 0),
    "loggamma": ((A4,), {}, 0),
    "beta": ((2.0, 0.5), dict(shape=(4,)), 0),
    "dirichlet": ((np.array([0.5, 1., 2.], F32),), dict(shape=(2,)), 0),
    "t": ((3.0,), dict(shape=(4,)), 0),
    "chisquare": ((3.0,), dict(shape=(4,)), 0),
    "f": ((2.0, 5.0), dict(shape=(4,)), 0),
    "generalized_normal": ((1.5,), dict(shape=(4,)), 0),
    "ball": ((3,), dict(shape=(2,)), 0),
    "categorical": ((np.log(np.array([[.1, .2, .7], [.5, .25, .25]], F32)),),
                    dict(shape=(4, 2)), 0),
    "permutation": ((10,), {}, 0),
    "choice": ((10,), dict(shape=(3,), replace=False), 0),
    "poisson": ((np.array([0.5, 3., 12., 50.], F32),), {}, 0),
    "geometric": ((0.3,), dict(shape=(5,)), 0),
    "binomial": ((np.array([5., 20., 100., 50.], F32), np.array([.3, .7, .4, .9], F32)),
                 {}, 0),
    "multinomial": ((20.0, np.array([.2, .3, .5], F32)), dict(dtype=np.int32), 0),
}
FLOAT_SAMPLERS = ["weibull_min", "maxwell", "triangular", "wald", "gamma"]


def close(got, want, ulps):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    if ulps == 0 or not np.issubdtype(got.dtype, np.floating):
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_max_ulp(got.astype(np.float32), want.astype(np.float32), ulps)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sampler_matches_jax_under_jit_and_eagerly(name):
    args, kw, ulps = CASES[name]
    fx = xform.jit(lambda k: getattr(random, name)(k, *args, **kw))
    fj = jax.jit(lambda k: getattr(jr, name)(k, *args, **kw))
    for seed in (0, 7, 123):
        close(fx(random.PRNGKey(seed)), fj(jr.PRNGKey(seed)), ulps)
    # eagerly each sampler is one compiled call (its jitted impl), as JAX's
    close(getattr(random, name)(random.PRNGKey(7), *args, **kw),
          getattr(jr, name)(jr.PRNGKey(7), *args, **kw), ulps)


@pytest.mark.parametrize("name", ["gamma", "beta", "poisson", "binomial", "categorical",
                                  "choice", "permutation", "wald", "triangular"])
def test_sampler_matches_jax_under_jit_vmap_over_keys(name):
    # (gamma, beta: random_gamma's batching rule flattens keys and lanes, as JAX's)
    args, kw, ulps = CASES[name]
    keys, jkeys = random.split(random.PRNGKey(1), 3), jr.split(jr.PRNGKey(1), 3)
    close(xform.jit(xform.vmap(lambda k: getattr(random, name)(k, *args, **kw)))(keys),
          jax.jit(jax.vmap(lambda k: getattr(jr, name)(k, *args, **kw)))(jkeys), ulps)


@pytest.mark.parametrize("name,args", [("gamma", (0.7,)), ("wald", (1.5,))])
def test_python_float_parameter_is_a_call_argument_as_in_jax(name, args):
    # Regression: JAX jits each sampler's impl, so under an outer jit a closed-over
    # Python float reaches the sampler's body as a call argument. Inlined, it was a
    # literal XLA folded differently (gamma up to 15 ulp off, wald 32).
    fx = xform.jit(lambda k: getattr(random, name)(k, *args, (1000,)))
    text = fx.lower(random.PRNGKey(0)).as_text()
    assert re.search(rf"call @_{name}\w*\(%arg0, %cst", text), text[:400]
    fj = jax.jit(lambda k: getattr(jr, name)(k, *args, (1000,)))
    for seed in (0, 1, 2):
        close(fx(random.PRNGKey(seed)), fj(jr.PRNGKey(seed)), 0)


@pytest.mark.parametrize("dtype", [np.float16, jax.numpy.bfloat16])
@pytest.mark.parametrize("name", FLOAT_SAMPLERS)
def test_half_precision_samplers(name, dtype):
    args, kw, _ = CASES[name]
    args = tuple(a.astype(dtype) if isinstance(a, np.ndarray) else a for a in args)
    got = xform.jit(lambda k: getattr(random, name)(k, *args, dtype=dtype, **kw))(
        random.PRNGKey(5))
    want = jax.jit(lambda k: getattr(jr, name)(k, *args, dtype=dtype, **kw))(jr.PRNGKey(5))
    close(got, want, 0)


def test_float64_and_int64_under_x64(x64):
    k, jk = random.PRNGKey(2), jr.PRNGKey(2)
    for name in ("weibull_min", "triangular"):
        args, kw, ulps = CASES[name]
        got = xform.jit(lambda k: getattr(random, name)(k, *args, dtype=np.float64, **kw))(k)
        close(got, getattr(jr, name)(jk, *args, dtype=np.float64, **kw), ulps)
    # the default dtype is float64 (traced only: no compile needed to see it)
    assert xform.eval_shape(lambda k: random.wald(k, 1.0), k).dtype == np.float64
    for name in ("poisson", "geometric"):
        args, kw, _ = CASES[name]
        close(xform.jit(lambda k: getattr(random, name)(k, *args, **kw))(k),
              getattr(jr, name)(jk, *args, **kw), 0)


@pytest.mark.parametrize("kw", [dict(axis=0), dict(axis=1, shape=(3, 2)),
                                dict(shape=(3, 2), replace=False, axis=-1)])
def test_categorical_axis_shape_replace(kw):
    logits = np.log(np.array([[.1, .2, .3, .4], [.4, .3, .2, .1]], F32))
    close(xform.jit(lambda k: random.categorical(k, logits, **kw))(random.PRNGKey(4)),
          jr.categorical(jr.PRNGKey(4), logits, **kw), 0)


def test_permutation_and_choice_variants():
    k, jk = random.PRNGKey(8), jr.PRNGKey(8)
    x = np.arange(24, dtype=F32).reshape(4, 6)
    for kw in (dict(axis=1), dict(axis=0, independent=True), dict(axis=1, independent=True)):
        close(random.permutation(k, x, **kw), jr.permutation(jk, x, **kw), 0)
    p = np.array([.125, .25, .5, .125], F32)      # exact cumulative sums
    for kw in (dict(shape=(5,)), dict(shape=(2, 3), p=p), dict(shape=(2,), p=p, replace=False),
               dict(shape=(3,), axis=1, replace=False)):
        a = x if kw.get("axis") == 1 else 4
        close(xform.jit(lambda k: random.choice(k, a, **kw))(k), jr.choice(jk, a, **kw), 0)


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_methods(method):
    mean = np.array([1., -1., 0.5], F32)
    cov = np.array([[2., .3, .1], [.3, 1., .2], [.1, .2, .5]], F32)
    got = xform.jit(lambda k: random.multivariate_normal(k, mean, cov, (6,), method=method))(
        random.PRNGKey(0))
    want = jr.multivariate_normal(jr.PRNGKey(0), mean, cov, (6,), method=method)
    # different LAPACK/eigensolver paths: factors agree to rounding, not bit for bit
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)


def test_integer_dtypes():
    k, jk = random.PRNGKey(6), jr.PRNGKey(6)
    for dt in (np.int8, np.int16, np.uint8):
        close(random.geometric(k, 0.4, (6,), dt), jr.geometric(jk, 0.4, (6,), dt), 0)
    close(random.poisson(k, 4.0, (6,), np.int16), jr.poisson(jk, 4.0, (6,), np.int16), 0)


# ---- gradients (implicit reparameterization) ----

@pytest.mark.parametrize("name,args", [("gamma", (np.array([0.4, 1.5, 6.0], F32),)),
                                       ("beta", (np.array([0.7, 2.0, 5.0], F32), 1.5)),
                                       ("dirichlet", (np.array([0.7, 2.0, 5.0], F32),))])
def test_reparameterized_grads_match_jax(name, args):
    k, jk = random.PRNGKey(11), jr.PRNGKey(11)
    wts = np.array([1.0, -2.0, 0.5], F32)
    fx = lambda a: (getattr(random, name)(k, a, *args[1:]) * wts).sum()
    fj = lambda a: (getattr(jr, name)(jk, a, *args[1:]) * wts).sum()
    got, want = xform.grad(fx)(args[0]), jax.grad(fj)(args[0])
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=1e-5)
    if name == "gamma":
        got = xform.jit(xform.grad(fx))(args[0])
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=1e-5)


def test_gamma_grad_vs_finite_differences_of_the_cdf():
    # Implicit reparameterization: dx/da = -(dF(x; a)/da) / pdf(x; a) at the sample x;
    # checked with central differences of scipy's regularized incomplete gamma.
    from scipy import special, stats
    a = np.array([0.3, 0.5, 1.0, 2.0, 7.0, 30.0], F32)
    # samples and their elementwise gradient from one vjp (no separate forward compile)
    x, pullback = xform.vjp(lambda a: random.gamma(random.PRNGKey(0), a), a)
    sample_grad, = pullback(np.ones_like(a))
    a64, x64 = a.astype(np.float64), np.asarray(x).astype(np.float64)
    h = 1e-5 * a64
    cdf_dot = (special.gammainc(a64 + h, x64) - special.gammainc(a64 - h, x64)) / (2 * h)
    want = -cdf_dot / stats.gamma.pdf(x64, a64)
    np.testing.assert_allclose(np.asarray(sample_grad), want, rtol=2e-3)


# ---- errors ----

def test_errors_name_the_argument():
    k = random.PRNGKey(0)
    with pytest.raises(ValueError, match=r"p must be None or a 1D vector with the same size "
                                         r"as a.shape\[axis\]. p has shape \(3,\)"):
        random.choice(k, 5, (2,), p=np.ones(3, F32) / 3)
    with pytest.raises(ValueError, match=r"Cannot take a larger sample \(size 6\) than "
                                         r"population \(size 5\)"):
        random.choice(k, 5, (6,), replace=False)
    with pytest.raises(TypeError, match="shape argument of jax.random.choice must be a "
                                        "sequence"):
        random.choice(k, 5, 3)
    with pytest.raises(ValueError, match=r"Number of samples without replacement \(5\) "
                                         r"cannot exceed number of categories \(3\)"):
        random.categorical(k, np.zeros(3, F32), shape=(5,), replace=False)
    with pytest.raises(ValueError, match="method must be one of"):
        random.multivariate_normal(k, np.zeros(2), np.eye(2), method="qr")
    with pytest.raises(ValueError, match=r"cov.shape == \(..., n, n\) for n=2"):
        random.multivariate_normal(k, np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match="dtype argument to `poisson` must be an int"):
        random.poisson(k, 1.0, dtype=np.float32)
    with pytest.raises(ValueError, match=r"gamma: parameter of shape \(3,\) cannot be "
                                         r"broadcast to the requested shape \(2,\)"):
        random.gamma(k, np.ones(3, F32), (2,))
    with pytest.raises(TypeError, match="orthogonal: n must be a static integer"):
        xform.jit(lambda n: random.orthogonal(k, n))(3)


def test_dtype_checks_match_jax():
    # A wrong dtype kind is JAX's ValueError (was a TypeError); a strongly typed
    # parameter wider than the sample dtype is JAX's TypePromotionError (was rounded);
    # lognormal and orthogonal take complex dtypes (were refused).
    k, jk = random.PRNGKey(3), jr.PRNGKey(3)
    for lib, key in [(random, k), (jr, jk)]:
        with pytest.raises(ValueError, match="`uniform` must be a float dtype, got int32"):
            lib.uniform(key, (2,), np.int32)
        with pytest.raises(ValueError, match="`normal` must be a float or complex dtype"):
            lib.normal(key, (2,), np.int8)
        with pytest.raises(ValueError, match="In arguments to pareto, cannot safely cast "
                                             "argument of type float32 to float16"):
            lib.pareto(key, np.float32(2), (2,), np.float16)
    close(random.pareto(k, 2, (2,), np.float16), jr.pareto(jk, 2, (2,), np.float16), 0)
    close(random.lognormal(k, .5, (3,), np.complex64),
          jr.lognormal(jk, .5, (3,), np.complex64), 0)
    close(random.orthogonal(k, 2, (), np.complex64), jr.orthogonal(jk, 2, (), np.complex64), 0)


def test_high_modes():
    k, jk = random.PRNGKey(4), jr.PRNGKey(4)
    modes = ("high", "highest")   # highest: float32 from 64 bits (clz), as JAX
    got = xform.jit(lambda k: [random.gumbel(k, (2, 6), mode=m) for m in modes])(k)
    for g, mode in zip(got, modes):                  # (one compile for both modes)
        close(g, jr.gumbel(jk, (2, 6), mode=mode), 0)
        close(random.gumbel(k, (6,), np.float16, mode=mode),
              jr.gumbel(jk, (6,), np.float16, mode=mode), 0)
    close(xform.jit(lambda k: random.bernoulli(k, 0.3, (20,), mode="high"))(k),
          jr.bernoulli(jk, 0.3, (20,), mode="high"), 0)
