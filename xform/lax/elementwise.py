"""Elementwise primitives: arithmetic, transcendental functions, comparisons,
select_n, convert_element_type, add_any and stop_gradient.

Binary ops require equal dtypes (``xform.numpy`` promotes) and equal ranks, except
that a rank-0 operand broadcasts (``mul a 2.0:f32[]``); size-1 axes broadcast, as in JAX.
"""
import builtins

import numpy as np

from xform.core import dtypes, shape_poly
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, lazy_recipes, mlir
from xform.core.transfer import scalar_array
from xform.lax._prim import (any_dtype, broadcasting_shape, check_dtype,  # noqa: F401
                             inexact, naryop, numeric, standard_primitive, unop)
from xform.lax import accuracy as _accuracy, shapes as _shapes
from xform.core import tree_util

hlo, ir = mlir.hlo, mlir.ir


def _const(x, value):
    """A rank-0 weak constant of ``x``'s dtype (folds into literals under tracing); a
    symbolic dimension is computed from the dimension variables."""
    if shape_poly.is_symbolic_dim(value):
        return convert_element_type(_shapes.dimension_as_value(value), get_aval(x).dtype)
    return scalar_array(value, get_aval(x).dtype, True)


def _bcast(t, shape):
    """Broadcast an operand's tangent to the result ``shape`` (lax broadcasts rank-0
    operands and size-1 dimensions)."""
    t_shape = get_aval(t).shape
    if t_shape == tuple(shape):
        return t
    return _shapes.broadcast_in_dim(t, shape, tuple(range(len(t_shape))))


def _unbroadcast(aval, ct):
    """Cotangent for an operand of ``aval`` that was broadcast (from rank 0, or along
    its size-1 dimensions): summed over the broadcast dimensions."""
    from xform.lax.reductions import reduce_sum  # (a cycle: reductions builds on elementwise)
    ct_shape = get_aval(ct).shape
    if ct_shape == aval.shape:
        return ct
    dims = tuple(i for i, d in enumerate(ct_shape) if not aval.shape or d != aval.shape[i])
    return _shapes.reshape(reduce_sum(ct, dims), aval.shape)


def _out_shape(*xs):
    """The broadcast result shape of elementwise operands ``xs``."""
    return broadcasting_shape("", *(get_aval(x) for x in xs))


def _aval(x):
    return x.aval if ad.is_undefined_primal(x) else get_aval(x)


# ---- arithmetic ----

def add(x, y):
    r"""Elementwise addition: :math:`x + y`."""
    return add_p.bind(x, y)


add_p = naryop("add", numeric)
ad.defjvp(add_p, lambda t, x, y: _bcast(t, _out_shape(x, y)),
          lambda t, x, y: _bcast(t, _out_shape(x, y)))
ad.primitive_transposes[add_p] = lambda ct, x, y: [
    _unbroadcast(x.aval, ct) if ad.is_undefined_primal(x) else None,
    _unbroadcast(y.aval, ct) if ad.is_undefined_primal(y) else None]
mlir.register_lowering(add_p, mlir.elementwise(hlo.add))


def sub(x, y):
    r"""Elementwise subtraction: :math:`x - y`."""
    return sub_p.bind(x, y)


def _sub_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = sub(x, y)
    shape = get_aval(out).shape
    if type(tx) is ad.Zero:
        t = ad.Zero(get_aval(out).to_tangent_aval()) if type(ty) is ad.Zero else neg(ty)
    else:
        t = tx if type(ty) is ad.Zero else sub(tx, ty)
    return out, t if type(t) is ad.Zero else _bcast(t, shape)


sub_p = naryop("sub", numeric)
ad.primitive_jvps[sub_p] = _sub_jvp
ad.primitive_transposes[sub_p] = lambda ct, x, y: [
    _unbroadcast(x.aval, ct) if ad.is_undefined_primal(x) else None,
    _unbroadcast(y.aval, neg(ct)) if ad.is_undefined_primal(y) else None]
mlir.register_lowering(sub_p, mlir.elementwise(hlo.subtract))


def mul(x, y):
    r"""Elementwise multiplication: :math:`x \times y`."""
    return mul_p.bind(x, y)


mul_p = naryop("mul", numeric)
ad.defjvp(mul_p, lambda t, x, y: mul(t, y), lambda t, x, y: mul(x, t))
ad.defnonlinear_operands(mul_p, "both")
ad.primitive_transposes[mul_p] = lambda ct, x, y: [
    _unbroadcast(x.aval, mul(ct, y)) if ad.is_undefined_primal(x) else None,
    _unbroadcast(y.aval, mul(x, ct)) if ad.is_undefined_primal(y) else None]
mlir.register_lowering(mul_p, mlir.elementwise(hlo.multiply))


def div(x, y):
    r"""Elementwise division: :math:`x / y` (integer division rounds toward zero)."""
    return div_p.bind(x, y)


div_p = naryop("div", numeric)
ad.defjvp(div_p, lambda t, x, y: _bcast(div(t, y), _out_shape(x, y)),
          lambda t, x, y: mul(mul(neg(t), x), integer_pow(y, -2)))  # JAX's: -t x / y**2
ad.defnonlinear_operands(div_p, slice(1, 2))   # linear in x only
ad.primitive_transposes[div_p] = lambda ct, x, y: [
    _unbroadcast(x.aval, div(ct, y)) if ad.is_undefined_primal(x) else None, None]
mlir.register_lowering(div_p, mlir.elementwise(hlo.divide))


def neg(x):
    r"""Elementwise negation: :math:`-x`."""
    return neg_p.bind(x)


neg_p = unop("neg", numeric)
ad.deflinear(neg_p, lambda ct, x: [neg(ct)])
mlir.register_lowering(neg_p, mlir.elementwise(hlo.negate))


def _balanced_eq(x, z, y):
    """1 where x == z and y != z, 0.5 where both equal z, else 0 (ties split evenly)."""
    one, half, zero = _const(z, 1), _const(z, 0.5), _const(z, 0)
    return select_n(eq(x, z), _shapes.full_like(z, zero),
                    select_n(eq(y, z), _shapes.full_like(z, one), _shapes.full_like(z, half)))


def _minmax_hlo(op, direction):
    """``op`` on two same-shaped values, but complex ones compare lexicographically as
    (real, imag) pairs, as JAX's ``mlir.max_hlo`` (StableHLO orders them otherwise);
    reduce_max/min's bodies use it too."""
    def f(x, y):
        if not isinstance(ir.RankedTensorType(x.type).element_type, ir.ComplexType):
            return op(x, y)

        def cmp(a, b, d):
            return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(d),
                               compare_type=hlo.ComparisonTypeAttr.get("FLOAT"))
        rx, ry = hlo.real(x), hlo.real(y)
        which = hlo.select(cmp(rx, ry, "EQ"), cmp(hlo.imag(x), hlo.imag(y), direction),
                           cmp(rx, ry, direction))
        return hlo.select(which, x, y)
    return f


max_hlo, min_hlo = _minmax_hlo(hlo.maximum, "GT"), _minmax_hlo(hlo.minimum, "LT")


def max(x, y):
    r"""Elementwise maximum (NaN-propagating)."""
    return max_p.bind(x, y)


max_p = naryop("max", dtypes.all_dtypes)   # bool too, as JAX (logical or)
ad.defjvp2(max_p, lambda t, ans, x, y: mul(t, _balanced_eq(x, ans, y)),
           lambda t, ans, x, y: mul(t, _balanced_eq(y, ans, x)))
mlir.register_lowering(max_p, mlir.elementwise(max_hlo))


def min(x, y):
    r"""Elementwise minimum (NaN-propagating)."""
    return min_p.bind(x, y)


min_p = naryop("min", dtypes.all_dtypes)   # bool too, as JAX (logical and)
ad.defjvp2(min_p, lambda t, ans, x, y: mul(t, _balanced_eq(x, ans, y)),
           lambda t, ans, x, y: mul(t, _balanced_eq(y, ans, x)))
mlir.register_lowering(min_p, mlir.elementwise(min_hlo))


def pow(x, y):
    r"""Elementwise power :math:`x^y`: ``x`` floating or complex, ``y`` of its dtype or
    any integer dtype (converted to ``x``'s, as JAX's)."""
    return pow_p.bind(x, y)


def _pow_dtypes(x, y):
    check_dtype("pow", x.dtype, inexact)
    if not (x.dtype == y.dtype or dtypes.is_integer(y.dtype)):
        raise TypeError(f"the first argument to pow must have an inexact dtype (float or "
                        f"complex), and the second argument must have an inexact or integer "
                        f"dtype, and two inexact dtypes must match, but got {x.dtype} and "
                        f"{y.dtype} respectively.")


def _pow_jvp_lhs(t, ans, x, y):
    # d x^y / dx = y x^(y-1); for an integer y defined as 0 where y == 0 (0^0 has zero
    # derivative), for a float y not (0 * 0^-1 = nan at x = y = 0), both as JAX's.
    int_y = dtypes.issubdtype(get_aval(y).dtype, np.integer)
    y = convert_element_type(y, get_aval(x).dtype)
    y_b = _bcast(y, _out_shape(x, y))
    jac = mul(y_b, pow(x, sub(y_b, _const(y, 1))))
    if int_y:
        jac = select_n(eq(y_b, _const(y, 0)), jac, _shapes.full_like(ans, _const(ans, 0)))
    return mul(_bcast(t, _out_shape(x, y)), jac)


def _pow_jvp_rhs(t, ans, x, y):
    # d x^y / dy = log(x) x^y, with log(0) replaced by 0 where x == 0.
    safe_x = select_n(eq(x, _const(x, 0)), x, _shapes.full_like(x, _const(x, 1)))
    return mul(_bcast(t, _out_shape(x, y)), mul(log(safe_x), ans))


def _pow_lowering(ctx, x, y):
    out = ctx.avals_out[0]
    x, y = (mlir.broadcast_to(v, a, out) for v, a in zip((x, y), ctx.avals_in))
    if ctx.avals_in[1].dtype != out.dtype:   # an integer exponent
        y = hlo.convert(mlir.aval_to_ir_type(out), y)
    return hlo.power(x, y)


pow_p = naryop("pow", inexact, check_dtypes=_pow_dtypes)
ad.defjvp2(pow_p, _pow_jvp_lhs, _pow_jvp_rhs)
mlir.register_lowering(pow_p, _pow_lowering)


def integer_pow(x, y: int):
    r"""Elementwise :math:`x^y` for a static Python integer ``y``."""
    return integer_pow_p.bind(x, y=int(y))


def _integer_pow_abstract_eval(x, *, y):
    check_dtype("integer_pow", x.dtype, numeric)
    if y < 0 and dtypes.is_integer(x.dtype):
        raise TypeError(f"integer_pow with negative exponent {y} requires a floating "
                        f"operand, got {x.dtype.name}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _integer_pow_jvp(t, x, *, y):
    if y == 0:
        return _shapes.full_like(t, _const(t, 0))
    return mul(t, mul(_const(x, y), integer_pow(x, y - 1)))


def _integer_pow_lowering(ctx, x, *, y):
    # Square-and-multiply; negative powers take the reciprocal at the end.
    aval = ctx.avals_out[0]
    acc, base, n = None, x, builtins.abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else hlo.multiply(acc, base)
        n >>= 1
        if n:
            base = hlo.multiply(base, base)
    if acc is None:
        acc = mlir.full_like_aval(1, aval)
    if y < 0:
        acc = hlo.divide(mlir.full_like_aval(1, aval), acc)
    return acc


integer_pow_p = standard_primitive("integer_pow", _integer_pow_abstract_eval)
ad.defjvp(integer_pow_p, _integer_pow_jvp)
batching.defvectorized(integer_pow_p)
mlir.register_lowering(integer_pow_p, _integer_pow_lowering)


# ---- transcendental ----

def exp(x, *, accuracy=None):
    r"""Elementwise exponential :math:`e^x`."""
    return _accuracy.bind(exp_p, x, accuracy)


exp_p = unop("exp", inexact)
ad.defjvp2(exp_p, lambda t, ans, x, accuracy=None: mul(t, ans))
mlir.register_lowering(exp_p, _accuracy.lowering(hlo.exponential))


def log(x, *, accuracy=None):
    r"""Elementwise natural logarithm."""
    return _accuracy.bind(log_p, x, accuracy)


log_p = unop("log", inexact)
ad.defjvp(log_p, lambda t, x, accuracy=None: div(t, x))
mlir.register_lowering(log_p, _accuracy.lowering(hlo.log))


def sin(x, *, accuracy=None):
    r"""Elementwise sine."""
    return _accuracy.bind(sin_p, x, accuracy)


sin_p = unop("sin", inexact)
ad.defjvp(sin_p, lambda t, x, accuracy=None: mul(t, cos(x, accuracy=accuracy)))
mlir.register_lowering(sin_p, _accuracy.lowering(hlo.sine))


def cos(x, *, accuracy=None):
    r"""Elementwise cosine."""
    return _accuracy.bind(cos_p, x, accuracy)


cos_p = unop("cos", inexact)
ad.defjvp(cos_p, lambda t, x, accuracy=None: neg(mul(t, sin(x, accuracy=accuracy))))
mlir.register_lowering(cos_p, _accuracy.lowering(hlo.cosine))


def tanh(x, *, accuracy=None):
    r"""Elementwise hyperbolic tangent."""
    return _accuracy.bind(tanh_p, x, accuracy)


tanh_p = unop("tanh", inexact)


def _tanh_jvp(t, ans, x, accuracy=None):
    if accuracy is _accuracy.AccuracyMode.HIGHEST:  # 4 s(2x) s(-2x), as JAX's
        return mul(t, mul(_const(x, 4), mul(logistic(mul(_const(x, 2), x), accuracy=accuracy),
                                            logistic(mul(_const(x, -2), x), accuracy=accuracy))))
    return mul(t, sub(_const(ans, 1), mul(ans, ans)))


ad.defjvp2(tanh_p, _tanh_jvp)
mlir.register_lowering(tanh_p, _accuracy.lowering(hlo.tanh))


def logistic(x, *, accuracy=None):
    r"""Elementwise logistic sigmoid :math:`1 / (1 + e^{-x})`."""
    return _accuracy.bind(logistic_p, x, accuracy)


logistic_p = unop("logistic", inexact)
ad.defjvp2(logistic_p, lambda t, ans, x, accuracy=None: mul(t, mul(ans, (
    logistic(neg(x), accuracy=accuracy) if accuracy is _accuracy.AccuracyMode.HIGHEST
    else sub(_const(ans, 1), ans)))))
def _logistic_lowering(ctx, x, accuracy=None):
    # JAX's: 1 / (1 + exp(-x)), not stablehlo.logistic, whose bf16/f16 rounding differs
    one = mlir.full_like_aval(1, ctx.avals_in[0])
    return hlo.divide(one, hlo.add(one, hlo.exponential(hlo.negate(x))))


mlir.register_lowering(logistic_p, _logistic_lowering)


def sqrt(x, *, accuracy=None):
    r"""Elementwise square root."""
    return _accuracy.bind(sqrt_p, x, accuracy)


sqrt_p = unop("sqrt", inexact)
# t * (0.5 / ans), JAX's order: at a complex 0 that is nan (0.5 / 0j), not t / 0j = inf
ad.defjvp2(sqrt_p, lambda t, ans, x, accuracy=None: mul(t, div(_const(ans, 0.5), ans)))
mlir.register_lowering(sqrt_p, _accuracy.lowering(hlo.sqrt))


def rsqrt(x, *, accuracy=None):
    r"""Elementwise reciprocal square root :math:`1/\sqrt{x}`."""
    return _accuracy.bind(rsqrt_p, x, accuracy)


rsqrt_p = unop("rsqrt", inexact)
ad.defjvp2(rsqrt_p, lambda t, ans, x, accuracy=None: mul(t, mul(_const(x, -0.5), div(ans, x))))
mlir.register_lowering(rsqrt_p, _accuracy.lowering(hlo.rsqrt))


def abs(x):
    r"""Elementwise absolute value."""
    return abs_p.bind(x)


def _abs_jvp(t, ans, x):
    if not dtypes.is_complex(get_aval(x).dtype):
        # select, not t * sign(x): slope 1 at x = 0 and -1 at NaN, as JAX's rule.
        return select_n(ge(x, _const(x, 0)), neg(t), t)
    # d|z| = Re(conj(z) dz) / |z|, taken as 0 at z = 0 (as JAX does).
    from xform.lax.complex import conj, real  # (a cycle: complex builds on elementwise)
    safe = select_n(eq(ans, _const(ans, 0)), ans, _shapes.full_like(ans, _const(ans, 1)))
    return real(mul(t, div(conj(x), convert_element_type(safe, get_aval(x).dtype))))


# (as JAX, not the 2- and 4-bit ints: XLA supports them only in a few ops; nor unsigned)
abs_p = unop("abs", numeric - dtypes.narrow_int_dtypes - dtypes.unsigned_int_dtypes,
             result_dtype=lambda d: np.finfo(d).dtype if dtypes.is_complex(d) else d)
ad.defjvp2(abs_p, _abs_jvp)
mlir.register_lowering(abs_p, mlir.elementwise(hlo.abs))


def sign(x):
    r"""Elementwise sign: -1, 0 or 1 (zero derivative)."""
    return sign_p.bind(x)


def _sign_lowering(ctx, x):
    aval = ctx.avals_out[0]
    if not dtypes.is_unsigned(aval.dtype):
        return hlo.sign(x)
    # stablehlo.sign takes no unsigned operand; JAX lowers it as select(x == 0, 0, 1).
    zero = mlir.full_like_aval(0, aval)
    return hlo.select(hlo.compare(x, zero, hlo.ComparisonDirectionAttr.get("EQ")), zero,
                      mlir.full_like_aval(1, aval))


sign_p = unop("sign", numeric)
ad.defnondiff(sign_p)
mlir.register_lowering(sign_p, _sign_lowering)


# ---- comparisons ----

def _compare_lowering(direction):
    def rule(ctx, x, y):
        dt = ctx.avals_in[0].dtype
        if dtypes.is_inexact(dt):
            kind = "FLOAT"
        elif dtypes.is_unsigned(dt) or dt == np.bool_:
            kind = "UNSIGNED"
        else:
            kind = "SIGNED"
        out = ctx.avals_out[0]
        x = mlir.broadcast_to(x, ctx.avals_in[0], out)
        y = mlir.broadcast_to(y, ctx.avals_in[1], out)
        return hlo.compare(x, y, hlo.ComparisonDirectionAttr.get(direction),
                           compare_type=hlo.ComparisonTypeAttr.get(kind))
    return rule


def _comparison(name, direction, doc, allowed=any_dtype):
    prim = naryop(name, allowed, result_dtype=np.dtype(np.bool_))
    ad.defnondiff(prim)
    mlir.register_lowering(prim, _compare_lowering(direction))

    def fn(x, y):
        return prim.bind(x, y)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise comparison ``{doc}`` (boolean result)."
    return prim, fn


eq_p, eq = _comparison("eq", "EQ", "x == y")
ne_p, ne = _comparison("ne", "NE", "x != y")
_ordered = dtypes.all_dtypes - dtypes.complex_dtypes   # complex numbers have no order
lt_p, lt = _comparison("lt", "LT", "x < y", _ordered)
le_p, le = _comparison("le", "LE", "x <= y", _ordered)
gt_p, gt = _comparison("gt", "GT", "x > y", _ordered)
ge_p, ge = _comparison("ge", "GE", "x >= y", _ordered)


# ---- select_n ----

def select_n(which, *cases):
    """Elementwise ``cases[which]``: ``which`` is bool (two cases) or int32.

    ``which`` must have the cases' shape or be rank 0.
    """
    return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """Elementwise ``on_true if pred else on_false``."""
    return select_n_p.bind(pred, on_false, on_true)


def _select_n_abstract_eval(which, *cases):
    if not cases:
        raise ValueError("select_n() must have at least one case")
    if which.dtype != np.bool_ and not dtypes.is_integer(which.dtype):
        raise TypeError(f"select_n `which` must be boolean or integer, got {which.dtype.name}")
    if which.dtype == np.bool_ and len(cases) > 2:
        raise TypeError("select_n with a boolean `which` takes at most two cases")
    if len({c.shape for c in cases}) != 1 or len({c.dtype for c in cases}) != 1:
        raise TypeError("select_n cases must have the same shapes and dtypes, got "
                        + ", ".join(c.str_short() for c in cases))
    if which.shape and which.shape != cases[0].shape:
        raise TypeError(f"select_n `which` must be scalar or have the cases' shape "
                        f"{cases[0].shape}, got {which.shape}")
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n(which, *cases)
    tcases = tangents[1:]
    if all(type(t) is ad.Zero for t in tcases):
        return out, ad.Zero(get_aval(out).to_tangent_aval())
    return out, select_n(which, *map(ad.instantiate_zeros, tcases))


def _select_n_transpose(ct, which, *cases):
    zeros = _shapes.full_like(ct, _const(ct, 0))
    return [None] + [select_n(which, *[ct if j == i else zeros for j in range(len(cases))])
                     if ad.is_undefined_primal(c) else None for i, c in enumerate(cases)]


def _select_n_batch(vals, dims):
    size = batching.axis_size_of(vals, dims)
    which, *cases = vals
    wdim, *cdims = dims
    example_shape = (get_aval(cases[0]).shape if cdims[0] is None else
                     tuple(s for i, s in enumerate(get_aval(cases[0]).shape) if i != cdims[0]))
    cases = [batching.bdim_at_front(c, d, size) for c, d in zip(cases, cdims)]
    if wdim is None and not get_aval(which).shape:
        return select_n(which, *cases), 0
    which = batching.bdim_at_front(which, wdim, size)
    if get_aval(which).ndim - 1 < len(example_shape):   # per-example scalar predicate
        which = _shapes.broadcast_in_dim(which, (size,) + example_shape, (0,))
    return select_n(which, *cases), 0


def _select_n_lowering(ctx, which, *cases):
    out = ctx.avals_out[0]
    w_aval = ctx.avals_in[0]
    if w_aval.shape != out.shape:
        which = mlir.broadcast_to(which, w_aval, out.update(dtype=w_aval.dtype))
    w_aval = w_aval.update(shape=out.shape)
    if w_aval.dtype == np.bool_:
        return hlo.select(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]

    def tree(lo, hi):  # cases[lo:hi], binary search on `which`
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        pivot = mlir.full_like_aval(mid, w_aval)
        pred = hlo.compare(which, pivot, hlo.ComparisonDirectionAttr.get("LT"),
                           compare_type=hlo.ComparisonTypeAttr.get(
                               "UNSIGNED" if dtypes.is_unsigned(w_aval.dtype) else "SIGNED"))
        return hlo.select(pred, tree(lo, mid), tree(mid, hi))
    return tree(0, len(cases))


select_n_p = standard_primitive("select_n", _select_n_abstract_eval)
ad.primitive_jvps[select_n_p] = _select_n_jvp
ad.primitive_transposes[select_n_p] = _select_n_transpose
ad.defnonlinear_operands(select_n_p, slice(0, 1))   # the predicate
batching.primitive_batchers[select_n_p] = _select_n_batch
mlir.register_lowering(select_n_p, _select_n_lowering)


# ---- dtype conversion ----

def convert_element_type(x, new_dtype, weak_type=False):
    """Cast ``x`` to ``new_dtype`` (canonicalized: float64 means float32 without x64)."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    if isinstance(x, (bool, int, float, complex)):
        if type(x) is int and dtypes.is_integer(new_dtype) and not (
                np.iinfo(new_dtype).min <= x <= np.iinfo(new_dtype).max):
            # Out of range: wraps around as JAX's (numpy's int64 cast) does.
            x = np.array(x, np.uint64 if x > 0 else np.int64).astype(new_dtype).item()
        try:
            return scalar_array(x, new_dtype, weak_type)
        except (ValueError, OverflowError):   # NaN, inf or out of range to an integer:
            x = scalar_array(x, dtypes.canonicalize_dtype(type(x)), True)  # XLA's, as JAX's
    aval = get_aval(x)
    if (aval.dtype == new_dtype and aval.weak_type == weak_type
            and not isinstance(x, (np.ndarray, np.generic))):  # as JAX, numpy in -> Array out
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


def _convert_abstract_eval(x, *, new_dtype, weak_type):
    return ShapedArray(x.shape, new_dtype, weak_type)


def _convert_jvp(primals, tangents, *, new_dtype, weak_type):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if type(t) is ad.Zero or not (dtypes.is_inexact(new_dtype)
                                  and dtypes.is_inexact(get_aval(x).dtype)):
        return out, ad.Zero(get_aval(out).to_tangent_aval())
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _convert_transpose(ct, x, *, new_dtype, weak_type):
    # (the cast back restores the operand's weak type: a weak input's cotangent is weak)
    if type(ct) is ad.Zero or x.aval.dtype == dtypes.float0:
        return [ad.Zero(x.aval.to_tangent_aval())]
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype,
                                        weak_type=x.aval.weak_type)]


def _convert_lowering(ctx, x, *, new_dtype, weak_type):
    src = ctx.avals_in[0]
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    if dtypes.is_complex(src.dtype) and not dtypes.is_complex(new_dtype):
        # the real part only, to bool too (JAX's: complex -> bool is real(x) != 0)
        x, src = hlo.real(x), src.update(dtype=np.finfo(src.dtype).dtype)
    if new_dtype == np.bool_ and src.dtype != np.bool_:
        zero = mlir.full_like_aval(0, src)
        kind = "FLOAT" if dtypes.is_inexact(src.dtype) else (
            "UNSIGNED" if dtypes.is_unsigned(src.dtype) else "SIGNED")
        return hlo.compare(x, zero, hlo.ComparisonDirectionAttr.get("NE"),
                           compare_type=hlo.ComparisonTypeAttr.get(kind))
    return hlo.convert(out_type, x)


convert_element_type_p = standard_primitive("convert_element_type", _convert_abstract_eval)
ad.primitive_jvps[convert_element_type_p] = _convert_jvp
ad.primitive_transposes[convert_element_type_p] = _convert_transpose
batching.defvectorized(convert_element_type_p)
mlir.register_lowering(convert_element_type_p, _convert_lowering)
lazy_recipes.WEAK_CASTS.add(convert_element_type_p)


# ---- structural ----

def add_any(x, y):
    """Sum of two tangents (the addition autodiff uses to accumulate)."""
    return add_any_p.bind(x, y)


def _add_any_abstract_eval(x, y):
    if x.shape != y.shape or x.dtype != y.dtype:
        raise TypeError(f"add_any got {x.str_short()} and {y.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type and y.weak_type)


def _add_any_batch(vals, dims):
    # No rank-0 broadcasting here (unlike add): an unmapped tangent is broadcast.
    size = batching.axis_size_of(vals, dims)
    x, y = (batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims))
    return add_any(x, y), 0


add_any_p = standard_primitive("add_any", _add_any_abstract_eval)
ad.deflinear(add_any_p, lambda ct, x, y: [ct, ct])
batching.primitive_batchers[add_any_p] = _add_any_batch
mlir.register_lowering(add_any_p, mlir.elementwise(hlo.add))


def stop_gradient(x):
    """The identity, with zero derivative: ``grad`` treats the result as a constant."""
    return tree_util.tree_map(stop_gradient_p.bind, x)


stop_gradient_p = unop("stop_gradient", any_dtype)
ad.defnondiff(stop_gradient_p)
mlir.register_lowering(stop_gradient_p, lambda ctx, x: x)
