"""``xform.experimental.jet``: Taylor-mode higher-order differentiation (JAX's ``jet``).

``jet(f, (x,), ((x1, ..., xK),))`` pushes a truncated Taylor polynomial through ``f`` in
one pass: given ``h_0 = h(t)`` and its derivatives ``h_1 .. h_K`` along a direction, it
returns ``f(h_0)`` and the derivatives of ``f o h`` (Faa di Bruno), without nesting K
first-order JVPs. A :class:`JetTrace` carries, per value, its primal and K Taylor
coefficients (``u_k = h_k / k!``, "normalized"); each primitive has a rule mapping input
coefficients to output coefficients (Griewank & Walther, *Evaluating Derivatives*, ch.
13): linear primitives apply to each coefficient, products convolve, and ``exp``,
``log``, ``sin``... follow the recurrences of their differential equations. Calls
(``jit``, custom_jvp/vjp/vmap functions, remat, ``linear_call``) are traced through, their custom rules
ignored, as in JAX. A primitive without a rule raises ``NotImplementedError``.
"""
import math
from functools import partial

from xform import lax
from xform import numpy as jnp
from xform.core.trace import (Trace, Tracer, current_trace, get_aval, set_current_trace,
                              to_concrete_value)
from xform.core.jaxpr import eval_jaxpr
from xform.core.tree_util import tree_flatten, tree_structure, tree_unflatten, treedef_is_leaf
from xform.interpreters import partial_eval as pe
from xform.interpreters.custom import custom_jvp_call_p, custom_vjp_call_p, linear_call_p
from xform.interpreters.custom_batching import custom_vmap_p
from xform.interpreters.pjit import pjit_p
from xform.transforms.checkpoint import name_p, remat_p

__all__ = ["jet", "jet2", "jet_rules", "fact"]


def jet(fun, primals, series, factorial_scaled=True, **_):
    """Taylor-mode higher-order derivatives of ``fun`` (``jax.experimental.jet.jet``).

    Args:
      fun: a function of arrays returning an array or a pytree of arrays.
      primals: a tuple or list of the arguments (arrays or scalars, one per parameter).
      series: per argument, a tuple or list of K terms; together with ``primals`` a
        truncated Taylor polynomial. Every argument needs the same K.
      factorial_scaled: if True (default) term k is the k-th derivative; if False the
        terms are the plain Taylor coefficients (``jet2``).

    Returns:
      ``(primals_out, series_out)``: ``fun(*primals)`` and its K terms, with the tree
      structure of ``fun``'s output.

    >>> import xform.numpy as jnp
    >>> y, (y1, y2) = jet(jnp.sin, (0.5,), ((1.0, 0.0),))
    >>> print(f"{float(y1):.4f} {float(y2):.4f}")  # cos(0.5), -sin(0.5)
    0.8776 -0.4794
    """
    try:
        order, = set(map(len, series))
    except ValueError:
        raise ValueError("jet terms have inconsistent lengths for different "
                         "arguments") from None
    for i, (x, terms) in enumerate(zip(primals, series)):
        if not treedef_is_leaf(tree_structure(x)):
            raise ValueError(f"primal value at position {i} is not an array")
        for j, t in enumerate(terms):
            if not treedef_is_leaf(tree_structure(t)):
                raise ValueError(f"term {j} for argument {i} is not an array")
    if factorial_scaled:
        series = [[t / fact(k + 1) for k, t in enumerate(terms)] for terms in series]
    out_tree = []

    def flat(*args):
        leaves, tree = tree_flatten(fun(*args))
        out_tree.append(tree)
        return leaves

    out_primals, out_terms = _taylor(flat, primals, series, order)
    if factorial_scaled:
        out_terms = [[t * fact(k + 1) for k, t in enumerate(terms)] for terms in out_terms]
    return tree_unflatten(out_tree[0], out_primals), tree_unflatten(out_tree[0], out_terms)


jet2 = partial(jet, factorial_scaled=False)


def fact(n):
    """n! as JAX's jet computes it (``exp(lgamma(n + 1))``, a float)."""
    return lax.exp(lax.lgamma(n + 1.))


def _taylor(fun, primals, series, order):
    """Run flat ``fun`` on normalized Taylor polynomials; ``(primals_out, terms_out)``."""
    trace = JetTrace(current_trace(), order)
    try:
        with set_current_trace(trace):
            outs = fun(*[JetTracer(trace, p, list(s)) for p, s in zip(primals, series)])
        outs = [trace.lift(o) for o in outs]
    finally:
        trace.invalidate()
    return ([o.primal for o in outs],
            [[jnp.zeros_like(o.primal)] * order if o.terms is None else o.terms
             for o in outs])


def _series(fun, primals, series):
    """``fun`` (one output) applied to polynomials ``[p] + terms`` inside a rule:
    its output coefficients ``[v_0, .., v_K]``."""
    order = len(series[0])
    (p,), (terms,) = _taylor(lambda *a: [fun(*a)], primals, series, order)
    return [p] + terms


class JetTracer(Tracer):
    __slots__ = ("primal", "terms")  # terms: K coefficients, or None (all zero)

    def __init__(self, trace, primal, terms):
        self._trace = trace
        self.primal = primal
        self.terms = terms

    @property
    def aval(self):
        return get_aval(self.primal)

    def to_concrete_value(self):
        return to_concrete_value(self.primal)


class JetTrace(Trace):
    __slots__ = ("order",)

    def __init__(self, parent, order):
        super().__init__(parent)
        self.order = order

    def lift(self, x):
        if type(x) is JetTracer and x._trace is self:
            return x
        pe._check_leak(x)
        return JetTracer(self, x, None)

    def process_primitive(self, prim, args, params):
        tracers = [self.lift(x) for x in args]
        primals = [t.primal for t in tracers]
        if all(t.terms is None for t in tracers):
            with set_current_trace(self.parent):
                out = prim.bind(*primals, **params)
            return ([JetTracer(self, o, None) for o in out] if prim.multiple_results
                    else JetTracer(self, out, None))
        body = _CALLS.get(prim)
        if body is not None:  # traced through (custom rules ignored, as JAX's jet does)
            closed = params[body]
            return eval_jaxpr(closed.jaxpr, closed.consts, *tracers)
        rule = jet_rules.get(prim)
        if rule is None:
            raise NotImplementedError(f"Jet rule for '{prim.name}' not implemented")
        with set_current_trace(self.parent):
            series = [[jnp.zeros_like(t.primal)] * self.order if t.terms is None
                      else t.terms for t in tracers]
            out, terms = rule(primals, series, **params)
        if prim.multiple_results:
            return [JetTracer(self, o, None if terms is None else list(t))
                    for o, t in zip(out, terms if terms is not None else [None] * len(out))]
        return JetTracer(self, out, terms)


_CALLS = {pjit_p: "jaxpr", remat_p: "jaxpr", custom_jvp_call_p: "call_jaxpr",
          custom_vjp_call_p: "call_jaxpr", custom_vmap_p: "call", linear_call_p: "callee"}

jet_rules = {}  # primitive -> rule(primals, series, **params) -> (out, terms or None)


# ---- zero and linear rules ----

def _zero(prim, primals, series, **params):
    return prim.bind(*primals, **params), None


for _p in (lax.le_p, lax.lt_p, lax.gt_p, lax.ge_p, lax.eq_p, lax.ne_p, lax.not_p,
           lax.and_p, lax.or_p, lax.xor_p, lax.floor_p, lax.ceil_p, lax.round_p,
           lax.sign_p, lax.stop_gradient_p, lax.is_finite_p, lax.shift_left_p,
           lax.shift_right_arithmetic_p, lax.shift_right_logical_p,
           lax.bitcast_convert_type_p, lax.argmax_p, lax.argmin_p,
           lax.population_count_p, lax.clz_p):
    jet_rules[_p] = partial(_zero, _p)


def _linear(prim, primals, series, **params):
    out = prim.bind(*primals, **params)
    terms = [prim.bind(*ts, **params) for ts in zip(*series)]
    return out, (list(zip(*terms)) if prim.multiple_results else terms)


for _p in (lax.neg_p, lax.real_p, lax.imag_p, lax.conj_p, lax.complex_p, lax.add_p,
           lax.add_any_p, lax.sub_p, lax.convert_element_type_p, lax.broadcast_in_dim_p,
           lax.concatenate_p, lax.split_p, lax.pad_p, lax.reshape_p, lax.squeeze_p,
           lax.rev_p, lax.transpose_p, lax.slice_p, lax.reduce_sum_p,
           lax.reduce_window_sum_p, lax.fft_p, lax.cumsum_p, lax.sharding_constraint_p,
           lax.optimization_barrier_p, name_p):
    jet_rules[_p] = partial(_linear, _p)


def _indexed(prim, n_linear, primals, series, **params):
    """Linear in the first ``n_linear`` operands; the rest (indices) are held fixed."""
    rest = primals[n_linear:]
    out = prim.bind(*primals, **params)
    return out, [prim.bind(*ts[:n_linear], *rest, **params) for ts in zip(*series)]


jet_rules[lax.dynamic_slice_p] = partial(_indexed, lax.dynamic_slice_p, 1)
jet_rules[lax.gather_p] = partial(_indexed, lax.gather_p, 1)


def _update_slice(primals, series, **params):
    idx = primals[2:]
    p = lax.dynamic_update_slice_p
    return p.bind(*primals, **params), [p.bind(a, b, *idx, **params)
                                        for a, b, *_ in zip(*series)]


jet_rules[lax.dynamic_update_slice_p] = _update_slice


def _scatter_add(primals, series, **params):
    p = lax.scatter_add_p
    idx = primals[1]
    return p.bind(*primals, **params), [p.bind(a, idx, u, **params)
                                        for a, _, u in zip(*series)]


jet_rules[lax.scatter_add_p] = _scatter_add


# ---- products and quotients ----

def _bilinear(prim, primals, series, **params):
    u, w = [primals[0]] + series[0], [primals[1]] + series[1]
    v = [sum(prim.bind(u[j], w[k - j], **params) for j in range(1, k + 1))
         + prim.bind(u[0], w[k], **params) for k in range(len(u))]  # (Cauchy product)
    return v[0], v[1:]


for _p in (lax.mul_p, lax.dot_general_p, lax.conv_general_dilated_p):
    jet_rules[_p] = partial(_bilinear, _p)


def _div(primals, series):
    u, w = [primals[0]] + series[0], [primals[1]] + series[1]
    v = []
    for k in range(len(u)):  # u = v * w, solved for v_k
        v.append((u[k] - sum(v[j] * w[k - j] for j in range(k))) / w[0])
    return v[0], v[1:]


jet_rules[lax.div_p] = _div


# ---- the recurrences of y' = c(x) x' ----

def _chain(v0, c, u):
    """``v`` with ``v' = c u'``: ``v_k = sum_j j c_{k-j} u_j / k`` (``c``: at least
    ``len(u) - 1`` coefficients)."""
    v = [v0]
    for k in range(1, len(u)):
        v.append(sum(j * c[k - j] * u[j] for j in range(1, k + 1)) / k)
    return v[0], v[1:]


def _by_derivative(prim, deriv, primals, series):
    """Rule of a unary primitive from its derivative ``deriv`` (a function of x)."""
    x, = primals
    return _chain(prim.bind(x), _series(deriv, primals, series), [x] + series[0])


def _exp(primals, series):
    u = [primals[0]] + series[0]
    v = [lax.exp(u[0])]
    for k in range(1, len(u)):  # v' = v u'
        v.append(sum(j * v[k - j] * u[j] for j in range(1, k + 1)) / k)
    return v[0], v[1:]


def _log(primals, series):
    u = [primals[0]] + series[0]
    v = [lax.log(u[0])]
    for k in range(1, len(u)):  # u v' = u'
        v.append((u[k] - sum(j * v[j] * u[k - j] for j in range(1, k)) / k) / u[0])
    return v[0], v[1:]


def _sin_cos(sign, f, g, primals, series):
    """Coefficients of ``(s, c) = (f(x), g(x))`` with ``s' = c x'``, ``c' = sign s x'``."""
    u = [primals[0]] + series[0]
    s, c = [f(u[0])], [g(u[0])]
    for k in range(1, len(u)):
        s.append(sum(j * u[j] * c[k - j] for j in range(1, k + 1)) / k)
        c.append(sign * sum(j * u[j] * s[k - j] for j in range(1, k + 1)) / k)
    return s, c


def _first(pair_rule, which):
    def rule(primals, series):
        v = pair_rule(primals, series)[which]
        return v[0], v[1:]
    return rule


_trig = partial(_sin_cos, -1, lax.sin, lax.cos)
_hyp = partial(_sin_cos, 1, lax.sinh, lax.cosh)


def _logistic(primals, series):
    u = [primals[0]] + series[0]
    v = [lax.logistic(u[0])]
    e = [v[0] * (1 - v[0])]  # sigma' = sigma (1 - sigma): e = v - v**2
    for k in range(1, len(u)):
        v.append(sum(j * e[k - j] * u[j] for j in range(1, k + 1)) / k)
        e.append((1 - v[0]) * v[k] - sum(v[j] * v[k - j] for j in range(1, k + 1)))
    return v[0], v[1:]


def _tanh(primals, series):  # tanh x = 2 sigma(2x) - 1
    y, terms = _logistic([2 * primals[0]], [[2 * t for t in series[0]]])
    return 2 * y - 1, [2 * t for t in terms]


def _pow(primals, series):  # x ** y = exp(y log x)
    z = _series(lambda x, y: y * lax.log(x), primals, series)
    v = [lax.pow(*primals)]
    for k in range(1, len(z)):
        v.append(sum(j * v[k - j] * z[j] for j in range(1, k + 1)) / k)
    return v[0], v[1:]


def _power_by_squaring(x, n):
    if n < 0:
        return _power_by_squaring(1 / x, -n)
    if n == 0:
        return jnp.ones_like(x)
    half = _power_by_squaring(x * x, n // 2)
    return half if n % 2 == 0 else x * half


def _integer_pow(primals, series, *, y):
    v = _series(lambda x: _power_by_squaring(x, y), primals, series)
    return v[0], v[1:]


def _erf_inv(primals, series):
    # v' = c u' with c = sqrt(pi)/2 exp(v**2): c's coefficients follow v's, one behind.
    u = [primals[0]] + series[0]
    v = [lax.erf_inv(u[0])]
    half_sqrt_pi = math.sqrt(math.pi) / 2
    sq = [v[0] * v[0]]
    ex = [lax.exp(sq[0])]
    c = [half_sqrt_pi * ex[0]]
    for k in range(1, len(u)):
        v.append(sum(j * c[k - j] * u[j] for j in range(1, k + 1)) / k)
        sq.append(sum(v[j] * v[k - j] for j in range(k + 1)))
        ex.append(sum(j * ex[k - j] * sq[j] for j in range(1, k + 1)) / k)
        c.append(half_sqrt_pi * ex[k])
    return v[0], v[1:]


def _atan2(primals, series):
    z = _series(lax.div, primals, series)
    c = _series(lambda t: 1 / (1 + t * t), [z[0]], [z[1:]])
    return _chain(lax.atan2(*primals), c, z)


def _reduce_chooser(prim, primals, series, *, axes, **params):
    """max/min over ``axes``: the terms average over the positions that attain it."""
    x, = primals
    out = prim.bind(x, axes=axes, **params)
    keep = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    hits = lax.convert_element_type(x == lax.reshape(out, keep), series[0][0].dtype)
    counts = lax.reduce_sum(hits, axes)
    return out, [lax.reduce_sum(t * hits, axes) / counts for t in series[0]]


def _select_n(primals, series):
    which = primals[0]
    return lax.select_n(*primals), [lax.select_n(which, *ts[1:]) for ts in zip(*series)]


def _max_min(greater, primals, series):
    """Elementwise max (``greater``) or min: ties take the mean of both terms."""
    x, y = jnp.broadcast_arrays(*primals)
    pick = x > y if greater else x < y
    tie = x == y

    def choose(a, b):
        a, b = jnp.broadcast_arrays(a, b)
        return lax.select(tie, (a + b) / 2, lax.select(pick, a, b))
    return lax.select(pick, x, y), [choose(a, b) for a, b in zip(*series)]


def _abs(primals, series):
    x, = primals
    sign = lax.select(x < 0, jnp.full_like(x, -1), jnp.full_like(x, 1))
    return lax.abs(x), [sign * t for t in series[0]]


def _cumulative(combine, primals, series, *, axis, reverse):
    # as JAX: the parallel prefix scan, whose primitives all have rules
    v = _series(lambda x: lax.associative_scan(combine, x, reverse=reverse, axis=axis),
                primals, series)
    return v[0], v[1:]


def _sqrt(primals, series):  # v**2 = u, solved for v_k
    u = [primals[0]] + series[0]
    v = [lax.sqrt(u[0])]
    for k in range(1, len(u)):
        v.append((u[k] - sum(v[j] * v[k - j] for j in range(1, k))) / (2 * v[0]))
    return v[0], v[1:]


def _composite(fun):
    def rule(primals, series, **_):
        v = _series(fun, primals, series)
        return v[0], v[1:]
    return rule


jet_rules.update({
    lax.exp_p: _exp,
    lax.log_p: _log,
    lax.sin_p: _first(_trig, 0),
    lax.cos_p: _first(_trig, 1),
    lax.sinh_p: _first(_hyp, 0),
    lax.cosh_p: _first(_hyp, 1),
    lax.logistic_p: _logistic,
    lax.tanh_p: _tanh,
    lax.pow_p: _pow,
    lax.integer_pow_p: _integer_pow,
    lax.erf_inv_p: _erf_inv,
    lax.atan2_p: _atan2,
    lax.sqrt_p: _sqrt,
    lax.reduce_max_p: partial(_reduce_chooser, lax.reduce_max_p),
    lax.reduce_min_p: partial(_reduce_chooser, lax.reduce_min_p),
    lax.select_n_p: _select_n,
    lax.max_p: partial(_max_min, True),
    lax.min_p: partial(_max_min, False),
    lax.abs_p: _abs,
    lax.cumprod_p: partial(_cumulative, lax.mul),
    lax.cummax_p: partial(_cumulative, lax.max),
    lax.cummin_p: partial(_cumulative, lax.min),
    lax.erf_p: partial(_by_derivative, lax.erf_p,
                       lambda x: (2 / math.sqrt(math.pi)) * lax.exp(-(x * x))),
    lax.atan_p: partial(_by_derivative, lax.atan_p, lambda x: 1 / (1 + x * x)),
    lax.asin_p: partial(_by_derivative, lax.asin_p, lambda x: lax.rsqrt(1 - x * x)),
    lax.acos_p: partial(_by_derivative, lax.acos_p, lambda x: -lax.rsqrt(1 - x * x)),
    lax.expm1_p: _composite(lambda x: lax.exp(x) - 1),
    lax.log1p_p: _composite(lambda x: lax.log(1 + x)),
    lax.exp2_p: _composite(lambda x: lax.exp(x * math.log(2))),
    lax.square_p: _composite(lambda x: x * x),
    lax.rsqrt_p: _composite(lambda x: 1 / lax.sqrt(x)),
    lax.cbrt_p: _composite(lambda x: lax.pow(x, jnp.full_like(x, 1 / 3))),
    lax.tan_p: _composite(lambda x: lax.sin(x) / lax.cos(x)),
    lax.asinh_p: _composite(lambda x: lax.log(x + lax.sqrt(x * x + 1))),
    lax.acosh_p: _composite(lambda x: lax.log(x + lax.sqrt(x * x - 1))),
    lax.atanh_p: _composite(lambda x: 0.5 * lax.log((1 + x) / (1 - x))),
    lax.erfc_p: _composite(lambda x: 1 - lax.erf(x)),
    lax.rem_p: _composite(lambda x, y: x - y * lax.floor(x / y)),
    lax.clamp_p: _composite(lambda lo, x, hi: lax.min(lax.max(lo, x), hi)),
})
