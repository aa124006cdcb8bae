"""Typed keys (dtype key<fry>) against jax.random: construction, key_data round trips,
repr, issubdtype, indexing/reshape, pytrees, jit/vmap arguments and outputs, float0
tangents under grad; the jax_debug_key_reuse check; key errors."""
import contextlib

import jax
import jax.numpy as jnpj
import jax.random as jr
import numpy as np
import pytest

import xform
import xform.numpy as jnp
import xform.random as random
from xform.core.config import config


def eq(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def data(k):
    return random.key_data(k)


def test_typed_key_basics_match_jax():
    k, jk = random.key(42), jr.key(42)
    assert k.shape == () and k.ndim == 0 and str(k.dtype) == "key<fry>"
    assert repr(k) == repr(jk)
    eq(data(k), jr.key_data(jk))
    ks, jks = random.split(k, 3), jr.split(jk, 3)
    assert ks.shape == (3,) and repr(ks) == repr(jks)
    # f-strings print keys as str() does (Flax code prints make_rng results); a format
    # spec on a key is a TypeError, as in JAX (issue 22 #11)
    assert f"{k}" == str(k) == f"{jk}" and f"{ks!s:}" == f"{jks}"
    for key in (k, jk):
        with pytest.raises(TypeError, match="unsupported format string"):
            f"{key:>5}"
    eq(data(random.fold_in(k, 7)), jr.key_data(jr.fold_in(jk, 7)))
    eq(random.normal(k, (4,)), jr.normal(jk, (4,)))
    eq(random.bits(k, (3,)), jr.bits(jk, (3,)))
    assert random.key_impl(k) == jr.key_impl(jk) == "threefry2x32"
    assert type(random.key_impl(k)) is type(jr.key_impl(jk)) is str
    assert jnp.issubdtype(k.dtype, xform.dtypes.prng_key)
    assert jnp.issubdtype(k.dtype, xform.dtypes.extended)
    assert not jnp.issubdtype(k.dtype, np.floating)
    assert not jnp.issubdtype(np.float32, xform.dtypes.prng_key)
    # raw <-> typed round trip, and samplers agree between the two kinds
    raw = random.PRNGKey(42)
    eq(data(random.wrap_key_data(raw)), raw)
    eq(random.uniform(raw, (3,)), random.uniform(k, (3,)))
    eq(data(random.clone(k)), data(k))


def test_indexing_reshape_iteration():
    ks, jks = random.split(random.key(1), (2, 3)), jr.split(jr.key(1), (2, 3))
    for idx in (0, (1, 2), (slice(None), 1), (Ellipsis, 0), (0, Ellipsis)):
        got, want = ks[idx], jks[idx]
        assert got.shape == want.shape
        eq(data(got), jr.key_data(want))
    r = ks.reshape(3, 2)
    assert r.shape == (3, 2)
    eq(data(r), jr.key_data(jks.reshape(3, 2)))
    assert ks.reshape(-1).shape == (6,) and ks.T.shape == (3, 2)
    assert len(ks) == 2 and [k.shape for k in ks] == [(3,), (3,)]
    assert bool((ks == ks).all()) and not bool((ks[0] != ks[0]).any())


def test_pytrees_jit_vmap_args_and_outputs():
    k, jk = random.key(3), jr.key(3)
    tree = {"a": k, "b": [random.split(k, 2), 1.0]}
    leaves, treedef = xform.tree_util.tree_flatten(tree)
    back = xform.tree_util.tree_unflatten(treedef, leaves)
    assert back["b"][0].shape == (2,) and str(back["a"].dtype) == "key<fry>"

    @xform.jit
    def f(key):
        k1, k2 = random.split(key)
        return k1, random.normal(k2, (2,))
    k1, x = f(k)
    jk1, jx = jax.jit(lambda key: (jr.split(key)[0], jr.normal(jr.split(key)[1], (2,))))(jk)
    assert isinstance(k1, xform.Array) and str(k1.dtype) == "key<fry>"
    eq(data(k1), jr.key_data(jk1))
    eq(x, jx)
    keys, jkeys = random.split(k, 4), jr.split(jk, 4)
    eq(xform.vmap(lambda key: random.uniform(key, (2,)))(keys),
       jax.vmap(lambda key: jr.uniform(key, (2,)))(jkeys))
    out = xform.vmap(lambda key: random.split(key, 3))(keys)
    assert out.shape == (4, 3)
    eq(data(out), jr.key_data(jax.vmap(lambda key: jr.split(key, 3))(jkeys)))
    # carried through lax loops
    out = xform.lax.fori_loop(0, 3, lambda i, key: random.split(key)[0], k)
    want = jax.lax.fori_loop(0, 3, lambda i, key: jr.split(key)[0], jk)
    eq(data(out), jr.key_data(want))
    # a scalar key closed over by jit is a literal of the program (it was lowered as NumPy)
    eq(xform.jit(lambda x: random.normal(k, (2,)) + x)(1.0),
       jax.jit(lambda x: jr.normal(jk, (2,)) + x)(1.0))


def test_grad_with_typed_key_argument():
    k = random.key(0)
    g = xform.grad(lambda x, key: (x * random.normal(key, (3,))).sum())(2.0, k)
    eq(g, jax.grad(lambda x, key: (x * jr.normal(key, (3,))).sum())(2.0, jr.key(0)))
    gk = xform.grad(lambda x, key: x * random.normal(key), argnums=1, allow_int=True)(1.0, k)
    leaf = xform.tree_util.tree_leaves(gk)[0]
    assert leaf.dtype == xform.dtypes.float0


def test_typed_keys_in_every_sampler_family():
    k, jk = random.key(9), jr.key(9)
    eq(xform.jit(lambda k: random.gamma(k, 2.0, (3,)))(k), jr.gamma(jk, 2.0, (3,)))
    eq(random.poisson(k, 4.0, (3,)), jr.poisson(jk, 4.0, (3,)))
    eq(random.permutation(k, 6), jr.permutation(jk, 6))
    eq(random.categorical(k, np.zeros(4, np.float32), shape=(3,)),
       jr.categorical(jk, np.zeros(4, np.float32), shape=(3,)))
    eq(random.randint(k, (3,), 0, 9), jr.randint(jk, (3,), 0, 9))


@contextlib.contextmanager
def key_reuse_checks():
    config.update("jax_debug_key_reuse", True)
    try:
        yield
    finally:
        config.update("jax_debug_key_reuse", False)


def test_debug_key_reuse():
    k = random.key(0)
    random.normal(k)
    random.normal(k)          # off by default, as JAX
    with key_reuse_checks():
        k = random.key(0)
        random.normal(k)
        with pytest.raises(xform.errors.KeyReuseError, match="already consumed"):
            random.uniform(k)
        k1, k2 = random.split(random.key(1))
        random.normal(k1), random.normal(k2)        # fresh keys: fine
        k = random.key(2)
        random.normal(random.clone(k)), random.normal(k)   # clone is fresh

        def traced(key):
            a = random.normal(key)
            return a + random.normal(key)
        with pytest.raises(random.KeyReuseError, match="normal: this PRNG key was already"):
            xform.jit(traced)(random.key(3))
        k = random.key(4)
        random.split(k)
        with pytest.raises(random.KeyReuseError, match=r"already consumed \(by split\)"):
            xform.jit(lambda k: random.normal(k))(k)     # consumed before the call
        k = random.key(5)
        xform.jit(lambda k: random.normal(k))(k)      # the call consumes it
        with pytest.raises(random.KeyReuseError, match=r"consumed \(by jit\(<lambda>\)\)"):
            random.uniform(k)
        xform.jit(lambda k: random.key_data(k))(random.key(6))  # not a consumer: fine
        k = random.key(7)
        f = xform.jit(lambda k: random.key_data(k))
        f(k), f(k)


def test_key_errors_match_jax():
    with pytest.raises(TypeError, match="PRNG key seed must be an integer"):
        random.key(1.5)
    with pytest.raises(TypeError, match="key accepts a scalar seed, but was given a PRNG "
                                        "key"):
        random.key(random.key(0))
    with pytest.raises(TypeError, match=r"PRNGKey accepts a scalar seed, but was given an "
                                        r"array of shape \(2,\)"):
        random.PRNGKey(np.zeros(2, np.int32))
    with pytest.raises(TypeError, match=r"expected key_data.shape to end with \(2,\); got "
                                        r"shape=\(3,\)"):
        random.normal(np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match=r"normal accepts a single key, but was given a key "
                                         r"array of shape \(2,\) != \(\). Use jax.vmap"):
        random.normal(random.split(random.key(0)))
    with pytest.raises(ValueError, match=r"gamma accepts a single key"):
        random.gamma(random.split(random.PRNGKey(0)), 1.0)
    with pytest.raises(TypeError, match="dtype = uint32; got dtype=float32"):
        random.wrap_key_data(np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="unexpected PRNG key type"):
        random.normal("key")


@pytest.mark.parametrize("name,fn", [
    ("stack", lambda J, k: J.stack([k[0], k[1]])),
    ("stack_axis1", lambda J, k: J.stack([k, k], axis=1)),
    ("stack_neg_axis", lambda J, k: J.stack([k, k], axis=-1)),
    ("concatenate", lambda J, k: J.concatenate([k, k[:1]])),
    ("concatenate_none", lambda J, k: J.concatenate([k.reshape(3, 1), k[:2]], axis=None)),
])
def test_stack_and_concatenate_key_arrays_match_jax(name, fn):
    k, jk = random.split(random.key(7), 3), jr.split(jr.key(7), 3)
    got, want = fn(jnp, k), fn(jnpj, jk)
    assert got.shape == want.shape and str(got.dtype) == "key<fry>"
    eq(data(got), jr.key_data(want))
    eq(data(xform.jit(lambda k: fn(jnp, k))(k)), jr.key_data(want))


def test_stack_of_keys_and_arrays_is_an_error():
    k = random.split(random.key(0), 3)
    with pytest.raises(ValueError, match="dtype=key<fry> is not a valid dtype for JAX "
                                         "type promotion"):
        jnp.stack([k, jnp.ones(3)])


# ---- typed keys are arrays of an extended dtype (as JAX's) ----

def same_keys(got, want):
    assert got.shape == want.shape and str(got.dtype) == "key<fry>"
    eq(data(got), jr.key_data(want))


def test_key_arrays_are_pytree_leaves():
    ks, jks = random.split(random.key(5), 3), jr.split(jr.key(5), 3)
    leaves = xform.tree_util.tree_leaves({"k": ks, "x": 1.0})
    assert len(leaves) == 2 and leaves[0] is ks
    shapes = xform.tree_util.tree_map(lambda x: np.shape(x) if not hasattr(x, "shape")
                                      else x.shape, {"k": ks})
    assert shapes == jax.tree.map(lambda x: x.shape, {"k": jks}) == {"k": (3,)}


@pytest.mark.parametrize("name,fn", [
    ("where", lambda J, k: J.where(J.array([True, False, True]), k, k[::-1])),
    ("gather", lambda J, k: k[J.array([2, 0, 2])]),
    ("broadcast_to", lambda J, k: J.broadcast_to(k[0], (2, 3))),
    ("expand_dims", lambda J, k: J.expand_dims(k, 1)),
    ("transpose", lambda J, k: J.transpose(J.stack([k, k]))),
    ("ravel", lambda J, k: J.ravel(J.stack([k, k]))),
    ("zeros_like", lambda J, k: J.zeros_like(k)),
])
def test_structural_ops_on_key_arrays_match_jax(name, fn):
    k, jk = random.split(random.key(7), 3), jr.split(jr.key(7), 3)
    want = fn(jnpj, jk)
    same_keys(fn(jnp, k), want)
    same_keys(xform.jit(lambda k: fn(jnp, k))(k), want)


def test_key_equality_matches_jax():
    k, jk = random.split(random.key(2), 3), jr.split(jr.key(2), 3)
    eq(k == k[::-1], jk == jk[::-1])
    eq(k != k[0], jk != jk[0])
    eq(xform.jit(lambda a: a == a[0])(k), jk == jk[0])


def test_keys_through_transformations_match_jax():
    k, jk = random.split(random.key(11), (2, 3)), jr.split(jr.key(11), (2, 3))
    # vmap over a non-leading key axis, keys out
    same_keys(xform.vmap(lambda key: random.fold_in(key[1], 3), in_axes=1)(k),
              jax.vmap(lambda key: jr.fold_in(key[1], 3), in_axes=1)(jk))
    same_keys(xform.jit(xform.vmap(lambda key: random.split(key)[1]))(k[0]),
              jax.vmap(lambda key: jr.split(key)[1])(jk[0]))
    # dynamic indexing under jit
    i = np.int32(2)
    same_keys(xform.jit(lambda k, i: k[1, i])(k, i), jk[1, i])
    # scan over keys, cond and while carrying keys
    body = lambda c, key: (c + random.normal(key), random.split(key)[0])
    jbody = lambda c, key: (c + jr.normal(key), jr.split(key)[0])
    c, ys = xform.lax.scan(body, 0.0, k[0])
    jc, jys = jax.lax.scan(jbody, 0.0, jk[0])
    eq(c, jc)
    same_keys(ys, jys)
    same_keys(xform.lax.cond(True, lambda a: a[0], lambda a: a[1], k),
              jax.lax.cond(True, lambda a: a[0], lambda a: a[1], jk))
    # a batched predicate selects between key carries
    out = xform.vmap(lambda key, n: xform.lax.while_loop(
        lambda s: s[1] < n, lambda s: (random.split(s[0])[0], s[1] + 1), (key, 0))[0])(
            k[0], np.array([0, 1, 3], np.int32))
    want = jax.vmap(lambda key, n: jax.lax.while_loop(
        lambda s: s[1] < n, lambda s: (jr.split(s[0])[0], s[1] + 1), (key, 0))[0])(
            jk[0], np.array([0, 1, 3], np.int32))
    same_keys(out, want)


def test_arithmetic_and_numpy_conversion_of_keys_are_errors():
    k = random.key(0)
    with pytest.raises(ValueError, match="dtype=key<fry> is not a valid dtype for JAX "
                                         "type promotion"):
        k + 1
    with pytest.raises(TypeError, match="add does not accept dtype key<fry>"):
        xform.lax.add(k, k)
    with pytest.raises(TypeError, match="sin does not accept dtype key<fry>"):
        jnp.sin(k)
    with pytest.raises(TypeError, match=r"cannot be converted to a NumPy array. Use "
                                        r"jax.random.key_data\(arr\)"):
        np.asarray(k)
    with pytest.raises(TypeError, match="convert_element_type does not accept dtype "
                                        "key<fry>"):
        k.astype(np.uint32)


def test_key_array_updates_match_jax():
    k, jk = random.split(random.key(4), 3), jr.split(jr.key(4), 3)
    new, jnew = random.key(9), jr.key(9)
    same_keys(k.at[1].set(new), jk.at[1].set(jnew))
    same_keys(xform.jit(lambda k, n: k.at[np.array([0, 2])].set(n))(k, new),
              jk.at[np.array([0, 2])].set(jnew))
    same_keys(xform.lax.dynamic_update_slice(k, new[None], (np.int32(2),)),
              jax.lax.dynamic_update_slice(jk, jnew[None], (np.int32(2),)))
