"""Schedule-Free learning (Defazio et al., 2024): interpolation and averaging in place of
momentum and learning-rate decay, as a wrapper and as SGD/AdamW shortcuts."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.optim._alias import sgd
from xform.optim._base import (GradientTransformationExtraArgs, chain, safe_increment,
                               tree_cast, with_extra_args_support)
from xform.optim._basic import add_decayed_weights, scale_by_learning_rate
from xform.optim._scaling import scale_by_rms
from xform.optim.tree_utils import tree_dtype
from xform.optim.schedules import warmup_constant_schedule


class ScheduleFreeState(NamedTuple):
    """State of :func:`schedule_free`: ``b1``, the averaging ``weight_sum``, the
    ``step_count`` (from 1), the largest learning rate so far ``max_lr``, the base
    optimizer's state and the ``z`` sequence."""
    b1: Any
    weight_sum: Any
    step_count: Any
    max_lr: Any
    base_optimizer_state: Any
    z: Any


def schedule_free_eval_params(state, params):
    """The params to evaluate at (the averaged ``x`` sequence) for a
    :func:`schedule_free` state: ``(y - (1 - b1) * z) / b1``.

    Args:
        state: a :class:`ScheduleFreeState`.
        params: the current (training) params ``y``.

    Returns:
        The evaluation params, shaped like ``params``.

    Raises:
        ValueError: if ``state`` has no ``b1``/``z`` fields set.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.schedule_free_sgd()
        >>> p = jnp.ones(2)
        >>> optax.contrib.schedule_free_eval_params(tx.init(p), p)
        Array([1., 1.], dtype=float32)
    """
    b1, z = getattr(state, "b1"), getattr(state, "z")
    if b1 is None or z is None:
        raise ValueError("schedule_free_eval_params requires a ScheduleFreeState as input.")
    return tu.tree_map(lambda y, zi: (y - (1.0 - b1) * zi) / b1, params, z)


def schedule_free(base_optimizer, learning_rate, b1=0.9, weight_lr_power=2.0,
                  state_dtype=None):
    """Make ``base_optimizer`` schedule-free.

    With ``y`` the params the gradient is taken at, ``z`` the base optimizer's iterates
    and ``x`` their weighted average: ``z <- z + base_update(grad(y))``,
    ``x <- (1 - c) x + c z``, ``y = b1 x + (1 - b1) z``. Turn off the base optimizer's
    momentum (``b1=0``) and evaluate at :func:`schedule_free_eval_params`.

    Args:
        base_optimizer: the optimizer producing the ``z`` steps.
        learning_rate: the same learning rate (or warmup schedule) as the base optimizer.
        b1: interpolation between ``x`` and ``z`` (must be > 0).
        weight_lr_power: the averaging weight of a step is ``max_lr ** weight_lr_power``.
        state_dtype: dtype of the ``z`` sequence.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.schedule_free(optax.sgd(0.1), 0.1)
        >>> p = jnp.ones(1)
        >>> tx.update(jnp.ones(1), tx.init(p), p)[0].round(4)
        Array([-0.09999999], dtype=float32)
    """
    base_optimizer = with_extra_args_support(base_optimizer)

    def init_fn(params):
        dtype = tree_dtype(params, "lowest")
        z = tu.tree_map(lambda t: jnp.array(t, copy=True), tree_cast(params, state_dtype))
        return ScheduleFreeState(jnp.asarray(b1, dtype), jnp.zeros([], dtype),
                                 jnp.ones([], jnp.int32), jnp.zeros([], dtype),
                                 base_optimizer.init(params), z)

    def update_fn(grads, state, params=None, **extra_args):
        lr = learning_rate
        if callable(learning_rate):
            lr = jnp.asarray(learning_rate(state.step_count), dtype=state.max_lr.dtype)
        max_lr = jnp.maximum(state.max_lr, lr)
        weight = max_lr ** weight_lr_power
        next_total_weight = state.weight_sum + weight
        ck = jnp.where(jnp.logical_or(jnp.isnan(weight), jnp.isnan(next_total_weight)),
                       jnp.full(weight.shape, jnp.nan),
                       jnp.nan_to_num(weight / next_total_weight, nan=0.0, posinf=jnp.inf))
        base_updates, base_state = base_optimizer.update(grads, state.base_optimizer_state,
                                                         params, **extra_args)
        z = tu.tree_map(lambda p, u: jnp.asarray(p + u).astype(jnp.asarray(p).dtype),
                        state.z, base_updates)
        prev_x = tu.tree_map(lambda y, zi: (y - (1.0 - b1) * zi) / b1, params, state.z)
        x = tu.tree_map(lambda xi, zi: (1.0 - ck) * xi + ck * zi, prev_x, z)
        new_params = tu.tree_map(lambda xi, zi: b1 * xi + (1.0 - b1) * zi, x, z)
        updates = tu.tree_map(lambda n, p: n - p, new_params, params)
        return updates, ScheduleFreeState(state.b1, next_total_weight,
                                          safe_increment(state.step_count), max_lr,
                                          base_state, z)
    return GradientTransformationExtraArgs(init_fn, update_fn)


def _warmup(learning_rate, warmup_steps):
    if warmup_steps is None:
        return learning_rate
    return warmup_constant_schedule(init_value=0, peak_value=learning_rate,
                                    warmup_steps=warmup_steps)


def schedule_free_sgd(learning_rate=1.0, warmup_steps=None, b1=0.9, weight_decay=None,
                      weight_lr_power=2.0, state_dtype=None):
    """Schedule-free SGD: :func:`schedule_free` around ``sgd(learning_rate)``.

    Args:
        learning_rate: SGD's learning rate.
        warmup_steps: length of a linear warmup from 0 (None: no warmup).
        b1: interpolation parameter (> 0).
        weight_decay: weight decay added to the gradient before SGD (None: none).
        weight_lr_power: see :func:`schedule_free`.
        state_dtype: dtype of the ``z`` sequence.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.schedule_free_sgd(0.5)
        >>> p = jnp.ones(1)
        >>> tx.update(jnp.ones(1), tx.init(p), p)[0]
        Array([-0.5], dtype=float32)
    """
    learning_rate = _warmup(learning_rate, warmup_steps)
    optimizer = sgd(learning_rate)
    if weight_decay is not None:
        optimizer = chain(add_decayed_weights(weight_decay), optimizer)
    return schedule_free(optimizer, learning_rate=learning_rate, b1=b1,
                         weight_lr_power=weight_lr_power, state_dtype=state_dtype)


def schedule_free_adamw(learning_rate=0.0025, warmup_steps=None, b1=0.9, b2=0.999, eps=1e-8,
                        weight_decay=0.0, weight_lr_power=2.0, state_dtype=None):
    """Schedule-free AdamW: :func:`schedule_free` around AdamW without momentum
    (``scale_by_rms(b2, eps, eps_in_sqrt=False, bias_correction=True)``, which is Adam
    with ``b1=0`` minus its always-zero first moment).

    Args:
        learning_rate: AdamW's learning rate.
        warmup_steps: length of a linear warmup from 0 (None: no warmup).
        b1: interpolation parameter (> 0).
        b2: decay of the second moment.
        eps: added to the denominator.
        weight_decay: decoupled weight decay.
        weight_lr_power: see :func:`schedule_free`.
        state_dtype: dtype of the ``z`` sequence.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.schedule_free_adamw(1.0)
        >>> p = jnp.ones(1)
        >>> tx.update(jnp.ones(1), tx.init(p), p)[0].round(4)
        Array([-1.], dtype=float32)
    """
    learning_rate = _warmup(learning_rate, warmup_steps)
    optimizer = chain(scale_by_rms(decay=b2, eps=eps, eps_in_sqrt=False, bias_correction=True),
                      add_decayed_weights(weight_decay),
                      scale_by_learning_rate(learning_rate))
    return schedule_free(optimizer, learning_rate=learning_rate, b1=b1,
                         weight_lr_power=weight_lr_power, state_dtype=state_dtype)


__all__ = ["ScheduleFreeState", "schedule_free", "schedule_free_eval_params",
           "schedule_free_sgd", "schedule_free_adamw"]
