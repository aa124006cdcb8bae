"""Exponential, sine and cosine integrals and the dilogarithm of ``scipy.special``:
expi, expn, exp1, sici and spence, ported, as JAX's, from Cephes (ei.c, expn.c, sici.c,
spence.c).

NB: JAX picks each element's branch with ``lax.switch`` (``jnp.piecewise`` under
``vectorize``); here every branch is evaluated and selected, so each branch gets safe
arguments where it is not taken: the series and continued fractions of ``expn`` are
``while_loop``s that would not stop on arguments outside their range.
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.scipy.special._basic import _inexact
from xform.transforms.custom_derivatives import custom_jvp


def _real(name, x):
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return x


# ---- expi: rational approximations on (0, 2], then on (2^k, 2^(k+1)] in 1/x ----

_EI_SMALL = (  # x in (0, 2]: x A(x)/B(x) + euler_gamma + log(x)
    [-5.350447357812542947283e0, 2.185049168816613393830e2, -4.176572384826693777058e3,
     5.541176756393557601232e4, -3.313381331178144034309e5, 1.592627163384945414220e6],
    [1.0, -5.250547959112862969197e1, 1.259616186786790571525e3, -1.756549581973534652631e4,
     1.493062117002725991967e5, -7.294949239640527645655e5, 1.592627163384945429726e6])
_EI_LARGE = [  # (upper bound, A, B): e^x / x (1 + A(1/x)/B(1/x) / x)
    (4, [1.981808503259689673238e-2, -1.271645625984917501326e0, -2.088160335681228318920e0,
         2.755544509187936721172e0, -4.409507048701600257171e-1, 4.665623805935891391017e-2,
         -1.545042679673485262580e-3, 7.059980605299617478514e-5],
     [1.0, 1.476498670914921440652e0, 5.629177174822436244827e-1, 1.699017897879307263248e-1,
      2.291647179034212017463e-2, 4.450150439728752875043e-3, 1.727439612206521482874e-4,
      3.953167195549672482304e-5]),
    (8, [-1.373215375871208729803e0, -7.084559133740838761406e-1, 1.580806855547941010501e0,
         -2.601500427425622944234e-1, 2.994674694113713763365e-2, -1.038086040188744005513e-3,
         4.371064420753005429514e-5, 2.141783679522602903795e-6],
     [1.0, 8.585231423622028380768e-1, 4.483285822873995129957e-1, 7.687932158124475434091e-2,
      2.449868241021887685904e-2, 8.832165941927796567926e-4, 4.590952299511353531215e-4,
      -4.729848351866523044863e-6, 2.665195537390710170105e-6]),
    (16, [-2.106934601691916512584e0, 1.732733869664688041885e0, -2.423619178935841904839e-1,
          2.322724180937565842585e-2, 2.372880440493179832059e-4, -8.343219561192552752335e-5,
          1.363408795605250394881e-5, -3.655412321999253963714e-7, 1.464941733975961318456e-8,
          6.176407863710360207074e-10],
     [1.0, -2.298062239901678075778e-1, 1.105077041474037862347e-1, -1.566542966630792353556e-2,
      2.761106850817352773874e-3, -2.089148012284048449115e-4, 1.708528938807675304186e-5,
      -4.459311796356686423199e-7, 1.394634930353847498145e-8, 6.150865933977338354138e-10]),
    (32, [-2.458119367674020323359e-1, -1.483382253322077687183e-1, 7.248291795735551591813e-2,
          -1.348315687380940523823e-2, 1.342775069788636972294e-3, -7.942465637159712264564e-5,
          2.644179518984235952241e-6, -4.239473659313765177195e-8],
     [1.0, -1.044225908443871106315e-1, -2.676453128101402655055e-1, 9.695000254621984627876e-2,
      -1.601745692712991078208e-2, 1.496414899205908021882e-3, -8.462452563778485013756e-5,
      2.728938403476726394024e-6, -4.239462431819542051337e-8]),
    (64, [1.212561118105456670844e-1, -5.823133179043894485122e-1, 2.348887314557016779211e-1,
          -3.040034318113248237280e-2, 1.510082146865190661777e-3, -2.523137095499571377122e-5],
     [1.0, -1.002252150365854016662e0, 2.928709694872224144953e-1, -3.337004338674007801307e-2,
      1.560544881127388842819e-3, -2.523137093603234562648e-5]),
    (np.inf, [-7.657847078286127362028e-1, 6.886192415566705051750e-1,
              -2.132598113545206124553e-1, 3.346107552384193813594e-2,
              -3.076541477344756050249e-3, 1.747119316454907477380e-4,
              -6.103711682274170530369e-6, 1.218032765428652199087e-7,
              -1.086076102793290233007e-9],
     [1.0, -1.888802868662308731041e0, 1.066691687211408896850e0, -2.751915982306380647738e-1,
      3.930852688233823569726e-2, -3.414684558602365085394e-3, 1.866844370703555398195e-4,
      -6.345146083130515357861e-6, 1.239754287483206878024e-7, -1.086076102793126632978e-9]),
]


def _expi_pos(x):
    dt = x.dtype
    a, b = (np.array(c, dt) for c in _EI_SMALL)
    out = x * jnp.polyval(a, x) / jnp.polyval(b, x) + np.euler_gamma + jnp.log(x)
    lower = 2
    for upper, a, b in _EI_LARGE:
        w = 1 / x
        f = w * jnp.polyval(np.array(a, dt), w) / jnp.polyval(np.array(b, dt), w) + 1
        out = jnp.where((x > lower) & (x <= upper), jnp.exp(x) * w * f, out)
        lower = upper
    return jnp.where(x == 0, np.nan, out)   # NB: JAX's value; SciPy's is -inf


@composite
def expi(x):
    """The exponential integral ``Ei(x)``, the principal value of
    ``int_-inf^x e^t / t dt``.

    >>> import xform.scipy.special as sp
    >>> round(float(sp.expi(1.)), 5)
    1.89512
    """
    x, = _inexact("expi", x)
    return _expi(_real("expi", x))


@custom_jvp
def _expi(x):
    negative = x < 0
    return jnp.where(negative, -exp1(jnp.where(negative, -x, 1)), _expi_pos(x))


_expi.defjvps(lambda t, ans, x: jnp.exp(x) / x * t)


# ---- expn: power series (x <= 1), continued fraction (x > 1), asymptotic (n >= 5000) ----

def _expn_series(x, n):
    eps = dtypes.finfo(x.dtype).eps
    psi = -np.euler_gamma - jnp.log(x)   # digamma(n) = -gamma + sum_{i<n} 1/i
    _, psi = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + 1 / c[0]),
                            (jnp.ones_like(n), psi))
    n1 = jnp.where(n == 1, 2 * n, n)
    z = -x

    def body(c):
        xk, yk, pk, ans, _ = c
        xk, pk = xk + 1, pk + 1
        yk = yk * (z / xk)
        ans = ans + jnp.where(pk != 0, yk / pk, 0)
        return xk, yk, pk, ans, jnp.where(ans != 0, jnp.abs(yk / ans), 1)
    one = jnp.ones_like(x)
    init = (jnp.zeros_like(x), one, 1 - n, jnp.where(n == 1, 0, 1 / (1 - n1)),
            jnp.full_like(x, np.inf))
    _, _, _, ans, _ = lax.while_loop(lambda c: (x > 0) & (c[4] > eps), body, init)
    return z ** (n - 1) * psi / jnp.exp(lax.lgamma(n)) - ans


def _expn_fraction(x, n):
    eps, big = dtypes.finfo(x.dtype).eps, np.array(1.44115188075855872e17, x.dtype)

    def body(c):
        k, pkm2, qkm2, pkm1, qkm1, ans, _, r = c
        k = k + 1
        odd = k % 2 == 1
        yk = jnp.where(odd, 1, x)
        xk = jnp.where(odd, n + (k - 1) / 2, k / 2)
        pk = pkm1 * yk + pkm2 * xk
        qk = qkm1 * yk + qkm2 * xk
        nonzero = qk != 0
        r = jnp.where(nonzero, pk / qk, r)
        t = jnp.where(nonzero, jnp.abs((ans - r) / r), 1)
        ans = jnp.where(nonzero, r, ans)
        scale = jnp.where(jnp.abs(pk) > big, big, 1)   # keep the recurrences in range
        return k, pkm1 / scale, qkm1 / scale, pk / scale, qk / scale, ans, t, r
    one = jnp.ones_like(x)
    init = (jnp.ones_like(n), one, x, one, x + n, 1 / (x + n), jnp.full_like(x, np.inf),
            jnp.zeros_like(x))
    ans = lax.while_loop(lambda c: (x > 0) & (c[6] > eps), body, init)[5]
    return ans * jnp.exp(-x)


def _expn_asymptotic(x, n):
    xk = x + n
    yk = 1 / (xk * xk)
    ans = yk * n * (6 * x * x - 8 * n * x + n * n)
    ans = yk * (ans + n * (n - 2 * x))
    ans = yk * (ans + n)
    return (ans + 1) * jnp.exp(-x) / xk


def _expn_scalar(n, x):
    # JAX's piecewise: the last condition that holds wins; the series where none does
    conds = [((n < 0) | (x < 0), lambda: np.nan),
             ((x == 0) & (n < 2), lambda: np.inf),
             ((x == 0) & (n >= 2), lambda: 1 / jnp.where(n == 1, 2 * n, n)),
             ((n == 0) & (x >= 0), lambda: jnp.exp(-x) / x),
             (n >= 5000, lambda: _expn_asymptotic(x, n)),
             (x > 1, lambda: _expn_fraction(jnp.where(x > 1, x, 2.0), n))]
    none = ~(conds[0][0] | conds[1][0] | conds[2][0] | conds[3][0] | conds[4][0] | conds[5][0])
    out = _expn_series(jnp.where(none, x, 0.5), jnp.where(none, n, 1))
    for cond, value in conds:
        out = jnp.where(cond, value(), out)
    # strong even for Python scalars: JAX's piecewise casts each value to x's dtype
    return lax.convert_element_type(out, out.dtype)


@composite
def expn(n, x):
    """The generalized exponential integral ``E_n(x) = int_1^inf e^(-x t) / t^n dt``;
    differentiable in ``x`` (``-E_{n-1}(x)``).

    >>> import xform.scipy.special as sp
    >>> round(float(sp.expn(2, 1.)), 4)
    0.1485
    """
    n, x = _inexact("expn", n, x)
    return _expn(n, _real("expn", x))


def _expn_impl(n, x):
    return jnp.vectorize(_expn_scalar)(n, x)


_expn = custom_jvp(_expn_impl, nondiff_argnums=(0,))


@_expn.defjvp
def _expn_jvp(n, primals, tangents):
    (x,), (t,) = primals, tangents
    return _expn(n, x), -t * _expn(n - 1, x)


def exp1(x):
    """The exponential integral ``E_1(x) = expn(1, x)``.

    >>> import xform.scipy.special as sp
    >>> round(float(sp.exp1(1.)), 5)
    0.21938
    """
    x, = _inexact("exp1", x)
    return expn(1, _real("exp1", x))


# ---- spence ----

_SPENCE_A = [4.65128586073990045278E-5, 7.31589045238094711071E-3, 1.33847639578309018650E-1,
             8.79691311754530315341E-1, 2.71149851196553469920E0, 4.25697156008121755724E0,
             3.29771340985225106936E0, 1.00000000000000000126E0]
_SPENCE_B = [6.90990488912553276999E-4, 2.54043763932544379113E-2, 2.82974860602568089943E-1,
             1.41172597751831069617E0, 3.63800533345137075418E0, 5.03278880143316990390E0,
             3.54771340985225096217E0, 9.99999999999999998740E-1]


def spence(x):
    """Spence's function (the dilogarithm) ``int_1^x log(t) / (1 - t) dt`` for
    ``x >= 0`` (NaN below); float32 and float64 only.

    >>> import xform.scipy.special as sp
    >>> round(float(sp.spence(1.)), 5)
    0.0
    """
    x = jnp.asarray(x)
    if x.aval.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.aval.dtype} is not supported, see docstring for "
                        "supported types.")
    special = (x <= 0.0) | (x == 1.0)   # NaN / constant there: keep the series (and
    x_in, x = x, jnp.where(special, 0.75, x)  # its NaN/inf gradient) off those points
    big = x > 2.0
    y = jnp.where(big, 1.0 / x, x)
    high, low = y > 1.5, y < 0.5
    w = jnp.where(high, 1.0 / y - 1.0, jnp.where(low, -y, y - 1.0))
    dt = x.aval.dtype
    out = -w * jnp.polyval(np.array(_SPENCE_A, dt), w) / jnp.polyval(np.array(_SPENCE_B, dt), w)
    out = jnp.where(low, np.pi ** 2 / 6.0 - jnp.log(y) * jnp.log(1.0 - y) - out, out)
    out = jnp.where(big | high, -0.5 * jnp.log(y) ** 2 - out, out)
    out = jnp.where(x_in == 0.0, np.pi ** 2 / 6, jnp.where(x_in == 1.0, 0, out))
    return jnp.where(x_in < 0.0, np.nan, out)


# ---- sici: a rational series up to 4, auxiliary functions f, g up to 1e9, then 1/x ----

_SICI = {   # Cephes sici.c
    "SN": [-8.39167827910303881427E-11, 4.62591714427012837309E-8, -9.75759303843632795789E-6,
           9.76945438170435310816E-4, -4.13470316229406538752E-2, 1.00000000000000000302E0],
    "SD": [2.03269266195951942049E-12, 1.27997891179943299903E-9, 4.41827842801218905784E-7,
           9.96412122043875552487E-5, 1.42085239326149893930E-2, 9.99999999999999996984E-1],
    "CN": [2.02524002389102268789E-11, -1.35249504915790756375E-8, 3.59325051419993077021E-6,
           -4.74007206873407909465E-4, 2.89159652607555242092E-2, -1.00000000000000000080E0],
    "CD": [4.07746040061880559506E-12, 3.06780997581887812692E-9, 1.23210355685883423679E-6,
           3.17442024775032769882E-4, 5.10028056236446052392E-2, 4.00000000000000000080E0],
    "FN4": [4.23612862892216586994E0, 5.45937717161812843388E0, 1.62083287701538329132E0,
            1.67006611831323023771E-1, 6.81020132472518137426E-3, 1.08936580650328664411E-4,
            5.48900223421373614008E-7],
    "FD4": [1, 8.16496634205391016773E0, 7.30828822505564552187E0, 1.86792257950184183883E0,
            1.78792052963149907262E-1, 7.01710668322789753610E-3, 1.10034357153915731354E-4,
            5.48900252756255700982E-7],
    "GN4": [8.71001698973114191777E-2, 6.11379109952219284151E-1, 3.97180296392337498885E-1,
            7.48527737628469092119E-2, 5.38868681462177273157E-3, 1.61999794598934024525E-4,
            1.97963874140963632189E-6, 7.82579040744090311069E-9],
    "GD4": [1, 1.64402202413355338886E0, 6.66296701268987968381E-1, 9.88771761277688796203E-2,
            6.22396345441768420760E-3, 1.73221081474177119497E-4, 2.02659182086343991969E-6,
            7.82579218933534490868E-9],
    "FN8": [4.55880873470465315206E-1, 7.13715274100146711374E-1, 1.60300158222319456320E-1,
            1.16064229408124407915E-2, 3.49556442447859055605E-4, 4.86215430826454749482E-6,
            3.20092790091004902806E-8, 9.41779576128512936592E-11, 9.70507110881952024631E-14],
    "FD8": [1.0, 9.17463611873684053703E-1, 1.78685545332074536321E-1, 1.22253594771971293032E-2,
            3.58696481881851580297E-4, 4.92435064317881464393E-6, 3.21956939101046018377E-8,
            9.43720590350276732376E-11, 9.70507110881952025725E-14],
    "GN8": [6.97359953443276214934E-1, 3.30410979305632063225E-1, 3.84878767649974295920E-2,
            1.71718239052347903558E-3, 3.48941165502279436777E-5, 3.47131167084116673800E-7,
            1.70404452782044526189E-9, 3.85945925430276600453E-12, 3.14040098946363334640E-15],
    "GD8": [1.0, 1.68548898811011640017E0, 4.87852258695304967486E-1, 4.67913194259625806320E-2,
            1.90284426674399523638E-3, 3.68475504442561108162E-5, 3.57043223443740838771E-7,
            1.72693748966316146736E-9, 3.87830166023954706752E-12, 3.14040098946363335242E-15],
}


@composite
def sici(x):
    """The sine and cosine integrals ``(Si(x), Ci(x))``: ``int_0^x sin(t)/t dt`` and
    ``euler_gamma + log(x) + int_0^x (cos(t) - 1)/t dt``.

    Raises:
      ValueError: for complex ``x``.

    >>> import xform.scipy.special as sp
    >>> [round(float(v), 5) for v in sp.sici(1.0)]
    [0.94608, 0.3374]
    """
    x, = _inexact("sici", x)
    if dtypes.issubdtype(x.aval.dtype, np.complexfloating):
        raise ValueError(f"Argument `x` to sici must be real-valued. Got dtype "
                         f"{x.aval.dtype}.")
    return _sici(x)


@custom_jvp
def _sici(x):
    c = {k: np.array(v, x.dtype) for k, v in _SICI.items()}
    ax = jnp.abs(x)
    t = ax * ax
    si_series = jnp.where(ax == 0, 0.0, ax * jnp.polyval(c["SN"], t) / jnp.polyval(c["SD"], t))
    ci_series = jnp.where(ax == 0, -np.inf, np.euler_gamma + jnp.log(ax)
                          + t * jnp.polyval(c["CN"], t) / jnp.polyval(c["CD"], t))
    s, co, z = jnp.sin(ax), jnp.cos(ax), 1.0 / t
    near = ax < 8.0
    f = jnp.where(near, jnp.polyval(c["FN4"], z) / (ax * jnp.polyval(c["FD4"], z)),
                  jnp.polyval(c["FN8"], z) / (ax * jnp.polyval(c["FD8"], z)))
    g = jnp.where(near, z * jnp.polyval(c["GN4"], z) / jnp.polyval(c["GD4"], z),
                  z * jnp.polyval(c["GN8"], z) / jnp.polyval(c["GD8"], z))
    si_asymp, ci_asymp = (np.pi / 2) - f * co - g * s, f * s - g * co
    inf = jnp.isposinf(ax)
    si_far = jnp.where(inf, np.pi / 2, (np.pi / 2) - co / ax)
    ci_far = jnp.where(inf, 0.0, s / ax)
    series, asymp = ax <= 4, (ax > 4) & (ax <= 1e9)
    si = jnp.select([series, asymp], [si_series, si_asymp], si_far)
    ci = jnp.select([series, asymp], [ci_series, ci_asymp], ci_far)
    return jnp.sign(x) * si, jnp.where(jnp.isneginf(x), np.nan, ci)


@_sici.defjvp
def _sici_jvp(primals, tangents):   # Si' = sin(x)/x, Ci' = cos(x)/x
    (x,), (t,) = primals, tangents
    return _sici(x), (jnp.sinc(x / np.pi) * t, jnp.cos(x) / x * t)
