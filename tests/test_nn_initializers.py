"""xform.nn.initializers against jax.nn.initializers at run time: the same key gives the
same values bit for bit, dtype and shape included, for the default dtype (float64 under
x64, as JAX's) and complex kernels (JAX's disk-uniform and modulus-truncated normal)."""
import jax.nn.initializers as ji
import jax.random as jr
import numpy as np

import xform.nn.initializers as xi
import xform.random as xr


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# (factory, its args): variance scaling's truncated normal and uniform, QR, constant
_FACTORIES = [("lecun_normal", ()), ("he_uniform", ()), ("orthogonal", ()),
              ("constant", (0.5,))]


def test_default_dtype_is_jax_default_float_under_x64(x64):
    for name, args in _FACTORIES:
        same(getattr(xi, name)(*args)(xr.PRNGKey(3), (3, 4)),
             getattr(ji, name)(*args)(jr.PRNGKey(3), (3, 4)))
    same(xi.zeros(xr.PRNGKey(0), (2,)), ji.zeros(jr.PRNGKey(0), (2,)))


def test_complex_variance_scaling():
    for name in ("lecun_normal", "glorot_uniform"):   # modulus-truncated, disk-uniform
        same(getattr(xi, name)(dtype=np.complex64)(xr.key(1), (2, 3, 5)),
             getattr(ji, name)(dtype=np.complex64)(jr.key(1), (2, 3, 5)))
