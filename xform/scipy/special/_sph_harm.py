"""Spherical harmonics ``sph_harm_y`` of ``scipy.special``, from normalized associated
Legendre functions built up by the three-term recurrence in the degree, as JAX.

NB: the recurrence's coefficient masks depend only on the static ``n_max``, so they are
NumPy constants here and the loop over degrees is unrolled (JAX: a ``fori_loop``).
"""
import operator

import numpy as np

from xform import lax
from xform import numpy as jnp


def _recurrence_masks(l_max, dtype):
    """``(d0, d1)[i][m, l]``: the coefficients of ``P(m, l-1) x`` and ``P(m, l-2)`` in
    ``P(m, l)`` for ``l = m + i`` (zero elsewhere), normalized."""
    # in ``dtype``, as JAX computes them (division and sqrt round alike in NumPy and XLA)
    m, l = np.meshgrid(np.arange(l_max + 1, dtype=dtype), np.arange(l_max + 1, dtype=dtype),
                       indexing="ij")
    with np.errstate(divide="ignore", invalid="ignore"):
        d0 = np.sqrt((4.0 * l * l - 1.0) / (l * l - m * m))
        d1 = np.sqrt(((2.0 * l + 1.0) * ((l - 1.0) ** 2 - m * m)) / ((2.0 * l - 3.0)
                                                                   * (l * l - m * m)))
    d0 = np.where(np.triu(np.ones_like(d0, bool), 1), d0, 0)
    d1 = np.where(np.triu(np.ones_like(d1, bool), 2), d1, 0)
    i = np.arange(l_max + 1)
    on = (i[:, None, None] + i[None, :, None] - i[None, None, :] == 0)
    return (on * d0).astype(dtype), (on * d1).astype(dtype)


def _associated_legendre(l_max, x):
    """Normalized ``P[m, l, k]`` at ``x[k]`` for ``0 <= m, l <= l_max``."""
    dt = x.dtype
    init = np.array(0.5, dt) / np.sqrt(np.array(np.pi, dt))
    a = np.arange(1, l_max + 1, dtype=dt)
    f_a = jnp.cumprod(-1 * jnp.sqrt(1.0 + 0.5 / a))
    f_b = jnp.sqrt(2.0 * np.arange(l_max, dtype=dt) + 3.0)
    p = jnp.zeros((l_max + 1, l_max + 1, x.shape[0]), dtype=dt).at[0, 0].set(init)
    y = jnp.cumprod(jnp.broadcast_to(jnp.sqrt(1.0 - x * x), (l_max, x.shape[0])), axis=0)
    diag = np.arange(l_max + 1)
    p = p.at[diag[1:], diag[1:]].set(init * (f_a[:, None] * y))
    p = p.at[diag[:l_max], diag[:l_max] + 1].set(
        f_b[:, None] * x[None, :] * p[diag[:l_max], diag[:l_max]])
    d0, d1 = _recurrence_masks(l_max, dt)
    for i in range(2, l_max + 1):
        p = p + (d0[i][:, :, None] * (jnp.roll(p, 1, axis=1) * x)
                 - d1[i][:, :, None] * jnp.roll(p, 2, axis=1))
    return p


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """The spherical harmonics ``Y_n^m(theta, phi)`` (degree ``n``, order ``m``; polar
    angle ``theta``, azimuth ``phi``), complex.

    Args:
      n, m: integer arrays (``|m| <= n``).
      theta, phi: angles, one per entry of ``n``.
      diff_n: unsupported, as in JAX.
      n_max: the largest degree (static; default ``max(n)``, which must be concrete).

    >>> import numpy as np, xform.scipy.special as sp
    >>> round(complex(sp.sph_harm_y(np.array([0]), np.array([0]), 0.3, 0.0)[0]).real, 5)
    0.28209
    """
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to jax.scipy.special.sph_harm_y "
                                  "is not supported.")
    if np.isscalar(theta):
        theta = jnp.array([theta])
    if n_max is None:
        n_max = np.max(n)
    n_max = operator.index(int(n_max))
    n, m, theta, phi = (jnp.asarray(v) for v in (n, m, theta, phi))
    legendre = _associated_legendre(n_max, jnp.cos(theta))
    value = legendre.at[jnp.abs(m), n, jnp.arange(len(n))].get(mode="clip")
    angle = jnp.abs(m) * phi
    harmonics = lax.complex(value * jnp.cos(angle), value * jnp.sin(angle))
    return jnp.where(m < 0, (-1.0) ** jnp.abs(m) * jnp.conjugate(harmonics), harmonics)
