"""xform.random against jax.random: bit-exact keys, split, fold_in, bits and
samplers, eagerly, under jit and under vmap over keys; error texts."""
import jax
import jax.random as jr
import numpy as np
import pytest

import xform
import xform.random as random
from xform.lax.prng import threefry2x32

SEEDS = [0, 42, -1, 2**31 - 1]
FLOATS = [np.float32, np.float16, jax.numpy.bfloat16]


def eq(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_threefry_primitive_matches_jax():
    from jax._src.random.threefry2x32 import threefry2x32_p as jp
    k = np.uint32(7), np.uint32(123456789)
    x1 = np.arange(6, dtype=np.uint32) * np.uint32(977)
    x2 = np.arange(6, dtype=np.uint32)
    for got, want in zip(threefry2x32(*k, x1, x2), jp.bind(*k, x1, x2)):
        eq(got, want)
    got = xform.jit(threefry2x32)(*k, x1, x2)
    eq(got[0], jp.bind(*k, x1, x2)[0])
    # vmap over the key word, the counters not mapped
    ks = np.arange(4, dtype=np.uint32)
    got = xform.vmap(lambda a: threefry2x32(a, k[1], x1, x2)[1])(ks)
    eq(got, np.stack([np.asarray(jp.bind(a, k[1], x1, x2)[1]) for a in ks]))


def test_threefry_lowering_rolled_on_cpu_unrolled_elsewhere():
    # As JAX's: the 20 rounds as a 5-step loop on CPU (a quarter of the ops for XLA to
    # compile), straight-line on other platforms.
    from jax._src.random.threefry2x32 import threefry2x32_p as jp
    from xform.interpreters import mlir
    from xform.lax.prng import _threefry_composition
    closed = xform.make_jaxpr(lambda k: random.bits(k, (3,)))(random.PRNGKey(0))
    assert mlir.lower_jaxpr_to_module(closed, platform="cpu").count("stablehlo.while") == 1
    assert "stablehlo.while" not in mlir.lower_jaxpr_to_module(closed, platform="cuda")
    k = np.uint32(7), np.uint32(123456789)
    x1, x2 = np.arange(6, dtype=np.uint32) * np.uint32(977), np.arange(6, dtype=np.uint32)
    for rolled in (False, True):
        for got, want in zip(_threefry_composition(*k, x1, x2, rolled=rolled),
                             jp.bind(*k, x1, x2)):
            eq(got, want)


def test_threefry_broadcasts_size_one_axes_and_vmap_keeps_keys_small():
    # As JAX's primitive: keys (3, 1) against counters (1, 4). A vmapped split binds it
    # so, and the rolled loop carries (n, 1) key words, not (n, k) (1.2x JAX's time
    # for jit(gamma) when they were broadcast).
    from jax._src.random.threefry2x32 import threefry2x32_p as jp
    from xform.lax.prng import _threefry_composition
    k1, k2 = (np.arange(3, dtype=np.uint32)[:, None] * np.uint32(m) for m in (7, 11))
    x1, x2 = np.zeros((1, 4), np.uint32), np.arange(4, dtype=np.uint32)[None]
    for rolled in (False, True):
        for got, want in zip(_threefry_composition(k1, k2, x1, x2, rolled=rolled),
                             jp.bind(k1, k2, x1, x2)):
            eq(got, want)
    # vmap over the key words, as a vmapped split binds it
    jaxpr = xform.make_jaxpr(xform.vmap(lambda a, b: threefry2x32(a, b, x1[0], x2[0])))(
        k1[:, 0], k2[:, 0])
    eqn, = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "threefry2x32"]
    assert [tuple(v.aval.shape) for v in eqn.invars] == [(3, 1), (3, 1), (1, 4), (1, 4)]
    with pytest.raises(TypeError, match=r"threefry2x32 got incompatible shapes.*\(2, 3\)"):
        threefry2x32(k1, k2, np.zeros((2, 3), np.uint32), np.uint32(0))


def test_threefry_not_differentiable_and_bad_dtype():
    with pytest.raises(TypeError, match="threefry2x32 requires uint32 arguments, got x1"):
        threefry2x32(np.uint32(0), np.uint32(0), np.zeros(3, np.int32), np.zeros(3, np.uint32))


@pytest.mark.parametrize("seed", SEEDS)
def test_key_split_fold_in_bits(seed):
    k, jk = random.PRNGKey(seed), jr.PRNGKey(seed)
    eq(k, jk)
    eq(random.split(k), jr.split(jk))
    eq(random.split(k, (2, 3)), jr.split(jk, (2, 3)))
    eq(random.fold_in(k, 12345), jr.fold_in(jk, 12345))
    eq(random.fold_in(k, 2**32 - 3), jr.fold_in(jk, 2**32 - 3))  # flax hashes to uint32
    for dt in (np.uint8, np.uint16, np.uint32):
        eq(random.bits(k, (3, 5), dt), jr.bits(jk, (3, 5), dt))


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_normal_bit_exact(dtype):
    scaled = xform.jit(lambda k: random.uniform(k, (7,), dtype, -2.0, 3.0))  # one compile
    for seed in SEEDS[:3]:
        k, jk = random.PRNGKey(seed), jr.PRNGKey(seed)
        eq(random.uniform(k, (4, 3), dtype), jr.uniform(jk, (4, 3), dtype))
        # scaled: eagerly too (one compiled call of the jitted impl, as JAX's eager path)
        want = jr.uniform(jk, (7,), dtype, -2.0, 3.0)
        eq(scaled(k), want)
        eq(random.uniform(k, (7,), dtype, -2.0, 3.0), want)
        eq(random.normal(k, (4, 3), dtype), jr.normal(jk, (4, 3), dtype))


def test_complex_normal():
    # real and imaginary parts from split keys, each scaled by 1/sqrt(2), as JAX's
    k, jk = random.PRNGKey(2), jr.PRNGKey(2)
    eq(random.normal(k, (2, 3), np.complex64), jr.normal(jk, (2, 3), np.complex64))
    eq(xform.jit(lambda k: random.normal(k, (4,), np.complex64))(k),
       jr.normal(jk, (4,), np.complex64))


def test_bernoulli_truncated_normal():
    k, jk = random.PRNGKey(3), jr.PRNGKey(3)
    eq(random.bernoulli(k, 0.3, (50,)), jr.bernoulli(jk, 0.3, (50,)))
    p = np.linspace(0, 1, 6, dtype=np.float32)
    eq(random.bernoulli(k, p), jr.bernoulli(jk, p))
    # like with like: on GPU, JAX's own jitted and eager values differ in the last bits
    eq(xform.jit(lambda k: random.truncated_normal(k, -1.0, 2.0, (20,)))(k),
       jax.jit(lambda k: jr.truncated_normal(k, -1.0, 2.0, (20,)))(jk))
    eq(random.truncated_normal(k, -1.0, 2.0, (20,)), jr.truncated_normal(jk, -1.0, 2.0, (20,)))


def test_jit_and_vmap_over_keys():
    keys, jkeys = random.split(random.PRNGKey(5), 4), jr.split(jr.PRNGKey(5), 4)
    f = xform.jit(lambda k: random.normal(k, (3, 2)))
    eq(f(keys[0]), jr.normal(jkeys[0], (3, 2)))
    eq(xform.vmap(lambda k: random.normal(k, (3,)))(keys),
       jax.vmap(lambda k: jr.normal(k, (3,)))(jkeys))
    eq(xform.vmap(lambda k: random.split(k, 3))(keys), jax.vmap(lambda k: jr.split(k, 3))(jkeys))
    eq(xform.vmap(lambda k: random.fold_in(k, 9))(keys), jax.vmap(lambda k: jr.fold_in(k, 9))(jkeys))
    eq(xform.jit(lambda k: random.uniform(k, (5,)))(keys[1]), jr.uniform(jkeys[1], (5,)))


def test_grad_through_normal_scale():
    k = random.PRNGKey(0)
    g = xform.grad(lambda s: (s * random.normal(k, (4,))).sum())(2.0)
    np.testing.assert_allclose(float(g), float(np.asarray(random.normal(k, (4,))).sum()),
                               rtol=1e-6)


def test_errors():
    with pytest.raises(TypeError, match="seed must be an integer"):
        random.PRNGKey(1.5)
    with pytest.raises(TypeError, match="JAX encountered invalid PRNG key data: expected "
                                        "key_data.dtype = uint32; got dtype=float32"):
        random.normal(np.zeros(2, np.float32), (3,))
    with pytest.raises(TypeError, match="shape must be a tuple of static integers"):
        xform.jit(lambda n: random.normal(random.PRNGKey(0), (n,)))(3)
    with pytest.raises(ValueError, match=r"minval of shape \(3,\) cannot be broadcast"):
        random.uniform(random.PRNGKey(0), (2,), minval=np.zeros(3))
    for name in ("uniform", "normal", "exponential"):   # as JAX's (nn.initializers' too)
        with pytest.raises(ValueError) as want:
            getattr(jr, name)(jr.PRNGKey(0), (2,), np.int32)
        with pytest.raises(ValueError) as got:
            getattr(random, name)(random.PRNGKey(0), (2,), np.int32)
        assert str(got.value) == str(want.value)
    with pytest.raises(ValueError, match="dtype argument to `bits` must be an unsigned "
                                         "int dtype, got int32"):
        random.bits(random.PRNGKey(0), (2,), np.int32)


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")
def test_64bit_dtypes_broadcast_bounds_and_out_of_range_data_match_jax():
    """Issue 22 #4, #6, #10: without x64 a 64-bit dtype is canonicalized before drawing
    (bits(uint64) is the uint32 draw); bounds of different shapes broadcast; integer
    data out of range is an OverflowError, never wrapped or narrowed."""
    k, jk = random.PRNGKey(1), jr.PRNGKey(1)
    draws = [lambda r, k: r.bits(k, (3,), "uint64"), lambda r, k: r.bits(k, (3,), np.uint16),
             lambda r, k: r.randint(k, (3,), -5, 10, "int64"),
             lambda r, k: r.uniform(k, (3,), "float64"),
             lambda r, k: r.rademacher(k, (3,), "int64"),
             lambda r, k: r.poisson(k, 3.0, (3,), "int64")]
    lo, hi = np.full((2, 1), -1.0, np.float32), np.array([0.5, 1.0, 2.0], np.float32)
    draws += [lambda r, k: r.uniform(k, (2, 3), minval=lo, maxval=hi),
              lambda r, k: r.uniform(k, (2, 3), minval=hi, maxval=lo + 5),
              lambda r, k: r.truncated_normal(k, lo, hi),
              lambda r, k: r.truncated_normal(k, lo, hi, (4, 2, 3)),
              lambda r, k: r.randint(k, (2, 3), lo.astype(np.int32), (hi * 4).astype(np.int32))]
    # like with like (jit against jit): one compile per library for all the draws
    got = xform.jit(lambda k: [f(random, k) for f in draws])(k)
    want = jax.jit(lambda k: [f(jr, k) for f in draws])(jk)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        eq(g, w)
    eq(random.bits(k, (3,), "uint64"), want[0])            # eagerly too
    eq(random.uniform(k, (2, 3), minval=lo, maxval=hi), want[6])
    for lib, key in [(jr, jk), (random, k)]:
        for bad in [-1, 2**32]:
            with pytest.raises(OverflowError, match="out of bounds for uint32"):
                lib.fold_in(key, bad)
        for seed in [2**63, -2**63 - 1]:
            with pytest.raises(OverflowError):
                lib.PRNGKey(seed)
        with pytest.raises(TypeError, match="got dtype=uint64"):
            lib.wrap_key_data(np.array([2**40, 1], np.uint64))
    for data in [np.int32(-1), 2**32 - 1, 7.5]:
        eq(random.fold_in(k, data), jr.fold_in(jk, data))
    for seed in [2**63 - 1, -2**63, -2**40 - 3]:
        eq(random.PRNGKey(seed), jr.PRNGKey(seed))


@pytest.mark.parametrize("name", [   # one test each: the 40 s spread over the workers
    "xform.random._core", "xform.random._derived", "xform.random._keys",
    "xform.random._continuous", "xform.random._gamma", "xform.random._discrete",
    "xform.lax.prng"])
def test_docstring_examples(name):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, name


@pytest.mark.parametrize("name,args", [
    ("exponential", ()), ("laplace", ()), ("logistic", ()), ("gumbel", ()),
    ("cauchy", ()), ("pareto", (3.0,)), ("rayleigh", (2.0,))])
def test_derived_samplers_bit_exact_under_jit(name, args):
    # one jitted function per library for both seeds and dtypes (no re-jit per seed)
    fx = xform.jit(lambda k: [getattr(random, name)(k, *args, shape=(6,), dtype=dt)
                              for dt in (np.float32, np.float16)])
    for seed in (0, 11):
        k, jk = random.PRNGKey(seed), jr.PRNGKey(seed)
        for got, dt in zip(fx(k), (np.float32, np.float16)):
            eq(got, getattr(jr, name)(jk, *args, shape=(6,), dtype=dt))
    keys, jkeys = random.split(k, 3), jr.split(jk, 3)
    eq(xform.jit(xform.vmap(lambda k: getattr(random, name)(k, *args, shape=(4,))))(keys),
       jax.vmap(lambda k: getattr(jr, name)(k, *args, shape=(4,)))(jkeys))


def test_rademacher():
    eq(random.rademacher(random.PRNGKey(1), (10,)), jr.rademacher(jr.PRNGKey(1), (10,)))


def test_lognormal():
    # JAX's _lognormal is an inline jit: no call boundary under jit, one compiled call
    # eagerly (op by op, float16's exp(normal * sigma) rounded once more: 2 ulp off).
    want = jr.lognormal(jr.PRNGKey(0), 0.7, (16,), np.float16)
    eq(xform.jit(lambda k: random.lognormal(k, 0.7, (16,), np.float16))(random.PRNGKey(0)),
       want)
    eq(random.lognormal(random.PRNGKey(0), 0.7, (16,), np.float16), want)
    text = xform.jit(lambda k: random.lognormal(k, 0.7, (16,))).lower(
        random.PRNGKey(0)).as_text()
    assert "@_normal" in text and "@_lognormal" not in text


@pytest.mark.parametrize("dtype,lo,hi", [(np.int32, 0, 10), (np.int32, -5, 2**31 - 1),
                                         (np.uint8, 0, 256), (np.int8, -3, 3)])
def test_randint(dtype, lo, hi):
    for seed in (0, 9):
        eq(random.randint(random.PRNGKey(seed), (7,), lo, hi, dtype),
           jr.randint(jr.PRNGKey(seed), (7,), lo, hi, dtype))
    if dtype is np.int32 and lo == 0:     # (the same program for every row: once)
        lo_arr = np.arange(3, dtype=np.int32)
        eq(xform.jit(lambda k: random.randint(k, (2, 3), lo_arr, 10))(random.PRNGKey(1)),
           jr.randint(jr.PRNGKey(1), (2, 3), lo_arr, 10))


def test_x64_seed_and_float64(x64):
    seed = 2**40 + 7
    eq(random.PRNGKey(seed), jr.PRNGKey(seed))
    k, jk = random.PRNGKey(3), jr.PRNGKey(3)
    eq(random.uniform(k, (5,), np.float64), jr.uniform(jk, (5,), np.float64))
    eq(random.normal(k, (5,), np.float64), jr.normal(jk, (5,), np.float64))
    eq(random.normal(k, (5,), np.complex128), jr.normal(jk, (5,), np.complex128))
    eq(random.bits(k, (4,), np.uint64), jr.bits(jk, (4,), np.uint64))
    eq(random.bits(k, (4,)), jr.bits(jk, (4,)))   # default uint64 under x64


@pytest.fixture
def not_partitionable():
    from xform.core.config import config
    jax.config.update("jax_threefry_partitionable", False)
    config.update("jax_threefry_partitionable", False)
    try:
        yield
    finally:
        jax.config.update("jax_threefry_partitionable", True)
        config.update("jax_threefry_partitionable", True)


def test_threefry_not_partitionable(not_partitionable):
    # JAX's original counter layout: one cipher call over iota(ceil(bits / 32)) words.
    k, jk = random.PRNGKey(7), jr.PRNGKey(7)
    eq(random.split(k, 3), jr.split(jk, 3))
    eq(random.split(k, (2, 3)), jr.split(jk, (2, 3)))
    eq(random.fold_in(k, 5), jr.fold_in(jk, 5))
    for dt, shape in ((np.uint8, (7,)), (np.uint16, (3, 3)), (np.uint32, (5,))):
        eq(random.bits(k, shape, dt), jr.bits(jk, shape, dt))
    eq(random.normal(k, (3, 5)), jr.normal(jk, (3, 5)))
    eq(random.uniform(k, (4,), np.float16), jr.uniform(jk, (4,), np.float16))
    eq(xform.jit(lambda k: random.gamma(k, 2.0, (3,)))(k), jr.gamma(jk, 2.0, (3,)))


def test_flipping_partitionable_retraces_cached_samplers():
    # The counter layout is read while tracing: jit caches must not outlive a flip.
    k, jk = random.PRNGKey(5), jr.PRNGKey(5)
    eq(random.normal(k, (3,)), jr.normal(jk, (3,)))     # cached with the default layout
    from xform.core.config import config
    jax.config.update("jax_threefry_partitionable", False)
    config.update("jax_threefry_partitionable", False)
    try:
        eq(random.normal(k, (3,)), jr.normal(jk, (3,)))
    finally:
        jax.config.update("jax_threefry_partitionable", True)
        config.update("jax_threefry_partitionable", True)
    eq(random.normal(k, (3,)), jr.normal(jk, (3,)))


def test_threefry_not_partitionable_64bit(not_partitionable, x64):
    k, jk = random.PRNGKey(3), jr.PRNGKey(3)
    eq(random.bits(k, (5,), np.uint64), jr.bits(jk, (5,), np.uint64))
    eq(random.uniform(k, (3,), np.float64), jr.uniform(jk, (3,), np.float64))
