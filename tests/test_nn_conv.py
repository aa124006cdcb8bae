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
from xform import nn
from xform.nn import _pooling

from nn_oracle import close, fjit, same_leaves

R = np.random.RandomState(0)


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
    xi = np.arange(16, dtype=np.int32).reshape(2, 8, 1) % 5         # integer inputs
    for dtype in (np.int32, np.uint8):         # uint8: its min 0 is no int32 identity
        for name in ("max_pool", "min_pool"):
            ours = getattr(nn, name)(xi.astype(dtype), (3,), (2,))
            theirs = getattr(fnn.pooling, name)(xi.astype(dtype), (3,), (2,))
            assert ours.dtype == theirs.dtype
            np.testing.assert_array_equal(ours, theirs)
    with pytest.raises(ValueError, match=r"len\(strides\)=1 must equal len\(window_shape\)=2"):
        nn.max_pool(x, (2, 2), (1,))
    with pytest.raises(ValueError, match="too few axes for window_shape"):
        nn.max_pool(x[0, 0], (2, 2))
    with pytest.raises(ValueError, match="one \\(low, high\\) pair per spatial axis"):
        nn.max_pool(x, (2,), padding=((1, 1), (1, 1)))


def test_avg_pool_integer_input_dtype_under_x64(x64):
    xi = np.arange(8, dtype=np.int32).reshape(1, 8, 1)     # Flax divides by an np.int64
    for kw in ({}, {"padding": "SAME", "count_include_pad": False}):
        ours, theirs = nn.avg_pool(xi, (2,), **kw), fnn.avg_pool(xi, (2,), **kw)
        assert ours.dtype == theirs.dtype == np.float64
        np.testing.assert_array_equal(ours, theirs)


def test_pooling_doctests():
    result = doctest.testmod(_pooling, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ---- Conv, ConvLocal, ConvTranspose ----

def check_layer(cls, kw, x, tol=1e-5, jit=True):
    """Same key -> same variables and outputs as flax (eager, and jitted apply)."""
    ours, theirs = getattr(nn, cls)(**kw), getattr(fnn, cls)(**kw)
    v = ours.init(xform.random.PRNGKey(1), x)
    fv = fjit(theirs.init)(jax.random.PRNGKey(1), x)
    same_leaves(v, fv, 0)
    y, fy = ours.apply(v, x), fjit(theirs.apply)(fv, x)
    assert y.dtype == fy.dtype
    close(y, fy, tol)
    if jit:
        close(xform.jit(ours.apply)(v, x), fy, tol)
    return ours, v, theirs, fv


X2 = R.randn(2, 7, 6, 3).astype(np.float32)
X1 = R.randn(2, 9, 4).astype(np.float32)


@pytest.mark.parametrize("kw", [
    dict(features=4, kernel_size=(3, 3)),
    dict(features=4, kernel_size=(3, 2), strides=2, padding="CIRCULAR",
         kernel_dilation=(1, 2)),
    dict(features=6, kernel_size=(3, 3), feature_group_count=3, padding=((1, 0), 2),
         input_dilation=2, use_bias=False),
    dict(features=5, kernel_size=(2, 3), strides=(1, 2), padding=1),
    dict(features=4, kernel_size=(3, 3), padding="REFLECT"),
])
def test_conv_2d(kw):
    check_layer("Conv", kw, X2)


@pytest.mark.parametrize("kw", [
    dict(features=3, kernel_size=3, padding="CAUSAL", kernel_dilation=2),
    dict(features=3, kernel_size=(4,), padding="VALID", strides=3),
])
def test_conv_1d_and_batch_shapes(kw):
    check_layer("Conv", kw, X1)
    check_layer("Conv", kw, X1[0], jit=False)                            # unbatched
    check_layer("Conv", kw, np.stack([X1, X1 + 1]), jit=False)           # 2 batch axes


def test_conv_local():
    check_layer("ConvLocal", dict(features=4, kernel_size=(3, 3), padding="VALID"), X2)
    check_layer("ConvLocal", dict(features=2, kernel_size=(2,), strides=2), X1)


@pytest.mark.parametrize("kw", [
    dict(features=4, kernel_size=(3, 3), strides=(2, 2)),
    dict(features=4, kernel_size=(3, 2), strides=(2, 1), padding="VALID",
         kernel_dilation=(2, 1)),
    dict(features=4, kernel_size=(4, 3), strides=(2, 1), padding="CIRCULAR",
         transpose_kernel=True),
    dict(features=2, kernel_size=(3, 3), strides=(2, 2), padding="CIRCULAR"),
    dict(features=3, kernel_size=(2, 2), padding=((1, 2), 0), use_bias=False),
])
def test_conv_transpose(kw):
    check_layer("ConvTranspose", kw, X2)


def test_conv_grad_bf16_mask_and_errors():
    kw = dict(features=4, kernel_size=(3, 3), strides=2)
    ours, v, theirs, fv = check_layer("Conv", kw, X2, jit=False)
    loss = lambda m, lib: lambda p, x: (m.apply(p, x) ** 2).sum()
    g = xform.jit(xform.grad(loss(ours, xform), (0, 1)))(v, X2)
    fg = jax.jit(jax.grad(loss(theirs, jax), (0, 1)))(fv, X2)
    same_leaves(g[0], fg[0], 1e-4)
    close(g[1], fg[1], 1e-4)
    for cls in ("Conv", "ConvTranspose"):                 # mixed precision
        bkw = dict(kw, dtype=jjnp.bfloat16)
        ours, v, theirs, fv = check_layer(cls, bkw, X2, tol=3e-2, jit=False)
        assert v["params"]["kernel"].dtype == np.float32
    mask = np.tril(np.ones((3, 3, 3, 4), np.float32))
    check_layer("Conv", dict(kw, mask=mask), X2, jit=False)
    with pytest.raises(ValueError, match="Mask needs to have the same shape as weights"):
        nn.Conv(4, (3, 3), mask=mask[0]).init(xform.random.PRNGKey(0), X2)
    with pytest.raises(ValueError, match="Conv at /: Causal padding is only implemented"):
        nn.Conv(4, (3, 3), padding="CAUSAL").init(xform.random.PRNGKey(0), X2)
    bad = nn.Sequential([nn.Dense(3), nn.Conv(4, (3, 3), feature_group_count=2)])
    with pytest.raises(ValueError, match="Conv at /layers_1: input features 3 are not "
                                         "divisible by feature_group_count 2"):
        bad.init(xform.random.PRNGKey(0), X2)
    with pytest.raises(ValueError, match="Invalid padding format"):
        nn.Conv(4, (3, 3), padding=(1, 2, 3)).init(xform.random.PRNGKey(0), X2)
    with pytest.raises(ValueError, match="not divisible by feature_group_count 2"):
        nn.Conv(4, (3, 3), feature_group_count=2).init(xform.random.PRNGKey(0), X2)
    with pytest.raises(ValueError, match="string padding 'SAME' is not implemented with "
                                         "input_dilation"):
        nn.Conv(4, (3, 3), input_dilation=2).init(xform.random.PRNGKey(0), X2)
    with pytest.raises(ValueError, match=r"too few axes for a 2-d kernel"):
        nn.Conv(4, (3, 3)).init(xform.random.PRNGKey(0), X2[0, 0])


@pytest.mark.parametrize("padding", ["CAUSAL", "same"])
def test_conv_transpose_strided_string_padding_error_as_flax(padding):
    # lax.conv_transpose hands strings other than 'SAME'/'VALID' on to an input-dilated
    # conv_general_dilated, which rejects them (xform used to pad 'same' silently)
    errors = []
    for lib, k in ((nn, xform.random.PRNGKey(0)), (fnn, jax.random.PRNGKey(0))):
        with pytest.raises(ValueError, match="String padding is not implemented") as e:
            lib.ConvTranspose(2, (3,), strides=2, padding=padding).init(k, X1)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_conv_doctests():
    from xform.nn import _conv
    result = doctest.testmod(_conv, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
