"""The Fresnel integrals ``(S(x), C(x))`` of ``scipy.special``: Cephes' rational
approximations (single-precision ones for float32 and below, evaluated in float32), as
JAX's, with ``sin``/``cos(pi x^2 / 2)`` reduced exactly modulo 2 first.
"""
import numpy as np

from xform import numpy as jnp
from xform.core import dtypes
from xform.scipy.special._basic import _inexact
from xform.transforms.custom_derivatives import custom_jvp

_F32 = {   # (numerator, denominator) coefficients; None: no denominator
    "s": ([1.647629463788700e-9, -1.522754752581096e-7, 8.424748808502400e-6,
           -3.120693124703272e-4, 7.244727626597022e-3, -9.228055941124598e-2,
           5.235987735681432e-1], None),
    "c": ([1.416802502367354e-8, -1.157231412229871e-6, 5.387223446683264e-5,
           -1.604381798862293e-3, 2.818489036795073e-2, -2.467398198317899e-1,
           9.999999760004487e-1], None),
    "f": ([-1.903009855649792e12, 1.355942388050252e11, -4.158143148511033e9,
           7.343848463587323e7, -8.732356681548485e5, 8.560515466275470e3,
           -1.032877601091159e2, 2.999401847870011e0], None),
    "g": ([-1.860843997624650e11, 1.278350673393208e10, -3.779387713202229e8,
           6.492611570598858e6, -7.787789623358162e4, 8.602931494734327e2,
           -1.493439396592284e1, 9.999841934744914e-1], None),
}
_F64 = {
    "s": ([-2.99181919401019853726e3, 7.08840045257738576863e5, -6.29741486205862506537e7,
           2.54890880573376359104e9, -4.42979518059697779103e10, 3.18016297876567817986e11],
          [1.0, 2.81376268889994315696e2, 4.55847810806532581675e4, 5.17343888770096400730e6,
           4.19320245898111231129e8, 2.24411795645340920940e10, 6.07366389490084639049e11]),
    "c": ([-4.98843114573573548651e-8, 9.50428062829859605134e-6, -6.45191435683965050962e-4,
           1.88843319396703850064e-2, -2.05525900955013891793e-1, 9.99999999999999998822e-1],
          [3.99982968972495980367e-12, 9.15439215774657478799e-10, 1.25001862479598821474e-7,
           1.22262789024179030997e-5, 8.68029542941784300606e-4, 4.12142090722199792936e-2,
           1.00000000000000000118e0]),
    "f": ([4.21543555043677546506e-1, 1.43407919780758885261e-1, 1.15220955073585758835e-2,
           3.45017939782574027900e-4, 4.63613749287867322088e-6, 3.05568983790257605827e-8,
           1.02304514164907233465e-10, 1.72010743268161828879e-13, 1.34283276233062758925e-16,
           3.76329711269987889006e-20],
          [1.0, 7.51586398353378947175e-1, 1.16888925859191382142e-1, 6.44051526508858611005e-3,
           1.55934409164153020873e-4, 1.84627567348930545870e-6, 1.12699224763999035261e-8,
           3.60140029589371370404e-11, 5.88754533621578410010e-14, 4.52001434074129701496e-17,
           1.25443237090011264384e-20]),
    "g": ([5.04442073643383265887e-1, 1.97102833525523411709e-1, 1.87648584092575249293e-2,
           6.84079380915393090172e-4, 1.15138826111884280931e-5, 9.82852443688422223854e-8,
           4.45344415861750144738e-10, 1.08268041139020870318e-12, 1.37555460633261799868e-15,
           8.36354435630677421531e-19, 1.86958710162783235106e-22],
          [1.0, 1.47495759925128324529e0, 3.37748989120019970451e-1, 2.53603741420338795122e-2,
           8.14679107184306179049e-4, 1.27545075667729118702e-5, 1.04314589657571990585e-7,
           4.60680728146520428211e-10, 1.10273215066240270757e-12, 1.38796531259578871258e-15,
           8.39158816283118707363e-19, 1.86958710162783236342e-22]),
}


def _sincos_pi_x2_half(x):
    """``sin``, ``cos(pi x^2 / 2)``, with ``x^2 / 2`` reduced mod 2 exactly: for
    ``s = x mod 2``, ``x^2 / 2 = s (x - s/2) (mod 2)``."""
    x = jnp.abs(x)
    s = jnp.fmod(x, 2.0)
    r = jnp.fmod(s * (x - s / 2), 2.0)
    sinpi = jnp.where(r < 0.5, jnp.sin(np.pi * r), jnp.where(
        r > 1.5, jnp.sin(np.pi * (r - 2.0)), -jnp.sin(np.pi * (r - 1.0))))
    cospi = jnp.where(r == 0.5, 0.0, jnp.where(
        r < 1.0, -jnp.sin(np.pi * (r - 0.5)), jnp.sin(np.pi * (r - 1.5))))
    return sinpi, cospi


def fresnel(x):
    """The Fresnel integrals ``S(x) = int_0^x sin(pi t^2 / 2) dt`` and ``C(x)`` (with
    ``cos``), as a pair.

    Raises:
      NotImplementedError: for complex ``x``, as JAX.

    >>> import xform.scipy.special as sp
    >>> [round(float(v), 5) for v in sp.fresnel(1.0)]
    [0.43826, 0.77989]
    """
    x, = _inexact("fresnel", x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise NotImplementedError("Support for complex-valued inputs is not implemented yet.")
    return _fresnel(x)


def _rational(coeffs, t, dt):
    num, den = coeffs
    p = jnp.polyval(np.array(num, dt), t)
    return p if den is None else p / jnp.polyval(np.array(den, dt), t)


@custom_jvp
def _fresnel(xx):
    dtype = xx.dtype
    if dtype != np.float64:   # half precisions overflow or lose accuracy: use float32
        xx = xx.astype(np.float32)
    single = xx.dtype == np.float32
    c, dt = (_F32 if single else _F64), xx.dtype
    x = jnp.abs(xx)
    x2 = x * x
    t = x2 * x2
    s_small = x * x2 * _rational(c["s"], t, dt)
    c_small = x * _rational(c["c"], t, dt)
    sinpi, cospi = _sincos_pi_x2_half(x)
    if single:
        s_large = c_large = 0.5
    else:
        c_large = 0.5 + 1 / (np.pi * x) * sinpi
        s_large = 0.5 - 1 / (np.pi * x) * cospi
    t = np.pi * x2
    u = 1.0 / (t * t)
    t = 1.0 / t
    f = 1.0 - u * _rational(c["f"], u, dt)
    g = t * _rational(c["g"], u, dt)
    t = np.pi * x
    c_other = 0.5 + (f * sinpi - g * cospi) / t
    s_other = 0.5 - (f * cospi + g * sinpi) / t
    inf, small, large = jnp.isinf(xx), x2 < 2.5625, x > 36974.0
    s = jnp.where(inf, 0.5, jnp.where(small, s_small, jnp.where(large, s_large, s_other)))
    co = jnp.where(inf, 0.5, jnp.where(small, c_small, jnp.where(large, c_large, c_other)))
    neg = xx < 0.0
    s, co = jnp.where(neg, -s, s), jnp.where(neg, -co, co)
    return s.astype(dtype), co.astype(dtype)


@_fresnel.defjvp
def _fresnel_jvp(primals, tangents):   # S' = sin(pi x^2 / 2), C' = cos(pi x^2 / 2)
    (x,), (t,) = primals, tangents
    sinpi, cospi = _sincos_pi_x2_half(x)
    return _fresnel(x), (sinpi * t, cospi * t)
