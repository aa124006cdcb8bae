"""The regularized incomplete gamma and beta functions: ``igamma``, ``igammac``,
``igamma_grad_a``, ``betainc`` (primitives, as JAX's) and ``random_gamma_grad`` (a
composition).

Each primitive lowers, as in JAX, to a composition of lax ops (``mlir.lower_fun``):
Cephes' power series and continued fraction for igamma, each a ``while_loop`` run until
every element converges (the ``a``-derivatives iterate the same recurrences,
differentiated term by term), and the Lentz-Thompson-Barnett evaluation of the
incomplete beta's continued fraction. f16/bf16 evaluate in f32. That is why this family
sits above the control flow (L5), like ``prng``. Gradients are JAX's: igamma's with
respect to ``a`` is ``igamma_grad_a``; betainc differentiates in ``x`` only.
"""
import enum
from functools import reduce as _reduce

import numpy as np

from xform.core import dtypes
from xform.core.trace import get_aval
from xform.interpreters import ad, mlir
from xform.lax import reductions
from xform.lax._prim import check_dtype, float_dtypes, naryop
from xform.lax.bitwise import bitwise_and, bitwise_not, bitwise_or
from xform.lax.control_flow.loops import while_loop
from xform.lax.rounding import floor
from xform.lax.elementwise import (_bcast, _const, _out_shape, abs, convert_element_type,
                                   eq, exp, ge, gt, le, log, lt, ne, select)
from xform.lax.shapes import broadcast_in_dim, full_like
from xform.lax.special import digamma, lgamma, log1p
from xform.transforms.jit import jit


def igamma(a, x):
    r"""Elementwise regularized lower incomplete gamma function :math:`P(a, x)`.

    >>> import xform.lax as lax
    >>> print(round(float(lax.igamma(2.0, 1.0)), 5))
    0.26424
    """
    return igamma_p.bind(a, x)


def igammac(a, x):
    r"""Elementwise regularized upper incomplete gamma function :math:`Q(a, x) = 1 - P`."""
    return igammac_p.bind(a, x)


def igamma_grad_a(a, x):
    r"""Elementwise :math:`\partial P(a, x) / \partial a`."""
    return igamma_grad_a_p.bind(a, x)


def random_gamma_grad(a, x):
    r"""The derivative of a ``Gamma(a, 1)`` sample ``x`` with respect to ``a`` at fixed
    CDF value (implicit reparameterization): :math:`-(\partial P / \partial a) / p(x)`."""
    for v in (a, x):   # (a composite: no primitive's dtype rule checks it)
        check_dtype("random_gamma_grad", get_aval(v).dtype, float_dtypes)
    return _random_gamma_grad(a, x)


def betainc(a, b, x):
    r"""Elementwise regularized incomplete beta function :math:`I_x(a, b)`.

    Differentiable in ``x`` only (as in JAX).

    >>> import xform.lax as lax
    >>> print(round(float(lax.betainc(2.0, 3.0, 0.5)), 4))
    0.6875
    """
    return regularized_incomplete_beta_p.bind(a, b, x)


def _up_and_broadcast(impl):
    """Broadcast the operands (rank 0, size-1 dimensions) to the result's shape and
    evaluate f16/bf16 in f32 (Cephes' constants)."""
    def run(*args):
        shape = _out_shape(*args)
        args = [_bcast(v, shape) for v in args]
        dtype = get_aval(args[0]).dtype
        if dtype.itemsize >= 4:
            return impl(*args, dtype=dtype)
        out = impl(*(convert_element_type(v, np.float32) for v in args), dtype=np.float32)
        return convert_element_type(out, dtype)
    return run


def _any(pred):
    return reductions.reduce_or(pred, tuple(range(get_aval(pred).ndim)))


def _or(*preds):
    return _reduce(bitwise_or, preds)


def _isnan(x):
    return ne(x, x)


# ---- igamma: series and continued fraction (ported from XLA's math.cc, as JAX) ----

class _Mode(enum.Enum):
    VALUE = 1
    DERIVATIVE = 2          # d P / d a
    SAMPLE_DERIVATIVE = 3   # d x / d a at fixed P


def _series(ax, x, a, enabled, dtype, mode):
    eps = float(dtypes.finfo(dtype).eps)

    def body(vals):
        enabled, r, c, ans, x, dc_da, dans_da = vals
        r = r + 1
        dc_da = dc_da * (x / r) - (c * x) / (r * r)
        dans_da = dans_da + dc_da
        c = c * (x / r)
        ans = ans + c
        err = c / ans if mode == _Mode.VALUE else abs(dc_da / dans_da)
        new = (r, c, ans, x, dc_da, dans_da)
        return (bitwise_and(enabled, gt(err, _const(err, eps))),
                *(select(enabled, n, o) for n, o in zip(new, vals[1:])))

    one, zero = full_like(a, 1), full_like(a, 0)
    vals = while_loop(lambda v: _any(v[0]), body, (enabled, a, one, one, x, zero, zero))
    ans, dans_da = vals[3], vals[6]
    if mode == _Mode.VALUE:
        return ans * ax / a
    dlogax_da = log(x) - digamma(a + 1)
    if mode == _Mode.DERIVATIVE:
        return ax * (ans * dlogax_da + dans_da) / a
    return -(dans_da + ans * dlogax_da) * x / a


def _continued_fraction(ax, x, a, enabled, dtype, mode):
    eps = float(dtypes.finfo(dtype).eps)

    def cond(vals):
        return bitwise_and(lt(vals[5], _const(vals[5], 2000)), _any(vals[0]))

    def body(vals):
        (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c, y, z = c + 1, y + 1, z + 2
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        nonzero = ne(qk, _const(qk, 0))
        r = pk / qk
        t = select(nonzero, abs((ans - r) / r), full_like(r, 1))
        ans = select(nonzero, r, ans)
        dpk_da = dpkm1_da * z - pkm1 - dpkm2_da * yc + pkm2 * c
        dqk_da = dqkm1_da * z - qkm1 - dqkm2_da * yc + qkm2 * c
        dans_da_new = select(nonzero, (dpk_da - ans * dqk_da) / qk, dans_da)
        grad_err = select(nonzero, abs(dans_da_new - dans_da), full_like(dans_da, 1))
        rescale = gt(abs(pk), _const(pk, 1 / eps))   # keep the recurrences in range
        scaled = [select(rescale, v * eps, v) for v in
                  (pk, qk, pkm1, qkm1, dpk_da, dqk_da, dpkm1_da, dqkm1_da)]
        pkm1, qkm1, pkm2, qkm2, dpkm1_da, dqkm1_da, dpkm2_da, dqkm2_da = scaled
        err = t if mode == _Mode.VALUE else grad_err
        new = (ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
               dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da_new)
        return (bitwise_and(enabled, gt(err, _const(err, eps))),
                *(n if i == 4 else select(enabled, n, o)
                  for i, (n, o) in enumerate(zip(new, vals[1:]))))

    y = 1 - a
    z = x + y + 1
    pkm1 = x + 1
    qkm1 = z * x
    ans = pkm1 / qkm1
    zero = full_like(x, 0)
    dqkm1_da = -x
    dans_da = (zero - ans * dqkm1_da) / qkm1
    init = (enabled, ans, full_like(x, 1), y, z, _const(x, 0), pkm1, qkm1, full_like(x, 1), x,
            zero, zero, zero, dqkm1_da, dans_da)
    vals = while_loop(cond, body, init)
    ans, dans_da = vals[1], vals[14]
    if mode == _Mode.VALUE:
        return ans * ax
    dlogax_da = log(x) - digamma(a)
    if mode == _Mode.DERIVATIVE:
        return ax * (ans * dlogax_da + dans_da)
    return -(dans_da + ans * dlogax_da) * x


def _log_ax(a, x, dtype):
    """(x^a e^-x / Gamma(a), whether it underflows)."""
    log_ax = a * log(x) - x - lgamma(a)
    return exp(log_ax), lt(log_ax, _const(log_ax, -np.log(dtypes.finfo(dtype).max)))


def _igamma_impl(a, x, *, dtype):
    x_is_zero, x_is_inf = eq(x, _const(x, 0)), eq(x, _const(x, np.inf))
    domain_error = _or(lt(x, _const(x, 0)), lt(a, _const(a, 0)),
                       bitwise_and(eq(a, _const(a, 0)), x_is_zero), _isnan(a), _isnan(x))
    use_cf = bitwise_and(ge(x, _const(x, 1)), gt(x, a))
    ax, underflow = _log_ax(a, x, dtype)
    enabled = bitwise_not(_or(x_is_zero, domain_error, underflow, x_is_inf))
    out = select(use_cf,
                 1 - _continued_fraction(ax, x, a, bitwise_and(enabled, use_cf), dtype,
                                         _Mode.VALUE),
                 _series(ax, x, a, bitwise_and(enabled, bitwise_not(use_cf)), dtype,
                         _Mode.VALUE))
    out = select(x_is_zero, full_like(a, 0), out)
    out = select(x_is_inf, full_like(a, 1), out)
    return select(domain_error, full_like(a, np.nan), out)


def _igammac_impl(a, x, *, dtype):
    a_is_zero, x_is_inf = eq(a, _const(a, 0)), eq(x, _const(x, np.inf))
    domain_error = _or(lt(x, _const(x, 0)), lt(a, _const(a, 0)),
                       bitwise_and(a_is_zero, eq(x, _const(x, 0))), _isnan(a), _isnan(x))
    use_series = bitwise_or(lt(x, _const(x, 1)), lt(x, a))
    ax, underflow = _log_ax(a, x, dtype)
    enabled = bitwise_not(_or(domain_error, underflow, x_is_inf, a_is_zero))
    series = _series(ax, x, a, bitwise_and(enabled, use_series), dtype, _Mode.VALUE)
    cfrac = _continued_fraction(ax, x, a, bitwise_and(enabled, bitwise_not(use_series)),
                                dtype, _Mode.VALUE)
    out = select(use_series, 1 - series, cfrac)
    out = select(bitwise_or(x_is_inf, a_is_zero), full_like(out, 0), out)
    return select(domain_error, full_like(a, np.nan), out)


def _grad_a_impl(mode):
    def impl(a, x, *, dtype):
        is_nan = bitwise_or(_isnan(a), _isnan(x))
        x_is_zero = eq(x, _const(x, 0))
        domain_error = bitwise_or(lt(x, _const(x, 0)), le(a, _const(a, 0)))
        use_cf = bitwise_and(gt(x, _const(x, 1)), gt(x, a))
        ax, underflow = _log_ax(a, x, dtype)
        enabled = bitwise_not(_or(x_is_zero, domain_error, underflow, is_nan))
        out = select(use_cf,
                     -_continued_fraction(ax, x, a, bitwise_and(enabled, use_cf), dtype, mode),
                     _series(ax, x, a, bitwise_and(enabled, bitwise_not(use_cf)), dtype, mode))
        out = select(x_is_zero, full_like(out, 0), out)
        return select(bitwise_or(domain_error, is_nan), full_like(a, np.nan), out)
    return impl


# jitted (inline when staged, as JAX's inline=True): eagerly one executable, not op by op
_random_gamma_grad = jit(_up_and_broadcast(_grad_a_impl(_Mode.SAMPLE_DERIVATIVE)), inline=True)


def _igamma_grad_x(t, a, x):   # d P / d x = x^(a-1) e^-x / Gamma(a)
    return t * exp(-x + (a - 1) * log(x) - lgamma(a))


def _not_differentiable(name):
    def rule(t, *args):
        raise NotImplementedError(f"Differentiation rule for '{name}' not implemented")
    return rule


igamma_p = naryop("igamma", float_dtypes)
mlir.register_lowering(igamma_p, mlir.lower_fun(_up_and_broadcast(_igamma_impl),
                                                multiple_results=False))
ad.defjvp(igamma_p, lambda t, a, x: t * igamma_grad_a(a, x), _igamma_grad_x)

igammac_p = naryop("igammac", float_dtypes)
mlir.register_lowering(igammac_p, mlir.lower_fun(_up_and_broadcast(_igammac_impl),
                                                 multiple_results=False))
ad.defjvp(igammac_p, lambda t, a, x: -(t * igamma_grad_a(a, x)),
          lambda t, a, x: -_igamma_grad_x(t, a, x))

igamma_grad_a_p = naryop("igamma_grad_a", float_dtypes)
mlir.register_lowering(igamma_grad_a_p, mlir.lower_fun(
    _up_and_broadcast(_grad_a_impl(_Mode.DERIVATIVE)), multiple_results=False))
ad.defjvp(igamma_grad_a_p, _not_differentiable("igamma_grad_a"),
          _not_differentiable("igamma_grad_a"))


# ---- betainc: the continued fraction DLMF 8.17.22, by Lentz-Thompson-Barnett ----

def _lentz(num_iterations, small, numerator, denominator, inputs):
    def cond(vals):
        return bitwise_and(lt(vals[0], np.int32(num_iterations)), vals[1])   # i is int32 under x64 too

    def body(vals):
        i, _, c, d, h = vals
        an, bn = numerator(i, *inputs), denominator(i, *inputs)
        tiny = full_like(c, small)
        c = bn + an / c
        c = select(lt(abs(c), tiny), tiny, c)
        d = bn + an * d
        d = 1 / select(lt(abs(d), tiny), tiny, d)
        delta = c * d
        unconverged = _any(ge(abs(delta - 1), _const(delta, small)))
        return i + 1, unconverged, c, d, h * delta

    b0 = denominator(0, *inputs)
    h = select(lt(abs(b0), _const(b0, small)), full_like(b0, small), b0)
    one = np.int32(1)
    return while_loop(cond, body, (one, np.bool_(True), h, full_like(h, 0), h))[4]


def _betainc_impl(a, b, x, *, dtype):
    shape = get_aval(a).shape

    def numerator(i, a, b, x):   # DLMF 8.17.23; the first is 1
        i = broadcast_in_dim(convert_element_type(i, dtype), shape, ())
        m = floor((i - 1) / 2)
        zero_num = -(a + b) * x / (a + 1)
        even = select(eq(m, _const(m, 0)), zero_num,
                      -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)))
        odd = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        is_even = eq(i - 2 * floor(i / 2), _const(i, 0))
        return select(eq(i, _const(i, 1)), full_like(x, 1), select(is_even, even, odd))

    def denominator(i, a, b, x):
        i = broadcast_in_dim(convert_element_type(i, dtype), shape, ())
        return select(eq(i, _const(i, 0)), full_like(x, 0), full_like(x, 1))

    a_is_zero = bitwise_or(eq(a, _const(a, 0)), eq(b, _const(b, np.inf)))
    b_is_zero = bitwise_or(eq(b, _const(b, 0)), eq(a, _const(a, np.inf)))
    x_is_zero, x_is_one = eq(x, _const(x, 0)), eq(x, _const(x, 1))
    result_is_zero = bitwise_or(bitwise_and(b_is_zero, bitwise_not(x_is_one)),
                                bitwise_and(a_is_zero, x_is_zero))
    result_is_one = bitwise_or(bitwise_and(a_is_zero, bitwise_not(x_is_zero)),
                               bitwise_and(b_is_zero, x_is_one))
    result_is_nan = _or(lt(a, _const(a, 0)), lt(b, _const(b, 0)), lt(x, _const(x, 0)),
                        gt(x, _const(x, 1)), bitwise_and(a_is_zero, b_is_zero),
                        _isnan(a), _isnan(b), _isnan(x))
    # the fraction converges fast for x < (a+1)/(a+b+2); else use I_x(a,b) = 1 - I_1-x(b,a)
    fast = lt(x, (a + 1) / (a + b + 2))
    a, b, x = select(fast, a, b), select(fast, b, a), select(fast, x, 1 - x)
    eps = float(dtypes.finfo(dtype).eps / 2)
    cfrac = _lentz(200 if dtype == np.float32 else 600, eps, numerator, denominator,
                   [a, b, x])
    # for tiny a, a Gamma(a) -> 1 avoids dividing by a
    lbeta_small_a = lgamma(b) - lgamma(a + b)
    lbeta = lgamma(a) + lbeta_small_a
    factor = select(lt(a, _const(a, float(dtypes.finfo(dtype).tiny) * 2)),
                    exp(log1p(-x) * b - lbeta_small_a),
                    exp(log(x) * a + log1p(-x) * b - lbeta) / a)
    out = cfrac * factor
    out = select(fast, out, 1 - out)
    out = select(result_is_zero, full_like(a, 0), out)
    out = select(result_is_one, full_like(a, 1), out)
    return select(result_is_nan, full_like(a, np.nan), out)


def _betainc_grad_x(t, a, b, x):   # x^(a-1) (1-x)^(b-1) / B(a, b)
    lbeta = lgamma(a) + lgamma(b) - lgamma(a + b)
    return t * exp((b - 1) * log1p(-x) + (a - 1) * log(x) - lbeta)


def _betainc_grad_ab(t, a, b, x):
    raise ValueError("Betainc gradient with respect to a and b not supported.")


regularized_incomplete_beta_p = naryop("regularized_incomplete_beta", float_dtypes, nargs=3)
mlir.register_lowering(regularized_incomplete_beta_p, mlir.lower_fun(
    _up_and_broadcast(_betainc_impl), multiple_results=False))
ad.defjvp(regularized_incomplete_beta_p, _betainc_grad_ab, _betainc_grad_ab, _betainc_grad_x)
