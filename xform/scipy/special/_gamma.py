"""The gamma family of ``scipy.special``: gamma, gammasgn, loggamma, beta, factorial,
comb, poch, multigammaln, polygamma, zeta and bernoulli, composed from ``lax.lgamma``,
``lax.polygamma`` and ``lax.zeta`` as JAX composes them; gamma and loggamma of complex
arguments by Lanczos' series (g = 7, 9 terms) with reflection, as JAX.
"""
import operator
from fractions import Fraction
import math

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.scipy.special._basic import _inexact, betaln, digamma
from xform.transforms.ad import jvp
from xform.transforms.custom_derivatives import custom_jvp


def _real(name, x):
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return x


@composite
def gammasgn(x):
    """The sign of the gamma function: NaN at the poles (non-positive integers, -inf)
    and at NaN, ``-1`` at -0."""
    x, = _inexact("gammasgn", x)
    x = _real("gammasgn", x)
    typ = x.aval.dtype.type   # strong constants: the result is not weakly typed, as JAX
    floor_x = lax.floor(x)
    negative = x < 0
    return jnp.select([(negative & (x == floor_x)) | jnp.isnan(x),
                       (negative & (floor_x % 2 != 0)) | ((x == 0) & jnp.signbit(x))],
                      [typ(np.nan), typ(-1.0)], typ(1.0))


_LANCZOS_G = 7.0
_LANCZOS_COEFFS = np.array([   # GSL's lanczos_7_c
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
    -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
    1.5056327351493116e-7])


def _complex_loggamma(z):
    """log Gamma by Lanczos, reflected (Gamma(z) = pi / (sin(pi z) Gamma(1 - z))) for
    Re z < 1/2; each branch sees safe arguments where it is not taken (no NaN grads)."""
    reflect = jnp.real(z) < 0.5
    zz = jnp.where(reflect, 1.0 - z, z) - 1.0
    c = jnp.asarray(_LANCZOS_COEFFS, dtype=z.dtype)
    ks = jnp.arange(1, 9, dtype=z.dtype)
    ag = c[0] + jnp.sum(c[1:] / (zz[..., None] + ks), axis=-1)
    t = zz + _LANCZOS_G + 0.5
    lanczos = (jnp.asarray(0.5 * np.log(2.0 * np.pi), dtype=z.dtype) + (zz + 0.5) * jnp.log(t)
               - t + jnp.log(ag))
    z_safe = jnp.where(reflect, z, jnp.full_like(z, 0.5))
    reflected = (jnp.log(jnp.asarray(np.pi, dtype=z.dtype)) - jnp.log(jnp.sin(np.pi * z_safe))
                 - lanczos)
    return jnp.where(reflect, reflected, lanczos)


def _poles_or_nan(z):
    re = jnp.real(z)
    return jnp.isnan(z) | ((jnp.imag(z) == 0) & (re == jnp.floor(re)) & (re <= 0))


def _complex_gamma(z):
    bad = _poles_or_nan(z)
    out = jnp.exp(_complex_loggamma(jnp.where(bad, jnp.ones_like(z), z)))
    return jnp.where(bad, jnp.array(complex(np.nan, np.nan), dtype=z.dtype), out)


def _complex_loggamma_principal(z):
    # loggamma(z) = loggamma(z + n) - sum_{k<n} log(z + k), n shifting Re z past 1/2: the
    # single branch cut on the negative real axis, as SciPy
    bad = _poles_or_nan(z)
    z_safe = jnp.where(bad, jnp.ones_like(z), z)
    n = jnp.maximum(0, jnp.ceil(0.5 - jnp.real(z_safe)).astype(int))

    def body(state):
        k, total = state
        due = k < n
        zk = jnp.where(due, z_safe + k, jnp.ones_like(z_safe))
        return k + 1, total + jnp.where(due, jnp.log(zk), jnp.zeros_like(total))
    _, total = lax.while_loop(lambda s: jnp.any(s[0] < n), body, (0, jnp.zeros_like(z_safe)))
    out = _complex_loggamma(z_safe + n) - total
    return jnp.where(bad, jnp.array(complex(np.nan, np.nan), dtype=z.dtype), out)


def gamma(x):
    """The gamma function, ``gammasgn(x) * exp(gammaln(x))`` (Lanczos for complex ``x``;
    ``nan+nanj`` at the poles).

    >>> import xform.scipy.special as sp
    >>> print(f"{float(sp.gamma(5.)):.4f}")   # (the last float32 digits vary by platform)
    24.0000
    """
    x, = _inexact("gamma", x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        return _complex_gamma(x)
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def loggamma(x):
    """The principal branch of log-gamma: ``gammaln`` for real ``x > 0`` (NaN for
    other reals); for complex ``x`` a single branch cut on the negative real axis.

    >>> import xform.scipy.special as sp
    >>> sp.loggamma(4.)
    Array(1.7917603, dtype=float32, weak_type=True)
    """
    x, = _inexact("loggamma", x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        return _complex_loggamma_principal(x)
    return jnp.where(x > 0, lax.lgamma(x), np.nan)


def beta(a, b):
    """The beta function ``Gamma(a) Gamma(b) / Gamma(a + b)``, sign included."""
    a, b = _inexact("beta", a, b)
    _real("beta", a)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * lax.exp(betaln(a, b))


def factorial(n, exact=False):
    """``n!`` as ``exp(gammaln(n + 1))``; 0 for negative ``n``.

    Raises:
      NotImplementedError: for ``exact=True``, as in JAX.
    """
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n, = _inexact("factorial", n)
    return jnp.where(n < 0, 0, lax.exp(lax.lgamma(n + 1)))


def comb(N, k, *, repetition=False):
    """The number of combinations of ``N`` things taken ``k`` at a time (0 outside
    ``0 <= k <= N``), by gammaln.

    >>> import xform.scipy.special as sp
    >>> round(float(sp.comb(5., 2.)), 3)
    10.0
    """
    N, k = _inexact("comb", N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k))
    ok = (k <= N) & (N >= 0) & (k >= 0)
    safe_N, safe_k = jnp.where(ok, N, 0.0), jnp.where(ok, k, 0.0)
    out = lax.exp(lax.lgamma(safe_N + 1) - lax.lgamma(safe_k + 1)
                  - lax.lgamma(safe_N + 1 - safe_k))
    return jnp.where(ok, out, 0.0)


def poch(z, m):
    """The Pochhammer symbol (rising factorial) ``Gamma(z + m) / Gamma(z)``; 1 at
    ``m == 0``. Its derivatives are digamma differences (custom JVP, as JAX)."""
    z, m = _inexact("poch", z, m)
    if dtypes.issubdtype(z.aval.dtype, np.complexfloating):
        raise ValueError("jnp.poch does not support complex-valued inputs.")
    return _poch(z, m)


@custom_jvp
def _poch(z, m):
    return jnp.where(m == 0., jnp.ones_like(z), gamma(z + m) / gamma(z))


_poch.defjvps(lambda t, ans, z, m: (digamma(z + m) - digamma(z)) * ans * t,
              lambda t, ans, z, m: digamma(z + m) * ans * t)


def multigammaln(a, d):
    r"""The log of the multivariate gamma function of dimension ``d`` (a static int):
    :math:`\frac{d(d-1)}{4}\log\pi + \sum_{j<d} \log\Gamma(a - j/2)`."""
    d = operator.index(d)
    a, d_ = _inexact("multigammaln", a, d)
    constant = 0.25 * d_ * (d_ - 1) * np.log(np.pi).astype(a.aval.dtype)
    b = jnp.arange(d, dtype=d_.aval.dtype) / 2
    return jnp.sum(lax.lgamma(jnp.expand_dims(a, -1) - b), axis=-1) + constant


def polygamma(n, x):
    """The ``n``-th derivative of digamma, for an integer order ``n``.

    Raises:
      ValueError: if ``n`` is not of an integer dtype, or ``x`` is complex.

    >>> import xform.scipy.special as sp
    >>> round(float(sp.polygamma(1, 1.)), 4)
    1.6449
    """
    if not dtypes.issubdtype(dtypes.dtype(n), np.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{dtypes.dtype(n)}.")
    n, x = _inexact("polygamma", n, x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise ValueError("polygamma does not support complex-valued inputs.")
    return lax.polygamma(n, x)


def zeta(x, q=None):
    r"""The Hurwitz zeta function :math:`\sum_{n\ge0} (n + q)^{-x}`.

    Raises:
      NotImplementedError: without ``q`` (the Riemann zeta function), as in JAX.

    >>> import xform.scipy.special as sp
    >>> round(float(sp.zeta(2., 1.)), 4)
    1.6449
    """
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None "
                                  "to compute the Hurwitz Zeta function.")
    return _zeta(*_inexact("zeta", x, q))


@custom_jvp
def _zeta(x, q):
    return lax.zeta(x, q)


def _bernoulli_fractions(n):
    """B_0 .. B_n as exact fractions (B_1 = -1/2), by the binomial recurrence."""
    b = [Fraction(1)]
    for m in range(1, n + 1):
        b.append(-sum(math.comb(m + 1, k) * b[k] for k in range(m)) / Fraction(m + 1))
    return b


_ZETA_COEFS = [float(math.factorial(m) / b) for m, b in enumerate(_bernoulli_fractions(32))
               if m >= 2 and m % 2 == 0]   # (2j)! / B_2j, j = 1..16


def _zeta_series(s, a):
    # No closed-form derivative: JAX differentiates Euler-Maclaurin (Johansson 2015, eq. 5)
    # sum_{k<N} (a+k)^-s + (a+N)^(1-s)/(s-1)
    #   + (a+N)^-s (1/2 + sum_{j<N} prod_{i<2j+1} (s+i)/(a+N) / ((2j+2)! / B_2j+2))
    typ = a.dtype.type
    n = 8 if a.dtype == np.float32 else 16
    total = sum((a + typ(k)) ** -s for k in range(n))
    an = a + typ(n)
    ratios = jnp.stack([(s + typ(m)) / an for m in range(2 * n)], -1)
    prods = jnp.minimum(jnp.cumprod(ratios, -1)[..., ::2], typ(dtypes.finfo(a.dtype).max))
    tail = typ(0.5) + jnp.sum(prods / np.array(_ZETA_COEFS[:n], a.dtype), -1)
    return total + an ** (typ(1) - s) / (s - typ(1)) + an ** -s * tail


@_zeta.defjvp
def _zeta_jvp(primals, tangents):
    return jvp(_zeta_series, primals, tangents)


def bernoulli(n):
    """The Bernoulli numbers ``B_0 .. B_n`` (``B_1 = -1/2``), for a static ``n``: the
    even ones by Chowla and Hartung's zeta series, as JAX (computed on the host).

    >>> import xform.scipy.special as sp
    >>> sp.bernoulli(3)
    Array([ 1.        , -0.5       ,  0.16666667,  0.        ], dtype=float32)
    """
    n = operator.index(n)
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    out = np.zeros(n + 1)
    out[:3] = [1, -1 / 2, 1 / 6][:n + 1]
    m = np.arange(4, n + 1, 2, dtype=np.float64)
    # B_m = 2 (-1)^(m/2+1) m! / (2 pi)^m zeta(m), the product built up in steps of 2
    q1 = np.cumprod(-(m - 1) * m / 4 / np.pi ** 2) / np.pi ** 2
    k = np.arange(2, 50, dtype=np.float64)
    out[4::2] = q1 * (1 + np.sum(k[:, None] ** -m[None, :], axis=0))
    return jnp.asarray(out.astype(dtypes.default_float_dtype()))
