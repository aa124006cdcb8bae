"""``jnp.roots``: a polynomial's roots as the eigenvalues of its companion matrix, as
JAX's. The eigenvalues come from ``lax.linalg.eig`` directly: ``xform.numpy.linalg``
imports the ``xform.numpy`` face, so using it here would make an import cycle."""
import numpy as np

from xform import lax
from xform.interpreters.composite import composite
from xform.lax import linalg as lax_linalg
from xform.numpy import _util
from xform.numpy._creation import array, ones
from xform.numpy._matrix import diag
from xform.numpy._reductions import all as _all, argmin
from xform.numpy._shape import atleast_1d
from xform.numpy._sorting import where


def _complex_dtype(dt):
    return np.result_type(dt, np.complex64)


@composite  # (JAX's is jitted, as _roots_with_zeros)
def _roots_no_zeros(p):
    if p.size < 2:
        return array([], dtype=_complex_dtype(p.dtype))
    companion = diag(ones((p.size - 2,), p.dtype), -1)
    return lax_linalg.eig(companion.at[0, :].set(-p[1:] / p[0]),
                          compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


@composite
def _roots_with_zeros(p, num_leading_zeros):
    p = where(len(p) == num_leading_zeros, 1.0, p)    # all zeros: avoid a singular matrix
    n = lax.iota(np.int32, p.size)    # roll the leading zeros to the end (a traced shift)
    roots = _roots_no_zeros(p[(n + num_leading_zeros) % p.size])
    roots = lax.sort_key_val(roots == 0, roots)[1]     # zero roots last
    keep = lax.iota(np.int32, roots.size) < roots.size - num_leading_zeros
    return where(keep, roots, complex(np.nan, np.nan))


def roots(p, *, strip_zeros=True):
    """The roots of the polynomial with coefficients ``p`` (highest degree first), as
    ``numpy.roots``. ``strip_zeros=False`` works under jit: leading zeros then give NaN
    roots (at the end) instead of fewer roots.

    Raises:
      ValueError: ``p`` is not 1-D. ConcretizationTypeError: ``strip_zeros`` under jit.

    >>> jnp.roots(jnp.array([1., -3., 2.])).real.sort()
    Array([1., 2.], dtype=float32)
    """
    p, = _util.promote_dtypes("roots", p, to="inexact")
    p = atleast_1d(p)
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    if p.size < 2:
        return array([], dtype=_complex_dtype(p.dtype))
    num_leading_zeros = where(_all(p == 0), len(p), argmin(p == 0))
    if strip_zeros:
        n = int(_util.concrete_or_error(num_leading_zeros, "p (with strip_zeros=True; pass "
                                        "strip_zeros=False under jit: leading zeros then give "
                                        "NaN roots)", "roots"))
        return _roots_no_zeros(p[n:])
    return _roots_with_zeros(p, num_leading_zeros)
