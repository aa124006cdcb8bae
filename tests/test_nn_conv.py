"""xform.nn pooling and convolution layers vs flax.linen: same key -> same variables
(paths and values) and outputs, eagerly and under jit; gradients through apply; bfloat16;
errors; docstring examples."""
import doctest

import flax.linen as fnn
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import nn
from xform.nn import _pooling

R = np.random.RandomState(0)


def close(a, e, tol=1e-5):
    a, e = np.asarray(a, np.float32), np.asarray(e, np.float32)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


# ---- pooling ----

@pytest.mark.parametrize("shape,window,strides,padding", [
    ((2, 7, 3), (3,), (2,), "VALID"),
    ((2, 6, 5, 3), (2, 3), None, "SAME"),
    ((6, 5, 3), (2, 2), (2, 1), ((1, 0), (0, 1))),        # no batch axis
    ((2, 2, 5, 4, 3), (2, 2), (1, 2), "SAME"),              # two batch axes
])
def test_pooling_vs_flax(shape, window, strides, padding):
    x = R.randn(*shape).astype(np.float32)
    for name in ("max_pool", "avg_pool", "min_pool"):
        ours = getattr(nn, name)(x, window, strides, padding)
        theirs = getattr(fnn.pooling, name)(x, window, strides, padding)
        close(ours, theirs)
    ours = nn.avg_pool(x, window, strides, padding, count_include_pad=False)
    close(ours, fnn.avg_pool(x, window, strides, padding, count_include_pad=False))
    jitted = xform.jit(lambda v: nn.max_pool(v, window, strides, padding))(x)
    close(jitted, fnn.max_pool(x, window, strides, padding))


def test_pool_grad_and_errors():
    x = R.randn(2, 6, 3).astype(np.float32)
    loss = lambda lib, p: lambda v: (p(v, (2,), (2,)) ** 2).sum()
    close(xform.grad(loss(xform, nn.avg_pool))(x), jax.grad(loss(jax, fnn.avg_pool))(x))
    close(xform.grad(loss(xform, nn.max_pool))(x), jax.grad(loss(jax, fnn.max_pool))(x))
    with pytest.raises(ValueError, match=r"len\(strides\)=1 must equal len\(window_shape\)=2"):
        nn.max_pool(x, (2, 2), (1,))
    with pytest.raises(ValueError, match="too few axes for window_shape"):
        nn.max_pool(x[0, 0], (2, 2))
    with pytest.raises(ValueError, match="one \\(low, high\\) pair per spatial axis"):
        nn.max_pool(x, (2,), padding=((1, 1), (1, 1)))


def test_pooling_doctests():
    result = doctest.testmod(_pooling, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
