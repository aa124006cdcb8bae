"""Helpers shared by the sparse test files (test_sparse*.py)."""
import jax
import numpy as np


def dense(shape, seed=0, density=0.5):
    """A float32 array of normal values with about ``1 - density`` of it zeroed."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    x[rng.random(shape) > density] = 0
    return x


def assert_trees_close(xo, jo, tol=1e-5):
    """xform's and JAX's outputs: the same leaves, shapes and values."""
    xl, jl = jax.tree.leaves(xo), jax.tree.leaves(jo)
    assert len(xl) == len(jl)
    for i, (a, b) in enumerate(zip(xl, jl)):
        assert np.shape(a) == np.shape(b), (i, np.shape(a), np.shape(b))
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol,
                                   err_msg=f"output {i}")
