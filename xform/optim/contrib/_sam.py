"""Sharpness-Aware Minimization (``optax.contrib.sam``): adversarial inner steps wrapped
around an outer optimizer, plus the ``normalize`` transformation it is usually paired with."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import (EmptyState, GradientTransformation,
                               GradientTransformationExtraArgs, apply_updates, tree_norm)

NormalizeState = EmptyState


def normalize():
    """Divide the updates by their global L2 norm.

    Returns:
        A stateless :class:`~xform.optim.GradientTransformation`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.normalize()
        >>> tx.update(jnp.array([3., 4.]), tx.init(None))[0]
        Array([0.6, 0.8], dtype=float32)
    """
    def init_fn(params):
        return NormalizeState()

    def update_fn(updates, state, params=None):
        g_norm = tree_norm(updates)
        return tu.tree_map(lambda g: g / g_norm, updates), state
    return GradientTransformation(init_fn, update_fn)


class SAMState(NamedTuple):
    """State of :func:`sam`.

    Attributes:
        steps_since_sync: adversarial steps taken since the last outer update.
        opt_state: the outer optimizer's state.
        adv_state: the adversarial optimizer's state.
        cache: the params at the last outer update (None in opaque mode).
    """
    steps_since_sync: Any
    opt_state: Any
    adv_state: Any
    cache: Any


def sam(optimizer, adv_optimizer, sync_period=2, reset_state=True, opaque_mode=False,
        batch_axis_name=None):
    """Sharpness-Aware Minimization (Foret et al., 2021).

    Takes ``sync_period - 1`` steps with ``adv_optimizer`` (ascending the loss) and then
    one step of ``optimizer`` from the params cached before them, using the gradient at
    the adversarial point.

    Args:
        optimizer: the outer optimizer.
        adv_optimizer: the adversarial optimizer (e.g. ``chain(normalize(), sgd(rho))``).
        sync_period: steps per outer update (>= 1).
        reset_state: re-initialize ``adv_optimizer``'s state after every outer update.
        opaque_mode: run the adversarial steps inside one ``update`` call, which then
            needs ``grad_fn=lambda params, i: grads``; otherwise each call is one step and
            the adversarial params are visible to the caller.
        batch_axis_name: in opaque mode under ``pmap``, the axis over which to
            ``pmean`` the adversarial gradients.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Raises:
        ValueError: if ``sync_period < 1``, or in opaque mode when ``update`` gets no
            ``grad_fn``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> adv = optax.chain(optax.contrib.normalize(), optax.sgd(0.1))
        >>> tx = optax.contrib.sam(optax.sgd(0.01), adv, sync_period=2)
        >>> int(tx.init(jnp.zeros(2)).steps_since_sync)
        0
    """
    if sync_period < 1:
        raise ValueError("Synchronization period must be >= 1.")

    def init_fn(params):
        return SAMState(jnp.zeros((), jnp.int32), optimizer.init(params),
                        adv_optimizer.init(params), None if opaque_mode else params)

    def pick_one(cond, if_true, if_false):
        return tu.tree_map(lambda t, f: cond * t + (1 - cond) * f, if_true, if_false)

    def transparent_update_fn(updates, state, params, *, grad_fn=None):
        first_step = state.steps_since_sync == 0
        last_step = state.steps_since_sync == sync_period - 1
        adv_updates, adv_state = adv_optimizer.update(updates, state.adv_state, params)
        adv_updates = tu.tree_map(lambda x: -x, adv_updates)
        opt_updates, opt_state = optimizer.update(updates, state.opt_state, state.cache)
        # the outer step starts from the cached params, not the adversarial ones
        opt_updates = tu.tree_map(lambda c, p, u: c - p + u, state.cache, params, opt_updates)
        cache = pick_one(first_step, params, state.cache)
        updates = pick_one(last_step, opt_updates, adv_updates)
        if reset_state:
            adv_state = pick_one(last_step, adv_optimizer.init(params), adv_state)
        else:
            adv_state = pick_one(last_step, state.adv_state, adv_state)
        opt_state = pick_one(last_step, opt_state, state.opt_state)
        return updates, SAMState((state.steps_since_sync + 1) % sync_period, opt_state,
                                 adv_state, cache)

    def opaque_update_fn(updates, state, params, *, grad_fn=None):
        if grad_fn is None:
            raise ValueError("grad_fn must be provided when opaque_mode=True.")
        adv_params, adv_updates, adv_state = params, updates, state.adv_state
        for i in range(sync_period - 1):
            adv_updates, adv_state = adv_optimizer.update(adv_updates, adv_state, adv_params)
            adv_updates = tu.tree_map(lambda x: -x, adv_updates)
            adv_params = apply_updates(adv_params, adv_updates)
            adv_updates = grad_fn(adv_params, i)
            if batch_axis_name is not None:
                adv_updates = lax.pmean(adv_updates, axis_name=batch_axis_name)
        if reset_state:
            adv_state = adv_optimizer.init(params)
        updates, opt_state = optimizer.update(adv_updates, state.opt_state, params)
        return updates, SAMState(jnp.zeros((), jnp.int32), opt_state, adv_state, None)

    return GradientTransformationExtraArgs(
        init_fn, opaque_update_fn if opaque_mode else transparent_update_fn)


__all__ = ["NormalizeState", "normalize", "SAMState", "sam"]
