"""Bessel, error-function relatives and information measures of ``scipy.special``:
i0/i0e/i1/i1e (``lax.bessel_i0e``/``i1e``), bessel_jn, erfcx, wofz and dawsn (with JAX's custom
JVPs), owens_t, rel_entr, kl_div, boxcox and boxcox1p.
"""
import operator

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.scipy.special._basic import _inexact, _xlogx, xlogy
from xform.transforms.custom_derivatives import custom_jvp


def _real(name, x):
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return x


# ---- modified Bessel functions ----

def i0e(x):
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) i0(x)``.

    >>> import xform.scipy.special as sp
    >>> sp.i0e(0.)
    Array(1.0000001, dtype=float32, weak_type=True)
    """
    x, = _inexact("i0e", x)
    return lax.bessel_i0e(x)


def i0(x):
    """The modified Bessel function of order 0, ``exp(|x|) i0e(x)``."""
    x, = _inexact("i0", x)
    return lax.exp(lax.abs(x)) * lax.bessel_i0e(x)


def i1e(x):
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) i1(x)``."""
    x, = _inexact("i1e", x)
    return lax.bessel_i1e(x)


def i1(x):
    """The modified Bessel function of order 1, ``exp(|x|) i1e(x)``."""
    x, = _inexact("i1", x)
    return lax.exp(lax.abs(x)) * lax.bessel_i1e(x)


@composite(static=("v", "n_iter"))
def bessel_jn(z, *, v, n_iter=50):
    """The Bessel functions of the first kind of orders ``0 .. v`` (static), stacked
    along a new leading axis: Miller's backward recurrence from order ``n_iter``,
    normalized by ``J_0 + 2 (J_2 + J_4 + ...) = 1``, as JAX (whose float32 recurrence
    overflows to NaN for small ``z`` with the default ``n_iter``).

    >>> import xform.scipy.special as sp
    >>> [round(float(j), 4) for j in sp.bessel_jn(1.0, v=1, n_iter=15)]
    [0.7652, 0.4401]
    """
    z, = _inexact("bessel_jn", z)
    if dtypes.issubdtype(z.aval.dtype, np.complexfloating):
        raise ValueError("complex input not supported.")
    v, n_iter = operator.index(v), int(n_iter)

    def step(carry, k):   # J_{k-1} = 2k/z J_k - J_{k+1}; accumulate the even orders
        f0, f1, bs = carry
        f = 2.0 * (k + 1.0) * f1 / z - f0
        return (f1, f, jnp.where(k % 2 == 0, bs + 2.0 * f, bs)), f
    zero = jnp.zeros_like(z)
    (_, _, bs), j_vals = lax.scan(step, (zero, jnp.full_like(z, 1e-16), zero),
                                  jnp.arange(n_iter + 1, dtype=z.aval.dtype), reverse=True)
    return j_vals[:v + 1] / (bs - j_vals[0])


# ---- erfcx and dawsn ----

def erfcx(x):
    """The scaled complementary error function ``exp(x^2) erfc(x)``: direct where
    ``exp(x^2)`` stays finite, else its asymptotic series (real arguments).

    >>> import xform.scipy.special as sp
    >>> sp.erfcx(0.)
    Array(1., dtype=float32)
    """
    x, = _inexact("erfcx", x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        return _wofz(lax.complex(-lax.imag(x), lax.real(x)))   # erfcx(z) = w(iz)
    return _erfcx(x)


@custom_jvp
def _erfcx(x):
    dtype = x.aval.dtype
    if dtype == np.float64:   # enough series terms that the first omitted one is < eps
        return _erfcx_impl(x, 9)
    if dtype == np.float32:
        return _erfcx_impl(x, 5)
    return _erfcx_impl(x.astype(np.float32), 5).astype(dtype)


_erfcx.defjvps(lambda t, ans, x: t * (2 * x * ans - np.array(2 / np.sqrt(np.pi), x.dtype)))


def _erfcx_impl(x, nterms):
    large = x > np.sqrt(np.log(dtypes.finfo(x.dtype).max))
    safe_x = jnp.where(large, jnp.ones_like(x), x)
    direct = lax.exp(lax.square(safe_x)) * lax.erfc(safe_x)
    # erfcx(x) ~ P(1/x^2) / (sqrt(pi) x), P's coefficients (-1)^k (2k-1)!! / 2^k
    coeffs = [7918.06640625, -1055.7421875, 162.421875, -29.53125, 6.5625, -1.875, .75,
              -.5, 1.][-nterms:]
    asymptotic = jnp.polyval(np.array(coeffs, x.dtype), 1 / lax.square(x)) / (
        x * np.sqrt(np.pi).astype(x.dtype))
    return jnp.where(large, asymptotic, direct)


# ---- wofz: the Faddeeva function w(z) = exp(-z^2) erfc(-iz) ----

# Weideman (1994), N = 32: for Im z >= 0, w(z) = 2 P(Z) / (L - iz)^2 + 1 / (sqrt(pi) (L - iz))
# with Z = (L + iz) / (L - iz); below the real axis w(z) = 2 exp(-z^2) - w(-z).
_WOFZ_L = 4.7568284600108841
_WOFZ_C = np.array([
    -1.3034426067909105e-12, 3.7411838373738471e-12, 8.030427700497756e-12,
    -2.1543593557490879e-11, -5.5442449963237932e-11, 1.165824698850374e-10,
    4.1537441121999766e-10, -5.2310202114920615e-10, -3.2080151339721323e-09,
    8.1248864216535907e-10, 2.3797556530014025e-08, 2.2930438438915445e-08,
    -1.4813078929137642e-07, -4.1840763750512053e-07, 4.2558331397138446e-07,
    4.4015317312832251e-06, 6.8210319443575151e-06, -2.1409619201999998e-05,
    -0.00013075449254579421, -0.00024532980270038237, 0.00039259136070109705,
    0.0045195411053493093, 0.019006155784845501, 0.057304403529837282, 0.14060716226893755,
    0.29544451071508743, 0.54601397206393376, 0.9019254893648001, 1.3455441692345449,
    1.8256696296324815, 2.2635372999002676, 2.5722534081245696])


def wofz(z):
    """The Faddeeva function ``exp(-z^2) erfc(-iz)`` (complex result).

    >>> import xform.scipy.special as sp
    >>> complex(sp.wofz(0.0))
    (1.0000001192092896+0j)
    """
    z, = _inexact("wofz", z)
    if not dtypes.issubdtype(z.aval.dtype, np.complexfloating):
        z = lax.convert_element_type(z, np.result_type(z.aval.dtype, np.complex64),
                                     z.aval.weak_type)
    return _wofz(z)


def _wofz_upper(z):
    re = lax.real(z)
    dt = re.dtype
    big_l = lax.complex(np.array(_WOFZ_L, dt), np.array(0., dt))
    iz = lax.complex(-lax.imag(z), re)
    denom = big_l - iz
    p = jnp.polyval(jnp.asarray(_WOFZ_C, dtype=z.dtype), (big_l + iz) / denom)
    return 2 * p / (denom * denom) + lax.complex(np.array(1 / np.sqrt(np.pi), dt),
                                                 np.array(0., dt)) / denom


@custom_jvp
def _wofz(z):
    upper = lax.imag(z) >= 0
    w = _wofz_upper(jnp.where(upper, z, -z))
    return jnp.where(upper, w, 2 * lax.exp(-(z * z)) - w)


_wofz.defjvps(lambda t, ans, z: t * (-(2 * z * ans) + lax.complex(
    np.array(0., lax.real(z).dtype), np.array(2 / np.sqrt(np.pi), lax.real(z).dtype))))


# Cody, Paciorek and Thacher (1970): x P(x^2)/Q(x^2) below 3.25, then
# (1 + t P(t)/Q(t)) / (2x) in t = 1/x^2 on [3.25, 6.25) and above.
_DAWSN = {
    "AN": [1.13681498971755972054e-11, 8.49262267667473811108e-10, 1.94434204175553054283e-8,
           9.53151741254484363489e-7, 3.07828309874913200438e-6, 3.52513368520288738649e-4,
           -8.50149846724410912031e-4, 4.22618223005546594270e-2, -9.17480371773452345351e-2,
           9.99999999999999994612e-1],
    "AD": [2.40372073066762605484e-11, 1.48864681368493396752e-9, 5.21265281010541664570e-8,
           1.27258478273186970203e-6, 2.32490249820789513991e-5, 3.25524741826057911661e-4,
           3.48805814657162590916e-3, 2.79448531198828973716e-2, 1.58874241960120565368e-1,
           5.74918629489320327824e-1, 1.00000000000000000539e0],
    "BN": [5.08955156417900903354e-1, -2.44754418142697847934e-1, 9.41512335303534411857e-2,
           -2.18711255142039025206e-2, 3.66207612329569181322e-3, -4.23209114460388756528e-4,
           3.59641304793896631888e-5, -2.14640351719968974225e-6, 9.10010780076391431042e-8,
           -2.40274520828250956942e-9, 3.59233385440928410398e-11],
    "BD": [1.00000000000000000000e0, -6.31839869873368190192e-1, 2.36706788228248691528e-1,
           -5.31806367003223277662e-2, 8.48041718586295374409e-3, -9.47996768486665330168e-4,
           7.81025592944552338085e-5, -4.55875153252442634831e-6, 1.89100358111421846170e-7,
           -4.91324691331920606875e-9, 7.18466403235734541950e-11],
    "CN": [-5.90592860534773254987e-1, 6.29235242724368800674e-1, -1.72858975380388136411e-1,
           1.64837047825189632310e-2, -4.86827613020462700845e-4],
    "CD": [1.00000000000000000000e0, -2.69820057197544900361e0, 1.73270799045947845857e0,
           -3.93708582281939493482e-1, 3.44278924041233391079e-2, -9.73655226040941223894e-4],
}


def dawsn(x):
    """Dawson's integral ``exp(-x^2) int_0^x exp(t^2) dt``."""
    x, = _inexact("dawsn", x)
    return _dawsn(_real("dawsn", x))


@custom_jvp
def _dawsn(x):
    if x.dtype in (np.float32, np.float64):
        return _dawsn_impl(x)
    return _dawsn_impl(x.astype(np.float32)).astype(x.dtype)


_dawsn.defjvps(lambda t, ans, x: t * (1 - 2 * x * ans))


def _dawsn_impl(x):
    c = {k: np.array(v, x.dtype) for k, v in _DAWSN.items()}
    ax = lax.abs(x)
    one = jnp.ones_like(ax)
    r1, r3 = ax < 3.25, ax >= 6.25
    r2 = ~r1 & ~r3
    # each region sees safe arguments elsewhere, so unused branches make no inf/inf NaN
    a1 = jnp.where(r1, ax, one)
    val1 = a1 * jnp.polyval(c["AN"], a1 * a1) / jnp.polyval(c["AD"], a1 * a1)

    def tail(mask, num, den):
        a = jnp.where(mask, ax, one)
        t = 1 / (a * a)
        return (0.5 / a) * (1 + t * jnp.polyval(c[num], t) / jnp.polyval(c[den], t))
    out = jnp.where(r1, val1, jnp.where(r2, tail(r2, "BN", "BD"), tail(r3, "CN", "CD")))
    return jnp.sign(x) * out


# ---- Owen's T ----

# Patefield and Tandy (2000), method T5: a 13-point Gauss rule for
#   T(h, a) = a sum_i w_i exp(-h^2 (1 + a^2 t_i) / 2) / (1 + a^2 t_i)
_OWENS_T_POINTS = np.array([
    0.0035082039676451715, 0.031279042338030754, 0.085266826283219451, 0.16245071730812277,
    0.25851196049125435, 0.36807553840697534, 0.48501092905604697, 0.60277514152618577,
    0.71477884217753227, 0.81475510988760099, 0.89711029755948966, 0.95723808085944262,
    0.99178832974629704])
_OWENS_T_WEIGHTS = np.array([
    0.018831438115323503, 0.018567086243977649, 0.018042093461223386, 0.017263829606398753,
    0.016243219975989857, 0.014994592034116705, 0.013535474469662088, 0.011886351605820165,
    0.010070377242777432, 0.0081130545742299587, 0.0060419009528470239, 0.0038862217010742058,
    0.0016793031084546090])


def owens_t(h, a):
    """Owen's T function ``(1/2pi) int_0^a exp(-h^2 (1+x^2)/2) / (1+x^2) dx``: a
    quadrature for ``|a| <= 1``, the reciprocal identity above (as JAX)."""
    h, a = _inexact("owens_t", h, a)
    return _owens_t(h, a)


@custom_jvp
def _owens_t(h, a):
    h, abs_a = jnp.abs(h), jnp.abs(a)
    root_2 = np.sqrt(2).astype(h.dtype)
    h_normed = h / root_2
    small = abs_a <= 1.
    ma, mh = jnp.where(small, abs_a, 1 / abs_a), jnp.where(small, h, abs_a * h)
    r = jnp.square(ma)[..., None] * _OWENS_T_POINTS
    integrand = jnp.exp(-0.5 * jnp.square(mh)[..., None] * (1. + r)) / (1. + r)
    out = ma * (integrand @ _OWENS_T_WEIGHTS)
    out = jnp.where(mh == 0., jnp.arctan(ma) / (2 * np.pi), out)   # exact at h=0, a=1
    out = jnp.where(ma == 1., 0.125 * lax.erfc(-mh / root_2) * lax.erfc(mh / root_2), out)
    normh, normah = lax.erfc(h_normed), lax.erfc(abs_a * h_normed)
    out = jnp.where(abs_a > 1., jnp.where(
        abs_a * h <= 0.67, 0.25 - 0.25 * lax.erf(h_normed) * lax.erf(abs_a * h_normed) - out,
        0.25 * (normh + normah - normh * normah) - out), out)
    out = lax.sign(a) * out
    return jnp.where(jnp.isnan(a) | jnp.isnan(h), jnp.full_like(out, np.nan), out)


@_owens_t.defjvp
def _owens_t_jvp(primals, tangents):
    (h, a), (dh, da) = primals, tangents
    out = _owens_t(h, a)
    # dT/dh = -exp(-h^2/2) erf(a h / sqrt 2) / (2 sqrt(2 pi)); dT/da = exp(-(a^2+1) h^2/2)
    # / (2 pi (a^2 + 1))
    d_h = (-lax.exp(-0.5 * lax.square(h)) * lax.erf(a * h / np.sqrt(2).astype(h.dtype))
           / (2. * np.sqrt(2. * np.pi).astype(h.dtype)))
    d_a = lax.exp(-0.5 * (lax.square(a) + 1.) * lax.square(h)) / (
        2. * np.pi * (lax.square(a) + 1.))
    return out, d_h * dh + d_a * da


# ---- information measures and Box-Cox ----

def rel_entr(p, q):
    """Elementwise relative entropy: ``p log(p / q)`` for p, q > 0; 0 at ``p == 0,
    q >= 0``; ``inf`` otherwise.

    >>> import xform.scipy.special as sp
    >>> sp.rel_entr(0., 1.)
    Array(0., dtype=float32, weak_type=True)
    """
    p, q = _inexact("rel_entr", p, q)
    _real("rel_entr", p)
    both_positive = (p > 0) & (q > 0)
    safe_p, safe_q = jnp.where(both_positive, p, 1), jnp.where(both_positive, q, 1)
    log_val = _xlogx(safe_p) - xlogy(safe_p, safe_q)
    return jnp.where(both_positive, log_val,
                     jnp.where((p == 0) & (q >= 0), jnp.zeros_like(p), np.inf))


def kl_div(p, q):
    """Elementwise Kullback-Leibler divergence term ``rel_entr(p, q) - p + q``."""
    p, q = _inexact("kl_div", p, q)
    _real("kl_div", p)
    return rel_entr(p, q) - p + q


def boxcox(x, lmbda):
    """The Box-Cox transform ``((x^l) - 1) / l``, ``log(x)`` at ``l == 0``."""
    x, lmbda = _inexact("boxcox", x, lmbda)
    return _boxcox(lax.log(x), lmbda)


def boxcox1p(x, lmbda):
    """The Box-Cox transform of ``1 + x``, accurate for small ``x``."""
    x, lmbda = _inexact("boxcox1p", x, lmbda)
    return _boxcox(lax.log1p(x), lmbda)


def _boxcox(log_x, lmbda):
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, lax.expm1(safe * log_x) / safe)
