"""Adaptive rescalings (Optax's ``scale_by_*``): the per-parameter statistics behind
Adam, RMSProp, AdaBelief, Lion, RAdam, NovoGrad, Adafactor, SM3 and friends. Every one
is an ``(init, update)`` pair whose state is a NamedTuple of pytrees."""
from typing import Any, NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import (GradientTransformation, NO_PARAMS_MSG, _abs_sq,
                               canonicalize_dtype, safe_increment, tree_cast, tree_cast_like,
                               tree_full_like, tree_zeros_like, update_infinity_moment,
                               update_moment, update_moment_per_elem_norm)
from xform.optim._base import bias_correction as _debias


def _count():
    return jnp.zeros([], jnp.int32)


def _nesterov_mu_hat(mu, updates, b1, count_inc):
    # NAdam: b1 * m_t / (1 - b1^(t+1)) + (1 - b1) * g_t / (1 - b1^t)
    return tu.tree_map(lambda m, g: b1 * m + (1 - b1) * g,
                       _debias(mu, b1, safe_increment(count_inc)),
                       _debias(updates, b1, count_inc))


class ScaleByRssState(NamedTuple):
    sum_of_squares: Any


def scale_by_rss(initial_accumulator_value=0.1, eps=1e-7):
    """Adagrad's rescaling: divide by the root of the running sum of squares.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_rss(0.0)
        >>> tx.update(jnp.array([2.]), tx.init(jnp.zeros(1)))[0]
        Array([1.], dtype=float32)
    """
    def init_fn(params):
        return ScaleByRssState(tree_full_like(params, initial_accumulator_value))

    def update_fn(updates, state, params=None):
        ss = tu.tree_map(lambda g, t: _abs_sq(g) + t, updates, state.sum_of_squares)
        inv = tu.tree_map(lambda t: jnp.where(t > 0, lax.rsqrt(t + eps), 0.0), ss)
        return tu.tree_map(lambda a, g: a * g, inv, updates), ScaleByRssState(ss)
    return GradientTransformation(init_fn, update_fn)


class ScaleByRmsState(NamedTuple):
    nu: Any


class ScaleByRmsWithCountState(NamedTuple):
    count: Any
    nu: Any


def scale_by_rms(decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True,
                 bias_correction=False):
    """RMSProp's rescaling by the root of an EMA of squared gradients.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_rms(decay=0.0, eps=0.0)
        >>> tx.update(jnp.array([-4.]), tx.init(jnp.zeros(1)))[0]
        Array([-1.], dtype=float32)
    """
    correct = bias_correction

    def init_fn(params):
        nu = tree_full_like(params, initial_scale)
        return ScaleByRmsWithCountState(_count(), nu) if correct else ScaleByRmsState(nu)

    def update_fn(updates, state, params=None):
        nu = update_moment_per_elem_norm(updates, state.nu, decay, 2)
        if correct:
            count_inc = safe_increment(state.count)
            nu_hat = _debias(nu, decay, count_inc)
        else:
            nu_hat = nu
        if eps_in_sqrt:
            scaling = tu.tree_map(lambda n: lax.rsqrt(n + eps), nu_hat)
        else:
            scaling = tu.tree_map(lambda n: 1 / (jnp.sqrt(n) + eps), nu_hat)
        updates = tu.tree_map(lambda s, g: s * g, scaling, updates)
        return updates, (ScaleByRmsWithCountState(count_inc, nu) if correct
                         else ScaleByRmsState(nu))
    return GradientTransformation(init_fn, update_fn)


class ScaleByRStdDevState(NamedTuple):
    mu: Any
    nu: Any


class ScaleByRStdDevWithCountState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


def scale_by_stddev(decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True,
                    bias_correction=False):
    """Centered RMSProp's rescaling by the running standard deviation of gradients.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_stddev()
        >>> tx.update(jnp.array([1.]), tx.init(jnp.zeros(1)))[0].shape
        (1,)
    """
    correct = bias_correction

    def init_fn(params):
        mu, nu = tree_zeros_like(params), tree_full_like(params, initial_scale)
        return (ScaleByRStdDevWithCountState(_count(), mu, nu) if correct
                else ScaleByRStdDevState(mu, nu))

    def update_fn(updates, state, params=None):
        mu = update_moment(updates, state.mu, decay, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, decay, 2)
        if correct:
            count_inc = safe_increment(state.count)
            mu_hat, nu_hat = _debias(mu, decay, count_inc), _debias(nu, decay, count_inc)
        else:
            mu_hat, nu_hat = mu, nu
        if eps_in_sqrt:
            scaling = tu.tree_map(lambda m, n: lax.rsqrt(n - _abs_sq(m) + eps), mu_hat, nu_hat)
        else:
            scaling = tu.tree_map(lambda m, n: 1 / (jnp.sqrt(n - _abs_sq(m)) + eps),
                                  mu_hat, nu_hat)
        updates = tu.tree_map(lambda s, g: s * g, scaling, updates)
        return updates, (ScaleByRStdDevWithCountState(count_inc, mu, nu) if correct
                         else ScaleByRStdDevState(mu, nu))
    return GradientTransformation(init_fn, update_fn)


class ScaleByAdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


def _adam_divide(mu_hat, nu_hat, eps, eps_root):
    return tu.tree_map(lambda m, v: None if m is None else m / (jnp.sqrt(v + eps_root) + eps),
                       mu_hat, nu_hat, is_leaf=lambda x: x is None)


def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *,
                  nesterov=False):
    """Adam's rescaling: bias-corrected first moment over the root of the second.

    Args:
        b1: decay of the first moment.
        b2: decay of the second moment.
        eps: added to the denominator outside the square root.
        eps_root: added inside the square root.
        mu_dtype: dtype of the first moment (default: that of the params).
        nesterov: use Nesterov momentum (NAdam).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_adam()
        >>> tx.update(jnp.array([0.5, -2.]), tx.init(jnp.zeros(2)))[0].round(4)
        Array([ 1., -1.], dtype=float32)
    """
    mu_dtype = canonicalize_dtype(mu_dtype)

    def init_fn(params):
        return ScaleByAdamState(_count(), tree_zeros_like(params, mu_dtype),
                                tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = safe_increment(state.count)
        mu_hat = (_nesterov_mu_hat(mu, updates, b1, count_inc) if nesterov
                  else _debias(mu, b1, count_inc))
        nu_hat = _debias(nu, b2, count_inc)
        updates = _adam_divide(mu_hat, nu_hat, eps, eps_root)
        return updates, ScaleByAdamState(count_inc, tree_cast(mu, mu_dtype),
                                         tree_cast_like(nu, state.nu))
    return GradientTransformation(init_fn, update_fn)


class ScaleByAmsgradState(NamedTuple):
    count: Any
    mu: Any
    nu: Any
    nu_max: Any


def scale_by_amsgrad(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None,
                     bias_correction_mu=True, bias_correction_nu=True):
    """AMSGrad: Adam with the running maximum of the second moment.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_amsgrad()
        >>> tx.update(jnp.array([3.]), tx.init(jnp.zeros(1)))[0].round(4)
        Array([1.], dtype=float32)
    """
    mu_dtype = canonicalize_dtype(mu_dtype)

    def init_fn(params):
        z = tree_zeros_like(params)
        return ScaleByAmsgradState(_count(), tree_zeros_like(params, mu_dtype), z, z)

    def update_fn(updates, state, params=None):
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = safe_increment(state.count)
        mu_hat = _debias(mu, b1, count_inc) if bias_correction_mu else mu
        nu_eff = _debias(nu, b2, count_inc) if bias_correction_nu else nu
        nu_max = tu.tree_map(jnp.maximum, state.nu_max, nu_eff)
        updates = _adam_divide(mu_hat, nu_max, eps, eps_root)
        return updates, ScaleByAmsgradState(count_inc, tree_cast(mu, mu_dtype), nu, nu_max)
    return GradientTransformation(init_fn, update_fn)


def scale_by_adamax(b1=0.9, b2=0.999, eps=1e-8):
    """Adamax: Adam with the infinity norm in place of the second moment.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_adamax(eps=0.0)
        >>> tx.update(jnp.array([-4.]), tx.init(jnp.zeros(1)))[0].round(4)
        Array([-1.], dtype=float32)
    """
    def init_fn(params):
        return ScaleByAdamState(_count(), tree_zeros_like(params), tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        count_inc = safe_increment(state.count)
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_infinity_moment(updates, state.nu, b2, eps)
        mu_hat = _debias(mu, b1, count_inc)
        updates = tu.tree_map(lambda m, v: m / v, mu_hat, nu)
        return updates, ScaleByAdamState(count_inc, mu, nu)
    return GradientTransformation(init_fn, update_fn)


class ScaleByLionState(NamedTuple):
    count: Any
    mu: Any


def scale_by_lion(b1=0.9, b2=0.99, mu_dtype=None, *, mode="hard", smooth_beta=1.0):
    """Lion: the sign of an interpolation of the gradient and its momentum.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_lion()
        >>> tx.update(jnp.array([0.3, -2.]), tx.init(jnp.zeros(2)))[0]
        Array([ 1., -1.], dtype=float32)
    """
    if mode not in ("hard", "smooth", "refined"):
        raise ValueError(f'Unknown lion mode: {mode}. It needs to be one of '
                         '["hard", "smooth", "refined"].')
    mu_dtype = canonicalize_dtype(mu_dtype)

    def init_fn(params):
        return ScaleByLionState(_count(), tree_zeros_like(params, mu_dtype))

    def comb(g, m):
        x = (1.0 - b1) * g + b1 * m
        if mode == "hard":
            return jnp.sign(x)
        if mode == "smooth":
            return jnp.tanh(smooth_beta * x)
        return jnp.where(jnp.abs(x) < 1.0, x, jnp.sign(x))

    def update_fn(updates, state, params=None):
        new_updates = tu.tree_map(comb, updates, state.mu)
        mu = tree_cast(update_moment(updates, state.mu, b2, 1), mu_dtype)
        return new_updates, ScaleByLionState(safe_increment(state.count), mu)
    return GradientTransformation(init_fn, update_fn)


class ScaleByAdaDeltaState(NamedTuple):
    e_g: Any
    e_x: Any


def scale_by_adadelta(rho=0.9, eps=1e-6):
    """Adadelta's rescaling by the ratio of RMS of past updates to RMS of gradients.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_adadelta()
        >>> tx.update(jnp.array([1.]), tx.init(jnp.zeros(1)))[0].shape
        (1,)
    """
    def init_fn(params):
        return ScaleByAdaDeltaState(tree_zeros_like(params), tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        e_g = update_moment(updates, state.e_g, rho, 2)
        updates = tu.tree_map(lambda g, eg, ex: jnp.sqrt(ex + eps) / jnp.sqrt(eg + eps) * g,
                              updates, e_g, state.e_x)
        e_x = update_moment(updates, state.e_x, rho, 2)
        return updates, ScaleByAdaDeltaState(e_g, e_x)
    return GradientTransformation(init_fn, update_fn)


class ScaleByBeliefState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


def scale_by_belief(b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, *, nesterov=False):
    """AdaBelief: Adam with the variance of the prediction error ``g - m``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_belief()
        >>> tx.update(jnp.array([1.]), tx.init(jnp.zeros(1)))[0].shape
        (1,)
    """
    def init_fn(params):
        return ScaleByBeliefState(_count(), tree_zeros_like(params), tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        mu = update_moment(updates, state.mu, b1, 1)
        err = tu.tree_map(lambda g, m: g - m, updates, mu)
        nu = update_moment_per_elem_norm(err, state.nu, b2, 2)
        nu = tu.tree_map(lambda v: v + eps_root, nu)
        count_inc = safe_increment(state.count)
        mu_hat = (_nesterov_mu_hat(mu, updates, b1, count_inc) if nesterov
                  else _debias(mu, b1, count_inc))
        nu_hat = _debias(nu, b2, count_inc)
        updates = _adam_divide(mu_hat, nu_hat, eps, 0.0)
        return updates, ScaleByBeliefState(count_inc, mu, nu)
    return GradientTransformation(init_fn, update_fn)


def scale_by_yogi(b1=0.9, b2=0.999, eps=1e-3, eps_root=0.0, initial_accumulator_value=1e-6):
    """Yogi: Adam with an additive (sign-controlled) second-moment update.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_yogi()
        >>> tx.update(jnp.array([1.]), tx.init(jnp.zeros(1)))[0].shape
        (1,)
    """
    def init_fn(params):
        v = tree_full_like(params, initial_accumulator_value)
        return ScaleByAdamState(_count(), v, v)

    def update_fn(updates, state, params=None):
        mu = update_moment(updates, state.mu, b1, 1)
        nu = tu.tree_map(lambda g, v: v - (1 - b2) * jnp.sign(v - _abs_sq(g)) * _abs_sq(g),
                         updates, state.nu)
        count_inc = safe_increment(state.count)
        updates = _adam_divide(_debias(mu, b1, count_inc),
                               _debias(nu, b2, count_inc), eps, eps_root)
        return updates, ScaleByAdamState(count_inc, mu, nu)
    return GradientTransformation(init_fn, update_fn)


def scale_by_radam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, threshold=5.0, *,
                   nesterov=False):
    """RAdam: Adam whose adaptive term is switched on once its variance is tractable.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_radam()
        >>> tx.update(jnp.array([2.]), tx.init(jnp.zeros(1)))[0].round(4)  # early: momentum
        Array([2.], dtype=float32)
    """
    ro_inf = 2.0 / (1.0 - b2) - 1.0

    def init_fn(params):
        return ScaleByAdamState(_count(), tree_zeros_like(params), tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = safe_increment(state.count)
        b2t = b2 ** count_inc
        ro = ro_inf - 2 * count_inc * b2t / (1 - b2t)
        mu_hat = (_nesterov_mu_hat(mu, updates, b1, count_inc) if nesterov
                  else _debias(mu, b1, count_inc))
        nu_hat = _debias(nu, b2, count_inc)
        r = jnp.sqrt((ro - 4.0) * (ro - 2.0) * ro_inf / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro))
        rect = tu.tree_map(lambda m, v: r.astype(m.dtype) * m / (jnp.sqrt(v + eps_root) + eps),
                           mu_hat, nu_hat)
        updates = tu.tree_map(lambda t, f: jnp.where(ro >= threshold, t, f), rect, mu_hat)
        return updates, ScaleByAdamState(count_inc, mu, nu)
    return GradientTransformation(init_fn, update_fn)


class ScaleByNovogradState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


def scale_by_novograd(b1=0.9, b2=0.25, eps=1e-8, eps_root=0.0, weight_decay=0.0,
                      mu_dtype=None):
    """NovoGrad: layer-wise second moments (one scalar per leaf) with decoupled decay.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_novograd()
        >>> p = jnp.ones(2)
        >>> tx.update(jnp.ones(2), tx.init(p), p)[0].shape
        (2,)
    """
    mu_dtype = canonicalize_dtype(mu_dtype)

    def init_fn(params):
        return ScaleByNovogradState(_count(), tree_zeros_like(params, mu_dtype),
                                    tu.tree_map(lambda p: jnp.asarray(0.0, p.dtype), params))

    def nu_add(g):
        return jnp.linalg.norm(g) ** 2

    def mu_add(g, p, nu):
        return g / (jnp.sqrt(nu + eps_root) + eps) + weight_decay * p

    def update_fn(updates, state, params):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        count_inc = safe_increment(state.count)
        # lax.cond as Optax: XLA compiles a branch whole, so a bf16 ``b1 * m`` is not
        # rounded to bf16 before the f32 add (a where of eager ops would round it).
        first = count_inc == 1
        nu = lax.cond(first, lambda u, n: tu.tree_map(lambda g, v: nu_add(g).astype(v.dtype), u, n),
                      lambda u, n: tu.tree_map(lambda g, v: (1 - b2) * nu_add(g) + b2 * v, u, n),
                      updates, state.nu)
        mu = lax.cond(first, lambda u, p, m, n: tu.tree_map(mu_add, u, p, n),
                      lambda u, p, m, n: tu.tree_map(lambda g, q, a, v: b1 * a + mu_add(g, q, v),
                                                     u, p, m, n),
                      updates, params, state.mu, nu)
        mu = tree_cast(mu, mu_dtype)
        return mu, ScaleByNovogradState(count_inc, mu, nu)
    return GradientTransformation(init_fn, update_fn)


class ScaleBySM3State(NamedTuple):
    mu: Any
    nu: Any


def scale_by_sm3(b1=0.9, b2=1.0, eps=1e-8):
    """SM3: memory-efficient adaptivity with one accumulator per tensor axis.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_sm3()
        >>> tx.update(jnp.ones((2, 3)), tx.init(jnp.zeros((2, 3))))[0].shape
        (2, 3)
    """
    def init_fn(params):
        if any(jnp.iscomplexobj(x) for x in tu.tree_leaves(params)):   # as Optax
            raise ValueError("This transformation does not support complex parameters.")
        mu = tu.tree_map(lambda p: [jnp.zeros((p.shape[i],), p.dtype) for i in range(p.ndim)],
                         params)
        return ScaleBySM3State(mu, tree_zeros_like(params))

    def expanded(shape, axis):
        return [1] * axis + [shape[axis]] + [1] * (len(shape) - axis - 1)

    def new_accum(g, v):
        c0 = 1.0 - b2 if b2 != 1.0 else 1.0
        if g.ndim == 0:   # NB: Optax fails on 0-d params; no per-axis history here
            return c0 * g ** 2
        if g.ndim < 2:
            return c0 * g ** 2 + b2 * v[0]
        m = v[0]
        for x in v[1:]:
            m = jnp.minimum(m, x)
        return c0 * g ** 2 + b2 * m

    def new_mu(g, i):
        if g.ndim < 2:
            return g
        return jnp.max(g, axis=tuple(a for a in range(g.ndim) if a != i))

    def update_fn(updates, state, params=None):
        mu = tu.tree_map(lambda g, v: [jnp.reshape(v[i], expanded(g.shape, i))
                                       for i in range(g.ndim)], updates, state.mu)
        accum = tu.tree_map(new_accum, updates, mu)
        inv = tu.tree_map(lambda t: jnp.where(t > 0, lax.rsqrt(t + eps), 0.0), accum)
        up = tu.tree_map(lambda g, a: g * a, updates, inv)
        nu = update_moment(up, state.nu, b1, 1)
        mu = tu.tree_map(lambda g: [new_mu(g, i) for i in range(g.ndim)], accum)
        return nu, ScaleBySM3State(mu, nu)
    return GradientTransformation(init_fn, update_fn)


class FactoredState(NamedTuple):
    count: Any
    v_row: Any
    v_col: Any
    v: Any


def _factored_dims(shape, factored, min_dim_size_to_factor):
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape)
    if shape[order[-2]] < min_dim_size_to_factor:
        return None
    return int(order[-2]), int(order[-1])


def _decay_rate_pow(i, exponent=0.8):
    t = jnp.array(i + 1, jnp.float32)
    return 1.0 - t ** (-exponent)


def scale_by_factored_rms(factored=True, decay_rate=0.8, step_offset=0,
                          min_dim_size_to_factor=128, epsilon=1e-30,
                          decay_rate_fn=_decay_rate_pow):
    """Adafactor's rescaling: second moments kept as row and column factors for
    matrices whose two largest dims are at least ``min_dim_size_to_factor``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_factored_rms(min_dim_size_to_factor=2)
        >>> p = jnp.ones((2, 3))
        >>> tx.init(p).v_row.shape, tx.init(p).v_col.shape
        ((2,), (3,))
    """
    def init_fn(params):
        def rows(p):
            dims = _factored_dims(p.shape, factored, min_dim_size_to_factor)
            if dims is None:
                return jnp.zeros((1,), p.dtype)
            return jnp.zeros(tuple(s for a, s in enumerate(p.shape) if a != dims[1]), p.dtype)

        def cols(p):
            dims = _factored_dims(p.shape, factored, min_dim_size_to_factor)
            if dims is None:
                return jnp.zeros((1,), p.dtype)
            return jnp.zeros(tuple(s for a, s in enumerate(p.shape) if a != dims[0]), p.dtype)

        def full(p):
            if _factored_dims(p.shape, factored, min_dim_size_to_factor) is None:
                return jnp.zeros_like(p)
            return jnp.zeros((1,), p.dtype)
        return FactoredState(_count(), tu.tree_map(rows, params), tu.tree_map(cols, params),
                             tu.tree_map(full, params))

    def one(grad, v_row, v_col, v, param, step):
        dtype = param.dtype
        rate = decay_rate_fn(step - step_offset, decay_rate)
        dims = _factored_dims(param.shape, factored, min_dim_size_to_factor)
        grad_sq = _abs_sq(grad) + epsilon
        z = jnp.zeros((1,), dtype)
        if dims is not None:
            d1, d0 = dims
            new_row = (rate * v_row + (1.0 - rate) * jnp.mean(grad_sq, axis=d0)).astype(dtype)
            new_col = (rate * v_col + (1.0 - rate) * jnp.mean(grad_sq, axis=d1)).astype(dtype)
            reduced_d1 = d1 - 1 if d1 > d0 else d1
            row_col_mean = jnp.mean(new_row, axis=reduced_d1, keepdims=True)
            row_factor = (new_row / row_col_mean) ** (-0.5)
            col_factor = new_col ** (-0.5)
            update = (grad * jnp.expand_dims(row_factor, axis=d0)
                      * jnp.expand_dims(col_factor, axis=d1))
            return update, new_row, new_col, z
        new_v = (rate * v + (1.0 - rate) * grad_sq).astype(dtype)
        return grad * new_v ** (-0.5), z, z, new_v

    def update_fn(grads, state, params):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        treedef = tu.tree_structure(grads)
        out = [one(*a, state.count) for a in zip(
            tu.tree_leaves(grads), treedef.flatten_up_to(state.v_row),
            treedef.flatten_up_to(state.v_col), treedef.flatten_up_to(state.v),
            treedef.flatten_up_to(params))]
        pick = lambda i: tu.tree_unflatten(treedef, [o[i] for o in out])  # noqa: E731
        return pick(0), FactoredState(safe_increment(state.count), pick(1), pick(2), pick(3))
    return GradientTransformation(init_fn, update_fn)
