"""xform.flatten_util.ravel_pytree against jax.flatten_util at run time: dtype promotion
of mixed leaves, unravel's dtype and length checks (JAX's errors), empty trees, and use
under jit and grad."""
import doctest

import jax
import jax.numpy as jnp_ref
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree as ravel_ref

import xform
import xform.numpy as jnp
from xform import flatten_util
from xform.flatten_util import ravel_pytree

TREES = [
    {"a": np.ones((2, 2), np.float32), "b": (np.arange(3, dtype=np.int32), 2.5)},
    [np.float16(1.5), np.array([1, 2], np.int8), True],       # promotes to float16
    [np.array([1.0 + 2j], np.complex64), np.ones(1, np.float32)],
    [np.ones(2, np.int32), np.zeros((1, 2), np.int32)],         # one dtype
    {}, None, [],
    [np.arange(3.0)],   # a lone 1-D float64 NumPy leaf: a float32 Array, not the leaf
]


def _assert_tree_equal(got, want):
    gl, gt = xform.tree_util.tree_flatten(got)
    wl, wt = jax.tree_util.tree_flatten(want)
    assert str(gt) == str(wt)
    for g, w in zip(gl, wl):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_ravel_and_unravel_match_jax(tree):
    flat, unravel = ravel_pytree(tree)
    flat_ref, unravel_ref = ravel_ref(tree)
    assert flat.dtype == flat_ref.dtype and flat.shape == flat_ref.shape
    np.testing.assert_array_equal(np.asarray(flat), np.asarray(flat_ref))
    _assert_tree_equal(unravel(flat), unravel_ref(flat_ref))
    # a vector of another dtype: TypeError where the leaves had mixed dtypes (as JAX),
    # otherwise leaves in the given dtype
    other = np.zeros(flat_ref.shape, np.float64 if flat_ref.dtype != np.float32
                     else np.int32)
    try:
        want = unravel_ref(other)
    except TypeError as e:
        with pytest.raises(TypeError, match="but expected dtype"):
            unravel(other)
        assert "but expected dtype" in str(e)
    else:
        _assert_tree_equal(unravel(other), want)
    longer = np.zeros(flat_ref.size + 1, flat_ref.dtype)
    if tree:
        with pytest.raises(ValueError, match="Sum of sizes"):
            unravel(longer)
        with pytest.raises(ValueError, match="Sum of sizes"):
            unravel_ref(longer)
    else:                                    # no leaves: JAX's unravel ignores its input
        assert unravel(longer) == unravel_ref(longer)


def test_under_jit_and_grad():
    params = {"w": np.arange(4.0, dtype=np.float32).reshape(2, 2), "b": np.ones(2, np.float32)}

    def loss(np_, ravel):
        def fn(p):
            flat, unravel = ravel(p)
            q = unravel(flat * flat)
            return np_.sum(q["w"] @ q["b"]) + np_.sum(flat ** 3)
        return fn
    got = xform.jit(xform.grad(loss(jnp, ravel_pytree)))(params)
    want = jax.jit(jax.grad(loss(jnp_ref, ravel_ref)))(params)
    for k in params:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6)
    flat, unravel = ravel_pytree(params)
    # the unravel function is hashable by value, so it can be a static argument
    assert unravel == ravel_pytree(params)[1] and hash(unravel) == hash(ravel_pytree(params)[1])
    out = xform.jit(lambda f, u: u(2 * f), static_argnums=1)(flat, unravel)
    np.testing.assert_array_equal(out["w"], 2 * params["w"])


def test_docstring_examples():
    result = doctest.testmod(flatten_util, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
