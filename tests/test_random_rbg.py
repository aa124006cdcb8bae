"""The rbg and unsafe_rbg PRNG implementations against jax.random, bit for bit: key
data, split/fold_in/bits, samplers, jit, vmap over keys (rng_bit_generator's batching:
the whole batch from the first key), grad through gamma; jax_default_prng_impl; JAX's
errors for an unknown implementation."""
import contextlib

import jax
import jax.random as jr
import numpy as np
import pytest

import xform
import xform.random as random

IMPLS = ["rbg", "unsafe_rbg"]


def eq(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@contextlib.contextmanager
def default_impl(name):
    """``jax_default_prng_impl`` set in both libraries for a block, then restored."""
    old = jax.config.jax_default_prng_impl, xform.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", name)
    xform.config.update("jax_default_prng_impl", name)
    try:
        yield
    finally:
        jax.config.update("jax_default_prng_impl", old[0])
        xform.config.update("jax_default_prng_impl", old[1])


@pytest.mark.parametrize("impl", IMPLS)
def test_keys_split_fold_in_bits_match_jax(impl):
    k, jk = random.key(42, impl=impl), jr.key(42, impl=impl)
    assert str(k.dtype) == str(jk.dtype) and repr(k) == repr(jk)
    assert random.key_dtype(impl) == k.dtype and str(random.key_impl(k)) == impl
    eq(random.key_data(k), jr.key_data(jk))
    eq(random.PRNGKey(7, impl=impl), jr.PRNGKey(7, impl=impl))
    # clone is the identity on raw data of any implementation (not checked as threefry's)
    eq(random.clone(random.PRNGKey(7, impl=impl)), jr.clone(jr.PRNGKey(7, impl=impl)))
    eq(random.key_data(random.split(k, (2, 3))), jr.key_data(jr.split(jk, (2, 3))))
    eq(random.key_data(random.fold_in(k, 5)), jr.key_data(jr.fold_in(jk, 5)))
    eq(random.bits(k, (5,)), jr.bits(jk, (5,)))
    eq(random.bits(k, (3,), np.uint8), jr.bits(jk, (3,), np.uint8))
    data = np.arange(8, dtype=np.uint32).reshape(2, 4)
    eq(random.key_data(random.wrap_key_data(data, impl=impl)), data)
    assert random.wrap_key_data(data, impl=impl).dtype == k.dtype


@pytest.mark.parametrize("impl", IMPLS)
def test_samplers_match_jax(impl):
    k, jk = random.key(3, impl=impl), jr.key(3, impl=impl)
    logits = np.log(np.array([0.2, 0.3, 0.5], np.float32))
    cases = [
        lambda r, key: r.normal(key, (4,)),
        lambda r, key: r.uniform(key, (3,), minval=-1.0, maxval=2.0),
        lambda r, key: r.bernoulli(key, 0.3, (5,)),
        lambda r, key: r.randint(key, (4,), 0, 10),
        lambda r, key: r.categorical(key, logits, shape=(5,)),
        lambda r, key: r.permutation(key, 6),
    ]
    for case in cases:
        eq(case(random, k), case(jr, jk))


@pytest.mark.parametrize("impl", IMPLS)
def test_jit_and_vmap_match_jax(impl):
    k, jk = random.key(1, impl=impl), jr.key(1, impl=impl)
    ks, jks = random.split(k, 3), jr.split(jk, 3)
    f = lambda r: lambda key: (r.normal(key, (2,)), r.key_data(r.split(key)))  # noqa: E731
    for got, want in zip(xform.jit(f(random))(k), jax.jit(f(jr))(jk)):
        eq(got, want)
    # vmapped bits (one generator call from the first key for rbg's), splits, fold_ins
    eq(xform.vmap(lambda key: random.normal(key, (2,)))(ks),
       jax.vmap(lambda key: jr.normal(key, (2,)))(jks))
    eq(random.key_data(xform.vmap(random.split)(ks)), jr.key_data(jax.vmap(jr.split)(jks)))
    eq(random.key_data(xform.vmap(random.fold_in)(ks, np.arange(3))),
       jr.key_data(jax.vmap(jr.fold_in)(jks, np.arange(3))))


def test_gamma_vmap_and_grad_match_jax():
    # gamma's lanes run one by one (lax.map) for rbg keys, as JAX's: a vmapped
    # generator would draw every lane from the first key
    ks, jks = random.split(random.key(5, impl="rbg"), 2), jr.split(jr.key(5, impl="rbg"), 2)
    eq(xform.jit(xform.vmap(lambda key: random.gamma(key, 2.0, (2,))))(ks),
       jax.jit(jax.vmap(lambda key: jr.gamma(key, 2.0, (2,))))(jks))
    a = np.array([0.7, 2.5], np.float32)
    got = xform.grad(lambda a: random.gamma(ks[0], a).sum())(a)
    np.testing.assert_allclose(got, jax.grad(lambda a: jr.gamma(jks[0], a).sum())(a),
                               rtol=1e-6)


def test_default_prng_impl_flag():
    for impl in IMPLS:
        with default_impl(impl):
            raw, jraw = random.PRNGKey(11), jr.PRNGKey(11)
            eq(raw, jraw)
            assert random.key(0).dtype == random.key_dtype(impl)
            assert str(random.key_impl(raw)) == str(jr.key_impl(jraw)) == impl
            # raw keys are the default implementation's data, and stay raw
            eq(random.split(raw), jr.split(jraw))
            eq(random.fold_in(raw, 2), jr.fold_in(jraw, 2))
            eq(random.uniform(raw, (3,)), jr.uniform(jraw, (3,)))
            eq(xform.jit(lambda key: random.normal(key, (2,)))(raw),
               jax.jit(lambda key: jr.normal(key, (2,)))(jraw))
            with pytest.raises(TypeError, match=r"end with \(4,\); got shape=\(2,\)"):
                random.normal(np.zeros(2, np.uint32))
            # typed threefry keys are still threefry's
            eq(random.normal(random.key(0, impl="threefry2x32"), (2,)),
               jr.normal(jr.key(0, impl="threefry2x32"), (2,)))
    assert xform.config.jax_default_prng_impl == "threefry2x32"
    eq(random.PRNGKey(11), jr.PRNGKey(11))


def test_unknown_impl_raises_as_jax():
    def error(fn):
        with pytest.raises(Exception) as info:
            fn()
        # (the lists of known names differ: JAX has three more implementations)
        return info.type, str(info.value).split(" Did you mean")[0].split(" [")[0]

    assert error(lambda: random.key(0, impl="nope")) == error(lambda: jr.key(0, impl="nope"))
    assert error(lambda: random.PRNGKey(0, impl="nope"))[0] is ValueError
    assert error(lambda: random.key(0, impl=3)) == error(lambda: jr.key(0, impl=3))
    assert (error(lambda: xform.config.update("jax_default_prng_impl", "nope"))
            == error(lambda: jax.config.update("jax_default_prng_impl", "nope")))
    assert xform.config.jax_default_prng_impl == "threefry2x32"   # refused, unchanged
    with pytest.raises(ValueError, match="both `impl` and `dtype`"):
        random.key(0, impl="rbg", dtype="rbg")
    with pytest.raises(NotImplementedError, match="only implemented for the threefry2x32"):
        random.poisson(random.key(0, impl="rbg"), 3.0)
