"""Special functions lowered to CHLO or to fixed polynomial evaluations: the Hurwitz
zeta function and the exponentially scaled modified Bessel functions of orders 0 and 1.

``zeta`` and ``bessel_i1e`` lower to ``chlo.zeta``/``chlo.bessel_i1e``; ``bessel_i0e`` is,
as in JAX, Cephes' Chebyshev expansions written with lax ops (f16/bf16 evaluated in
f32). As in JAX, ``zeta_p`` has no JVP: only ``scipy.special.zeta`` differentiates (through
Johansson's Euler-Maclaurin series, a custom JVP there).
"""
import numpy as np

from xform.core import dtypes
from xform.core.trace import get_aval
from xform.interpreters import ad, mlir
from xform.lax.shapes import full_like
from xform.lax._prim import float_dtypes, naryop, unop
from xform.lax.elementwise import (_const, abs, add, convert_element_type, div, gt, le, mul,
                                   select, sign, sqrt, sub)

chlo = mlir.chlo


# ---- zeta ----

def zeta(x, q):
    r"""Elementwise Hurwitz zeta function :math:`\zeta(x, q) = \sum_{n\ge0} (n+q)^{-x}`.

    Args:
      x, q: floating arrays of one dtype
        (rank-0 operands and size-1 axes broadcast).

    Returns:
      :math:`\zeta(x, q)`; NaN for ``x < 1``, ``inf`` at ``x == 1``.

    >>> import xform.lax as lax
    >>> print(round(float(lax.zeta(2.0, 1.0)), 4))   # pi^2 / 6
    1.6449
    """
    return zeta_p.bind(x, q)


def _zeta_jvp(primals, tangents):
    # JAX has no rule: grad of lax.zeta w.r.t. either argument is its NotImplementedError.
    raise NotImplementedError("Differentiation rule for 'zeta' not implemented")


zeta_p = naryop("zeta", float_dtypes)
ad.primitive_jvps[zeta_p] = _zeta_jvp
mlir.register_lowering(zeta_p, mlir.elementwise(chlo.zeta))


# ---- modified Bessel functions, exponentially scaled ----

def bessel_i0e(x):
    r"""Elementwise exponentially scaled modified Bessel function of order 0,
    :math:`e^{-|x|} I_0(x)`.

    >>> import xform.lax as lax
    >>> print(round(float(lax.bessel_i0e(1.0)), 4))
    0.4658
    """
    return bessel_i0e_p.bind(x)


# Cephes i0.c: Chebyshev coefficients on [0, 8] (in x/2 - 2) and on (8, inf) (in 32/x - 2);
# f32 uses the last 18 and 7 of them.
_I0E_A = [
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
    1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
    1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
    1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1]
_I0E_B = [
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
    3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
    2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1]


def _chebyshev(x, coefficients):
    b0 = b1 = b2 = _const(x, 0)
    for c in coefficients:
        b2, b1 = b1, b0
        b0 = add(sub(mul(x, b1), b2), _const(x, c))
    return mul(_const(x, 0.5), sub(b0, b2))


def _i0e_impl(x):
    dtype = get_aval(x).dtype
    if dtype != np.float64 and dtype != np.float32:   # Cephes' constants need f32 at least
        return convert_element_type(_i0e_impl(convert_element_type(x, np.float32)), dtype)
    a, b = (_I0E_A, _I0E_B) if dtype == np.float64 else (_I0E_A[-18:], _I0E_B[-7:])
    x = abs(x)
    small = _chebyshev(sub(mul(_const(x, 0.5), x), _const(x, 2)), a)
    large = div(_chebyshev(sub(div(_const(x, 32), x), _const(x, 2)), b), sqrt(x))
    return select(le(x, _const(x, 8)), small, large)


bessel_i0e_p = unop("bessel_i0e", float_dtypes)
ad.defjvp2(bessel_i0e_p,   # d i0e = i1e(x) - sign(x) i0e(x)
           lambda t, ans, x: mul(t, sub(bessel_i1e(x), mul(sign(x), ans))))
mlir.register_lowering(bessel_i0e_p, mlir.lower_fun(_i0e_impl, multiple_results=False))


def bessel_i1e(x):
    r"""Elementwise exponentially scaled modified Bessel function of order 1,
    :math:`e^{-|x|} I_1(x)`.

    >>> import xform.lax as lax
    >>> print(lax.bessel_i1e(0.0))
    0.0
    """
    return bessel_i1e_p.bind(x)


def _bessel_i1e_jvp(t, ans, x):
    # d i1e = i0e(x) - i1e(x) (sign(x) + 1/x), whose limit at 0 is 1/2
    eps = float(dtypes.finfo(get_aval(x).dtype).eps)
    not_tiny = gt(abs(x), _const(x, eps))
    safe_x = select(not_tiny, x, full_like(x, eps))
    d = sub(bessel_i0e(safe_x), mul(ans, add(sign(safe_x), div(_const(x, 1), safe_x))))
    return mul(t, select(not_tiny, d, full_like(x, 0.5)))


bessel_i1e_p = unop("bessel_i1e", float_dtypes)
ad.defjvp2(bessel_i1e_p, _bessel_i1e_jvp)
mlir.register_lowering(bessel_i1e_p, mlir.elementwise(chlo.bessel_i1e))
