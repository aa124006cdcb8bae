"""Mechanic (Cutkosky et al., 2023): a wrapper that learns the scale of another
optimizer's updates (its learning rate) online."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import (GradientTransformationExtraArgs, NO_PARAMS_MSG,
                               safe_increment, tree_norm, with_extra_args_support)
from xform.optim.tree_utils import tree_dtype, tree_vdot


class MechanicState(NamedTuple):
    """State of :func:`mechanize`: the base optimizer's state, the step ``count``, the
    per-beta statistics ``r``, ``m``, ``v``, ``s`` and the reference params ``x0``."""
    base_optimizer_state: Any
    count: Any
    r: Any
    m: Any
    v: Any
    s: Any
    x0: Any


def mechanize(base_optimizer, weight_decay=1e-2, eps=1e-8, s_init=1e-6, num_betas=6):
    """Mechanic: learn the step size of ``base_optimizer`` (a black-box learning-rate tuner).

    Use the base optimizer with a learning rate (or schedule peak) of 1.0; Mechanic
    learns the scale ``sum(s)`` applied to its accumulated updates.

    Args:
        base_optimizer: the optimizer whose updates are rescaled.
        weight_decay: Mechanic's own weight decay (independent of the base optimizer's).
        eps: added to denominators.
        s_init: initial scale.
        num_betas: number of EMA decays tried at once: ``1 - 0.1**k`` for ``k=1..num_betas``.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs` whose ``update`` needs
        ``params``.

    Raises:
        ValueError: if ``update`` is called without ``params``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.mechanize(optax.sgd(1.0), num_betas=3)
        >>> tx.init(jnp.zeros(2)).s
        Array([1.e-06, 1.e-06, 1.e-06], dtype=float32)
    """
    base_optimizer = with_extra_args_support(base_optimizer)

    def init_fn(params):
        dtype = tree_dtype(params, "lowest")
        zeros = lambda: jnp.zeros([num_betas], dtype)  # noqa: E731
        return MechanicState(base_optimizer.init(params), jnp.zeros([], jnp.int32), zeros(),
                             zeros(), zeros(), jnp.ones([num_betas], dtype) * s_init, params)

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        count_inc = safe_increment(state.count)
        new_neg_updates, base_state = base_optimizer.update(
            updates, state.base_optimizer_state, params, **extra_args)
        x0 = lax.cond(state.count == 0, lambda: params, lambda: state.x0)
        s_sum = jnp.sum(state.s)
        grad_norm, param_norm = tree_norm(updates), tree_norm(params)
        updates = tu.tree_map(
            lambda g, p: g + weight_decay * s_sum * grad_norm / (param_norm + eps) * p,
            updates, params)
        delta_prev = tu.tree_map(lambda xt, x0i: (x0i - xt) / (s_sum + eps), params, x0)
        delta = tu.tree_map(lambda d, u: d - u, delta_prev, new_neg_updates)
        h = tree_vdot(updates, delta_prev)
        clipped_h = lax.clamp(-state.m, jnp.ones_like(state.m) * h, state.m)
        betas = jnp.array([1.0 - 0.1 ** k for k in range(1, num_betas + 1)],
                          dtype=state.s.dtype)
        m = jnp.maximum(betas * state.m, jnp.abs(h) + eps)
        v = (betas ** 2) * state.v + h ** 2
        r = betas * state.r + clipped_h * state.s
        wealth = (s_init / jnp.size(betas)) * m + jnp.maximum(0.0, r)
        s = wealth / (jnp.sqrt(v) + eps)
        new_params = tu.tree_map(lambda x0i, d: x0i - jnp.sum(s) * d, x0, delta)
        new_neg_updates = tu.tree_map(lambda n, p: n - p, new_params, params)
        return new_neg_updates, MechanicState(base_state, count_inc, r, m, v, s, x0)
    return GradientTransformationExtraArgs(init_fn, update_fn)


__all__ = ["MechanicState", "mechanize"]
