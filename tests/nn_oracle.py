"""Shared helpers for the xform.nn tests: run the same model in xform.nn and flax.linen
and compare variable trees (paths and values) and outputs."""
import functools

import numpy as np

import jax
import xform


def to_np(tree):
    """Nested dicts/tuples of arrays -> nested dicts/tuples of NumPy arrays."""
    if isinstance(tree, dict) or type(tree).__name__ == "FrozenDict":
        return {k: to_np(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return tuple(to_np(v) for v in tree)
    return np.asarray(tree)


def assert_trees(a, b, rtol=0.0, atol=0.0, path=""):
    """Same nested-dict structure and values (bit-exact by default)."""
    a, b = to_np(a), to_np(b)
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), (path, sorted(a), b)
        for k in a:
            assert_trees(a[k], b[k], rtol, atol, f"{path}/{k}")
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_trees(x, y, rtol, atol, f"{path}[{i}]")
    else:
        assert a.shape == b.shape and a.dtype == b.dtype, (path, a.shape, b.shape,
                                                           a.dtype, b.dtype)
        if rtol == atol == 0.0:
            np.testing.assert_array_equal(a, b, err_msg=path)
        else:
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64),
                                       rtol=rtol, atol=atol, err_msg=path)


def keys(seed):
    return xform.random.PRNGKey(seed), jax.random.PRNGKey(seed)


def fjit(fn, **kw):
    """The flax oracle jitted (one compile instead of one per op: keeps the tests fast)."""
    return jax.jit(functools.partial(fn, **kw))


def close(a, e, tol=1e-5):
    """Equal within ``tol``; bit for bit when ``tol`` is 0 (initial variables)."""
    a, e = np.asarray(a, np.float32), np.asarray(e, np.float32)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


def same_leaves(ours, theirs, tol=1e-5):
    """Same leaf paths (in order), dtypes, and values within ``tol`` (0: bit for bit)."""
    a = jax.tree_util.tree_leaves_with_path(ours)
    b = jax.tree_util.tree_leaves_with_path(theirs)
    assert [jax.tree_util.keystr(p) for p, _ in a] == [jax.tree_util.keystr(p) for p, _ in b]
    for (path, u), (_, w) in zip(a, b):
        assert np.asarray(u).dtype == np.asarray(w).dtype, path
        close(u, w, tol)
