"""Docstring examples of the reduction, window, convolution, dot and linalg modules run
as doctests, and their argument errors name the problem."""
import doctest
import importlib

import numpy as np
import pytest

import xform
from xform import lax

MODULES = ["xform.lax.reductions", "xform.lax.cumulative", "xform.lax.windowed",
           "xform.lax.conv", "xform.lax.dot", "xform.lax.linalg_triangular",
           "xform.lax.linalg_orthogonal", "xform.lax.linalg_tridiagonal",
           "xform.lax.linalg_products", "xform.lax.linalg_qdwh", "xform.numpy.linalg",
           "xform.scipy.linalg"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    globs = {"xform": xform, "jnp": xform.numpy, "lax": lax, "np": np}
    result = doctest.testmod(importlib.import_module(name), extraglobs=globs,
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0, name


X = np.ones((1, 4, 4, 2), np.float32)
W = np.ones((3, 3, 2, 4), np.float32)
NHWC = ("NHWC", "HWIO", "NHWC")
ERRORS = [
    (lambda: lax.conv_general_dilated(X, np.ones((3, 3, 3, 4), np.float32), (1, 1), "SAME",
                                      dimension_numbers=NHWC),
     ValueError, "must equal the rhs input feature dimension 3"),
    (lambda: lax.conv_general_dilated(X, W, (1,), "SAME", dimension_numbers=NHWC),
     TypeError, r"window_strides \(1,\) must have one entry per spatial dimension"),
    (lambda: lax.conv_general_dilated(X, W, (1, 1), "BOGUS", dimension_numbers=NHWC),
     RuntimeError, "Unrecognized padding type"),
    (lambda: lax.conv_general_dilated(X, W, (1, 1), "SAME", dimension_numbers=NHWC,
                                      feature_group_count=3),
     ValueError, "feature_group_count=3"),
    (lambda: lax.reduce_window(X, 1, lax.mul, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
     TypeError, "inconsistent dtypes for operands and init_values"),
    (lambda: lax.reduce_window((X, X), (1., 1.), lambda a, b: a[0], (1, 2, 2, 1)),
     ValueError, "same tree structure as the operands"),
    (lambda: lax.cumsum(X, axis=7), ValueError, "axis 7 is out of bounds"),
    (lambda: lax.argmin(np.ones((0, 3), np.float32), 0, np.int32), ValueError,
     "empty axis"),
    (lambda: lax.dot(W[0, 0], W[0, 0].T, precision="bogus"), ValueError,
     "precision must be None"),
    (lambda: lax.linalg.triangular_solve(np.eye(3, dtype=np.float32),
                                         np.ones((2, 2), np.float32), left_side=True),
     ValueError, "b's rows must equal a's size"),
    (lambda: lax.linalg.qr(np.ones((3,), np.float32), pivoting=True),
     ValueError, "at least 2 dimensions"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS, ids=range(len(ERRORS)))
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
