"""lax.conv_transpose against jax.lax.conv_transpose: layouts, strides, padding modes
('SAME'/'VALID'/explicit, consistent padding), rhs dilation, transpose_kernel, grads."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import lax

_rng = np.random.RandomState(0)


def _close(a, b, tol):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


CT_CASES = [
    dict(strides=(2,), padding="SAME"),
    dict(strides=(2,), padding="VALID", rhs_dilation=(2,)),
    dict(strides=(3,), padding=[(1, 2)], transpose_kernel=True),
    dict(strides=(2,), padding=((1, 0),), use_consistent_padding=True),
    dict(strides=(2,), padding="SAME", dimension_numbers=("NCH", "OIH", "NCH")),
]


@pytest.mark.parametrize("kw", CT_CASES)
def test_conv_transpose_matches_jax(kw):
    x = _rng.randn(2, 5, 3).astype(np.float32)
    k = _rng.randn(3, 3, 4).astype(np.float32)
    if kw.get("transpose_kernel"):
        k = _rng.randn(3, 4, 3).astype(np.float32)
    if "dimension_numbers" in kw:
        x, k = np.swapaxes(x, 1, 2), _rng.randn(4, 3, 3).astype(np.float32)
    _close(lax.conv_transpose(x, k, **kw), jax.lax.conv_transpose(x, k, **kw), 1e-4)
    gx = xform.grad(lambda a, b: jnp.sum(lax.conv_transpose(a, b, **kw) ** 2),
                    argnums=(0, 1))(x, k)
    gj = jax.grad(lambda a, b: jjnp.sum(jax.lax.conv_transpose(a, b, **kw) ** 2),
                  argnums=(0, 1))(x, k)
    _close(gx[0], gj[0], 1e-3)
    _close(gx[1], gj[1], 1e-3)


def test_conv_transpose_2d():
    x = _rng.randn(1, 3, 4, 2).astype(np.float32)
    k = _rng.randn(2, 3, 2, 3).astype(np.float32)
    kw = dict(strides=(2, 1), padding="SAME", transpose_kernel=True)
    k = np.swapaxes(k, 2, 3)
    _close(lax.conv_transpose(x, k, **kw), jax.lax.conv_transpose(x, k, **kw), 1e-4)
