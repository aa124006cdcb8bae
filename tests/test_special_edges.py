"""Regressions from the second scipy.special sweep (functions after exp1) against JAX:
signatures and dtype rules that differed; compared with jax at run time."""
import jax
import numpy as np
import pytest

import xform
from optable import assert_tree_same

JS, XS = jax.scipy.special, xform.scipy.special


def test_scipy_softmax_defaults_to_all_axes():
    # scipy's softmax / log_softmax reduce over every axis unless told (nn's: the last).
    v = np.array([[1., 2., 3.], [4., 5., np.nan]], np.float32)
    for name in ("softmax", "log_softmax"):
        f, g = getattr(JS, name), getattr(XS, name)
        assert_tree_same(g(v), f(v), 1e-6, name)
        assert_tree_same(g(v[:, :2], axis=0), f(v[:, :2], axis=0), 1e-6, f"{name} axis=0")
        with pytest.raises(TypeError):
            g(v, 0)   # axis is keyword-only
        for m in (f, g, getattr(jax.nn, name), getattr(xform.nn, name)):
            with pytest.raises(TypeError, match="sub does not accept dtype bool"):
                m(v > 1)   # JAX subtracts the max in bool


def test_ndtr_family_dtypes_and_series_order():
    x = np.array([-40., -12., -10.5, -3., 0., 6.], np.float32)
    for so in (0, 1, 5):
        assert_tree_same(XS.log_ndtr(x, so), JS.log_ndtr(x, so), 1e-6, f"series_order={so}")
    for bad, exc in ((-1, ValueError), (31, ValueError), (2.0, TypeError)):
        for m in (JS, XS):
            with pytest.raises(exc):
                m.log_ndtr(x, bad)
    for bad in (x.astype(np.float16), np.arange(3, dtype=np.int32)):   # float32/float64 only, as JAX
        for name in ("ndtr", "ndtri", "log_ndtr"):
            for m in (JS, XS):
                with pytest.raises(TypeError, match=f"{bad.dtype} is not supported"):
                    getattr(m, name)(bad)
    assert_tree_same(XS.ndtri(0.25), JS.ndtri(0.25), 1e-6, "weak ndtri")


def test_hyp2f1_unchosen_loops_stop():
    # Every branch runs; JAX's polynomial / digamma-sum loops count to |a| or c - a - b
    # even where unused, so a = inf or 1e30 never returns there. xform loops zero times
    # where a branch is not chosen: finite rows match JAX, 2F1(a, b; c; 0) is 1.
    a = np.array([-3., 2.5, -1.5, 50., 0.], np.float32)
    x = np.array([-2., 0.5, 0.95, 0.3, 0.9], np.float32)
    b, c = np.full_like(a, 1.5), np.full_like(a, 0.5)
    assert_tree_same(XS.hyp2f1(a, b, c, x), JS.hyp2f1(a, b, c, x), 1e-5, "hyp2f1")
    big = np.array([np.inf, 1e30], np.float32)
    np.testing.assert_array_equal(XS.hyp2f1(big, 1.5, 0.5, np.zeros(2, np.float32)), 1.)


def test_expn_family_strong_for_python_scalars():
    # JAX's piecewise casts every branch to x's dtype: exp1 / expn of Python scalars are
    # strong float32, so exp1(0.5) * float16 is float32 there too.
    for name, args in (("exp1", (0.5,)), ("expn", (2, 0.5)), ("expi", (0.5,))):
        r, e = getattr(XS, name)(*args), getattr(JS, name)(*args)
        assert_tree_same(r, e, 1e-6, name)
        assert r.weak_type == e.weak_type, name


def test_ndtri_log_ndtr_keep_float32_under_x64(x64):
    # log(2 pi) / 2 was a NumPy float64 scalar (strong): float32 in, float64 out
    x = np.array([1e-20, 0.3, 0.9], np.float32)
    for name, v in (("ndtri", x), ("log_ndtr", -40 * x - 25)):
        f, g = getattr(JS, name), getattr(XS, name)
        assert_tree_same(g(v), f(v), 1e-6, name)
    assert_tree_same(xform.grad(lambda a: XS.ndtri(a).sum())(x),
                     jax.grad(lambda a: JS.ndtri(a).sum())(x), 1e-5, "grad ndtri")
