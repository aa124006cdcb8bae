"""COCOB-Backprop (Orabona & Tommasi, 2017): learning-rate-free descent by continuous
coin betting."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformation, chain, tree_zeros_like
from xform.optim._basic import add_decayed_weights, scale_by_learning_rate


class COCOBState(NamedTuple):
    """State of :func:`scale_by_cocob`."""
    init_particles: Any
    cumulative_gradients: Any
    scale: Any
    subgradients: Any
    reward: Any


def scale_by_cocob(alpha=100.0, eps=1e-8):
    """Replace updates by the COCOB-Backprop step (Algorithm 2 of Orabona & Tommasi).

    Args:
        alpha: the fraction-to-bet parameter.
        eps: initial gradient scale (keeps the first step finite).

    Returns:
        A :class:`~xform.optim.GradientTransformation` whose ``update`` needs ``params``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.scale_by_cocob()
        >>> p = jnp.zeros(1)
        >>> tx.update(jnp.array([1.]), tx.init(p), p)[0]
        Array([-0.01], dtype=float32)
    """
    def init_fn(params):
        zeros = tree_zeros_like(params)
        scale = tu.tree_map(lambda x: eps * jnp.ones_like(x), params)
        return COCOBState(params, zeros, scale, zeros, zeros)

    def update_fn(updates, state, params):
        scale = tu.tree_map(lambda L, c: jnp.maximum(L, jnp.abs(c)), state.scale, updates)
        subgradients = tu.tree_map(lambda G, c: G + jnp.abs(c), state.subgradients, updates)
        reward = tu.tree_map(lambda R, c, p, p0: jnp.maximum(R - c * (p - p0), 0),
                             state.reward, updates, params, state.init_particles)
        cumulative = tu.tree_map(lambda C, c: C - c, state.cumulative_gradients, updates)
        new_updates = tu.tree_map(
            lambda p, p0, C, L, G, R: -p + (p0 + C / (L * jnp.maximum(G + L, alpha * L))
                                            * (L + R)),
            params, state.init_particles, cumulative, scale, subgradients, reward)
        return new_updates, COCOBState(state.init_particles, cumulative, scale, subgradients,
                                       reward)
    return GradientTransformation(init_fn, update_fn)


def cocob(learning_rate=1.0, alpha=100.0, eps=1e-8, weight_decay=0.0, mask=None):
    """COCOB-Backprop: weight decay, an optional gradient scale, then
    :func:`scale_by_cocob` (no learning rate to tune).

    Args:
        learning_rate: multiplies the gradients before betting (e.g. to inject a schedule).
        alpha: the fraction-to-bet parameter.
        eps: initial gradient scale.
        weight_decay: L2 penalty added to the gradient.
        mask: pytree of bools (or a function returning one) selecting leaves to decay.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.cocob()
        >>> p = jnp.zeros(1)
        >>> tx.update(jnp.array([1.]), tx.init(p), p)[0]
        Array([-0.01], dtype=float32)
    """
    return chain(add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate, flip_sign=False),
                 scale_by_cocob(alpha, eps))


__all__ = ["COCOBState", "scale_by_cocob", "cocob"]
