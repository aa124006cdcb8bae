"""Learning-rate-free AdamW by distance estimation: D-Adaptation (Defazio & Mishchenko,
2023) and Prodigy (Mishchenko & Defazio, 2023)."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.optim._base import (GradientTransformationExtraArgs, NO_PARAMS_MSG,
                               safe_increment, tree_norm, tree_zeros_like)
from xform.optim.contrib._common import value_or_schedule
from xform.optim.tree_utils import tree_dtype, tree_vdot


class DAdaptAdamWState(NamedTuple):
    """State of :func:`dadapt_adamw`."""
    exp_avg: Any
    exp_avg_sq: Any
    grad_sum: Any
    estim_lr: Any
    numerator_weighted: Any
    count: Any


def dadapt_adamw(learning_rate=1.0, betas=(0.9, 0.999), eps=1e-8, estim_lr0=1e-6,
                 weight_decay=0.0):
    """AdamW whose base learning rate is estimated on the fly by D-Adaptation.

    The estimate ``d`` of the distance to the solution (in the infinity norm) only grows;
    ``learning_rate`` multiplies it and is best a schedule around 1.0.

    Args:
        learning_rate: a float or a schedule multiplying the estimated step size.
        betas: AdamW's ``(b1, b2)``.
        eps: AdamW's epsilon.
        estim_lr0: initial (under-)estimate of the learning rate.
        weight_decay: AdamW-style decoupled weight decay.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs` whose ``update`` needs
        ``params``.

    Raises:
        ValueError: if ``update`` is called without ``params``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.dadapt_adamw()
        >>> tx.init(jnp.zeros(2)).estim_lr.dtype
        dtype('float32')
    """
    def init_fn(params):
        dtype = tree_dtype(params, "lowest")
        return DAdaptAdamWState(tree_zeros_like(params), tree_zeros_like(params),
                                tree_zeros_like(params), jnp.asarray(estim_lr0, dtype),
                                jnp.zeros([], dtype), jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        beta1, beta2 = betas
        sb2 = beta2 ** 0.5
        sched = value_or_schedule(learning_rate, state.count)
        count_inc = safe_increment(state.count)
        bc = ((1 - beta2 ** count_inc) ** 0.5) / (1 - beta1 ** count_inc)
        dlr = (state.estim_lr * sched * bc).astype(state.numerator_weighted.dtype)
        s_weighted = tu.tree_map(lambda sk, eas: sk / (jnp.sqrt(eas) + eps),
                                 state.grad_sum, state.exp_avg_sq)
        numerator_acum = tree_vdot(updates, s_weighted)
        exp_avg = tu.tree_map(lambda ea, g: beta1 * ea + (1 - beta1) * dlr * g,
                              state.exp_avg, updates)
        exp_avg_sq = tu.tree_map(lambda eas, g: beta2 * eas + (1 - beta2) * g * g,
                                 state.exp_avg_sq, updates)
        grad_sum = tu.tree_map(lambda sk, g: sb2 * sk + (1 - sb2) * dlr * g,
                               state.grad_sum, updates)
        numerator_weighted = sb2 * state.numerator_weighted + (1 - sb2) * dlr * numerator_acum
        d_estimate = numerator_weighted / ((1 - sb2) * tree_norm(grad_sum, ord=1))
        estim_lr = jnp.maximum(state.estim_lr, d_estimate)
        p_update = tu.tree_map(
            lambda ea, eas, p: -weight_decay * dlr * p - ea / (jnp.sqrt(eas) + eps),
            exp_avg, exp_avg_sq, params)
        return p_update, DAdaptAdamWState(exp_avg, exp_avg_sq, grad_sum, estim_lr,
                                          numerator_weighted, count_inc)
    return GradientTransformationExtraArgs(init_fn, update_fn)


class ProdigyState(NamedTuple):
    """State of :func:`prodigy`."""
    exp_avg: Any
    exp_avg_sq: Any
    grad_sum: Any
    params0: Any
    estim_lr: Any
    numerator_weighted: Any
    count: Any


def prodigy(learning_rate=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8, estim_lr0=1e-6,
            estim_lr_coef=1.0, weight_decay=0.0, safeguard_warmup=False):
    """Prodigy: learning-rate-free AdamW, a D-Adaptation variant weighting recent
    gradients more so the step-size estimate grows faster.

    Args:
        learning_rate: a float or a schedule multiplying the estimated step size (best a
            schedule around 1.0, e.g. linear decay with warmup).
        betas: AdamW's ``(b1, b2)``.
        beta3: decay of the distance estimate's statistics (default ``sqrt(b2)``).
        eps: AdamW's epsilon.
        estim_lr0: initial (under-)estimate of the learning rate.
        estim_lr_coef: multiplies the learning-rate estimates.
        weight_decay: AdamW-style decoupled weight decay.
        safeguard_warmup: leave the learning rate out of the estimate's denominator
            (helps during warmup).

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs` whose ``update`` needs
        ``params``.

    Raises:
        ValueError: if ``update`` is called without ``params``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.prodigy()
        >>> p = jnp.array([1., 2.])
        >>> u, state = tx.update(jnp.array([1., -1.]), tx.init(p), p)
        >>> int(state.count)
        1
    """
    beta1, beta2 = betas
    if beta3 is None:
        beta3 = beta2 ** 0.5

    def init_fn(params):
        dtype = tree_dtype(params, "lowest")
        return ProdigyState(tree_zeros_like(params), tree_zeros_like(params),
                            tree_zeros_like(params), params, jnp.asarray(estim_lr0, dtype),
                            jnp.zeros((), dtype), jnp.zeros((), jnp.int32))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        count_inc = safe_increment(state.count)
        sched = value_or_schedule(learning_rate, state.count)
        estim_lr = state.estim_lr
        bc = ((1 - beta2 ** count_inc) ** 0.5) / (1 - beta1 ** count_inc)
        dlr = jnp.asarray(estim_lr * sched * bc, dtype=estim_lr.dtype)
        dg = tu.tree_map(lambda g: estim_lr * g, updates)
        param_diff = tu.tree_map(lambda p0, p: p0 - p, state.params0, params)
        numerator_acum = tree_vdot(updates, param_diff)
        exp_avg = tu.tree_map(lambda ea, d: beta1 * ea + (1 - beta1) * d, state.exp_avg, dg)
        exp_avg_sq = tu.tree_map(lambda eas, d: beta2 * eas + (1 - beta2) * d * d,
                                 state.exp_avg_sq, dg)
        step = estim_lr if safeguard_warmup else dlr
        grad_sum = tu.tree_map(lambda sk, d: beta3 * sk + step * d / estim_lr0,
                               state.grad_sum, dg)
        numerator_weighted = beta3 * state.numerator_weighted
        numerator_weighted += (estim_lr / estim_lr0) * dlr * numerator_acum
        lr_estimate = estim_lr_coef * numerator_weighted / tree_norm(grad_sum, ord=1)
        new_estim_lr = jnp.maximum(estim_lr, lr_estimate)
        p_update = tu.tree_map(
            lambda ea, eas, p: (-weight_decay * dlr * p
                                - dlr * ea / (jnp.sqrt(eas) + new_estim_lr * eps)),
            exp_avg, exp_avg_sq, params)  # the new estimate, as Optax (it rebinds estim_lr)
        return p_update, ProdigyState(exp_avg, exp_avg_sq, grad_sum, state.params0,
                                      new_estim_lr, numerator_weighted, count_inc)
    return GradientTransformationExtraArgs(init_fn, update_fn)


__all__ = ["DAdaptAdamWState", "dadapt_adamw", "ProdigyState", "prodigy"]
