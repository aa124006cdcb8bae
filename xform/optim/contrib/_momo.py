"""MoMo (Schaipp et al., 2023): momentum SGD and Adam with a Polyak-type adaptive step
size built from the loss value and a lower bound on it."""
from typing import Any, NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import (GradientTransformationExtraArgs, NO_PARAMS_MSG,
                               safe_increment, tree_norm, tree_zeros_like)
from xform.optim.contrib._common import value_or_schedule
from xform.optim.tree_utils import tree_dtype, tree_vdot

_NO_VALUE_MSG = ("You need to pass the latest loss value to Momo.\n"
                 "                       Use ``jax.value_and_grad`` for this.")
_EPS = float(np.finfo(float).eps)


class MomoState(NamedTuple):
    """State of :func:`momo`: the gradient EMA ``exp_avg``, the loss EMA ``barf``, the
    EMA ``gamma`` of ``<g, x>``, the loss lower bound ``lb`` and the step ``count``."""
    exp_avg: Any
    barf: Any
    gamma: Any
    lb: Any
    count: Any


def _check(params, value):
    if params is None:
        raise ValueError(NO_PARAMS_MSG)
    if value is None:
        raise ValueError(_NO_VALUE_MSG)


def momo(learning_rate=1.0, beta=0.9, lower_bound=0.0, weight_decay=0.0,
         adapt_lower_bound=False):
    """MoMo: SGD with momentum and step ``min(learning_rate, polyak_step)``.

    Pass the current loss as ``update(..., value=loss)``. The returned updates include
    the (decoupled) weight decay.

    Args:
        learning_rate: the largest step size (a float or a schedule).
        beta: momentum (EMA) coefficient.
        lower_bound: a lower bound of the loss (0 fits most losses).
        weight_decay: weight-decay parameter.
        adapt_lower_bound: estimate the lower bound on the fly.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Raises:
        ValueError: if ``update`` gets no ``params`` or no ``value``.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> f = lambda x: jnp.sum(x ** 2)
        >>> tx = optax.contrib.momo()
        >>> p = jnp.array([1., 2., 3.])
        >>> v, g = xform.value_and_grad(f)(p)
        >>> u, _ = tx.update(g, tx.init(p), p, value=v)
        >>> float(f(optax.apply_updates(p, u)))
        3.5
    """
    def init_fn(params):
        dtype = tree_dtype(params, "lowest")
        return MomoState(tree_zeros_like(params), jnp.zeros([], dtype), jnp.zeros([], dtype),
                         jnp.array(lower_bound, dtype), jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params, *, value, **extra_args):
        _check(params, value)
        count = state.count
        bt = jnp.where(count == 0, 0.0, beta)
        barf = bt * state.barf + (1 - bt) * jnp.asarray(value, dtype=state.barf.dtype)
        exp_avg = tu.tree_map(lambda ea, g: bt * ea + (1 - bt) * g, state.exp_avg, updates)
        gamma = bt * state.gamma + (1 - bt) * tree_vdot(updates, params)
        exp_avg_norm = tree_norm(exp_avg, squared=True)
        iprod = tree_vdot(exp_avg, params)
        alpha = value_or_schedule(learning_rate, count)
        decay = 1 + alpha * weight_decay
        if adapt_lower_bound:
            cap = decay * (barf - gamma) + iprod
            this_lb = lax.cond(cap < decay * state.lb,
                               lambda: jnp.maximum(cap / (2 * decay), lower_bound),
                               lambda: state.lb)
        else:
            this_lb = state.lb
        t1 = jnp.maximum(decay * (barf - this_lb - gamma) + iprod, 0.0) / exp_avg_norm
        t1 = jnp.where(exp_avg_norm <= _EPS, 0.0, t1)
        tau = jnp.minimum(alpha, t1)
        p_update = tu.tree_map(lambda ea, p: -(alpha * weight_decay) / decay * p - tau * ea,
                               exp_avg, params)
        if adapt_lower_bound:
            new_lb = jnp.maximum((barf + iprod - gamma) - (1 / 2) * tau * exp_avg_norm,
                                 lower_bound)
        else:
            new_lb = state.lb
        return p_update, MomoState(exp_avg, barf, gamma, new_lb, safe_increment(count))
    return GradientTransformationExtraArgs(init_fn, update_fn)


class MomoAdamState(NamedTuple):
    """State of :func:`momo_adam`: :class:`MomoState` plus the squared-gradient EMA
    ``exp_avg_sq``."""
    exp_avg: Any
    exp_avg_sq: Any
    barf: Any
    gamma: Any
    lb: Any
    count: Any


def momo_adam(learning_rate=1e-2, b1=0.9, b2=0.999, eps=1e-8, lower_bound=0.0,
              weight_decay=0.0, adapt_lower_bound=False):
    """MoMo-Adam: Adam(W) with step ``min(learning_rate, polyak_step)``.

    Pass the current loss as ``update(..., value=loss)``.

    Args:
        learning_rate: the largest step size (a float or a schedule).
        b1: decay of the first moment.
        b2: decay of the second moment.
        eps: Adam's epsilon.
        lower_bound: a lower bound of the loss.
        weight_decay: AdamW-style weight decay.
        adapt_lower_bound: estimate the lower bound on the fly.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Raises:
        ValueError: if ``update`` gets no ``params`` or no ``value``.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.momo_adam()
        >>> p = jnp.array([1., 2.])
        >>> u, state = tx.update(p, tx.init(p), p, value=2.5)
        >>> int(state.count)
        1
    """
    def init_fn(params):
        dtype = tree_dtype(params, "lowest")
        return MomoAdamState(tree_zeros_like(params), tree_zeros_like(params),
                             jnp.zeros([], dtype), jnp.zeros([], dtype),
                             jnp.array(lower_bound, dtype), jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params, *, value, **extra_args):
        _check(params, value)
        count = state.count
        count_inc = safe_increment(count)
        barf = b1 * state.barf + (1 - b1) * jnp.asarray(value, dtype=state.barf.dtype)
        exp_avg = tu.tree_map(lambda ea, g: b1 * ea + (1 - b1) * g, state.exp_avg, updates)
        exp_avg_sq = tu.tree_map(lambda eas, g: b2 * eas + (1 - b2) * g * g,
                                 state.exp_avg_sq, updates)
        bc2 = jnp.asarray(1 - b2 ** count_inc, dtype=barf.dtype)
        precond = tu.tree_map(lambda eas: eps + jnp.sqrt(eas / bc2), exp_avg_sq)
        exp_avg_norm = tree_vdot(exp_avg, tu.tree_map(lambda ea, pr: ea / pr, exp_avg,
                                                      precond))
        gamma = b1 * state.gamma + (1 - b1) * tree_vdot(updates, params)
        iprod = tree_vdot(exp_avg, params)
        alpha = value_or_schedule(learning_rate, count)
        bc1 = jnp.asarray(1 - b1 ** count_inc, dtype=barf.dtype)
        decay = 1 + alpha * weight_decay
        if adapt_lower_bound:
            cap = decay * (barf - gamma) + iprod
            this_lb = jnp.where(cap < decay * bc1 * state.lb,
                                jnp.maximum(cap / (2 * bc1 * decay), lower_bound), state.lb)
        else:
            this_lb = state.lb
        t1 = jnp.maximum(decay * (barf - bc1 * this_lb - gamma) + iprod, 0.0) / exp_avg_norm
        t1 = jnp.where(exp_avg_norm <= _EPS, 0.0, t1)
        tau = jnp.minimum(alpha / bc1, t1)
        p_update = tu.tree_map(
            lambda ea, pr, p: -(alpha * weight_decay) / decay * p - tau * ea / pr,
            exp_avg, precond, params)
        if adapt_lower_bound:
            new_lb = jnp.maximum(((barf + iprod - gamma) - (1 / 2) * tau * exp_avg_norm) / bc1,
                                 lower_bound)
        else:
            new_lb = state.lb
        return p_update, MomoAdamState(exp_avg, exp_avg_sq, barf, gamma, new_lb, count_inc)
    return GradientTransformationExtraArgs(init_fn, update_fn)


__all__ = ["MomoState", "momo", "MomoAdamState", "momo_adam"]
