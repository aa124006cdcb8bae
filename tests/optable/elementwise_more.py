"""Op-table rows of the transcendental/special functions (xform/lax/special.py) and
of rounding, remainder, clamp and classification (xform/lax/rounding.py).

Input domains keep the gradient tests off singularities and kinks: acosh on
[1.5, 3], asin/acos/atanh/erf_inv on [-0.9, 0.9], tan on [-1.2, 1.2], lgamma and
digamma positive, rem with x/y far from integers, clamp with x away from the bounds.
"""
import numpy as np

from optable import BOOL, C64, F32, I32, binary, domains, rec

FLOAT, NUM = (F32,), (F32, I32)
SHAPES1 = [((3, 4),), ((),)]   # cheap elementwise ops: two shapes are enough
SHAPES2 = [((3, 4), (3, 4)), ((), (2, 3))]


def scaled(domain, scale, shift=0.0):
    """Each operand from ``domain``, then ``x * scale + shift``."""
    def make(g, shapes, dtype):
        return [np.asarray(getattr(g, domain)(s, dtype) * scale + shift).astype(dtype)
                for s in shapes]
    return make


def unary(name, dtypes, make=domains("real"), grad_order=2, **kw):
    return rec(name, 1, dtypes, SHAPES1, make, grad_order, **kw)


def _polygamma_args(g, shapes, dtype):
    m = np.asarray(g.which(shapes[0], 3)).astype(dtype)     # orders 0, 1, 2
    return [m, g.positive(shapes[1], dtype)]


def _rem_args(g, shapes, dtype):
    """x / y stays 0.15 or more away from an integer, where rem jumps."""
    y = g.nonzero(shapes[1], dtype)
    if np.issubdtype(dtype, np.integer):
        return [g.real(shapes[0], dtype), y]
    q = np.asarray(g.real(shapes[0], dtype), np.float64)
    frac = 0.5 + 0.35 * (q - np.floor(q) - 0.5)
    return [np.asarray((np.floor(q) + frac) * y).astype(dtype), y]


def _clamp_args(g, shapes, dtype):
    """min near -1, max near 1, x in {-1.5, -0.5, 0.5, 1.5, 2.5}: never within 0.2 of
    a bound (the derivative jumps there)."""
    lo = np.asarray(g.real(shapes[0], F32) * 0.1 - 1)
    hi = np.asarray(g.real(shapes[2], F32) * 0.1 + 1)
    x = np.asarray(g.ties(shapes[1], F32) + 0.5)
    return [np.asarray(v).astype(dtype) for v in (lo, x, hi)]


def _with_specials(g, shapes, dtype):
    x = np.asarray(g.ties_nan(shapes[0], dtype))
    return [np.where(x == 2, np.inf, np.where(x == -2, -np.inf, x)).astype(dtype)]


UNIT = scaled("real", 0.3)   # (-0.9, 0.9)

RECORDS = [
    # -- trigonometric and hyperbolic (complex values where JAX allows them) --
    unary("tan", (F32, C64), scaled("real", 0.4)),
    unary("asin", (F32, C64), UNIT),
    unary("acos", (F32, C64), UNIT),
    unary("atan", (F32, C64)),
    binary("atan2", FLOAT, domains("nonzero", "real"), shapes=SHAPES2),  # off the cut
    unary("sinh", (F32, C64)),
    unary("cosh", (F32, C64)),
    unary("asinh", (F32, C64)),
    unary("acosh", (F32,), scaled("positive", 0.6, 1.2)),                 # [1.5, 3]
    unary("atanh", (F32, C64), UNIT),
    # -- exponentials, logs, roots, powers --
    unary("exp2", (F32, C64)),
    unary("expm1", (F32, C64)),
    unary("log1p", (F32, C64), UNIT),
    unary("cbrt", FLOAT, domains("nonzero")),
    unary("square", (F32, I32, C64)),
    unary("reciprocal", (F32, C64), domains("nonzero")),
    # -- error and gamma functions --
    unary("erf", FLOAT),
    unary("erfc", FLOAT),
    unary("erf_inv", FLOAT, UNIT),
    unary("lgamma", FLOAT, domains("positive")),
    unary("digamma", FLOAT, domains("positive")),
    rec("polygamma", 2, FLOAT, [((3, 4), (3, 4)), ((), (3,))], _polygamma_args,
        diff_argnums=(1,)),
    # -- rounding (ties at .5 on purpose) and classification --
    unary("floor", FLOAT, grad_order=0),
    unary("ceil", FLOAT, grad_order=0),
    unary("round_away_from_zero", FLOAT, scaled("ties", 0.5), grad_order=0, op="round"),
    unary("round_to_nearest_even", FLOAT, scaled("ties", 0.5), grad_order=0,
          call=lambda L, x: L.round(x, L.RoundingMethod.TO_NEAREST_EVEN)),
    unary("is_finite", FLOAT, _with_specials, grad_order=0),
    # NB: nextafter has no JVP (JAX and xform raise), so values and vmap only.
    binary("nextafter", FLOAT, domains("ties", "ties"), grad_order=None, shapes=SHAPES2),
    # -- remainder and clamp --
    binary("rem", NUM, _rem_args, shapes=[((3, 4), (3, 4)), ((3, 4), ())]),
    # NB: jax cannot differentiate a rank-0 bound of a rank-n x (select shape error);
    # xform can: tests/test_lax_special.py checks that against finite differences.
    rec("clamp", 3, NUM, [((), (3, 4), ()), ((3, 4),) * 3], _clamp_args, diff_argnums=(1,)),
    rec("clamp_bounds", 3, FLOAT, [((3, 4),) * 3, ((), (), ())], _clamp_args, op="clamp"),
    rec("clamp_bool", 3, (BOOL,), [((), (3,), ())], domains("real", "real", "real"),
        grad_order=None, op="clamp"),
]
