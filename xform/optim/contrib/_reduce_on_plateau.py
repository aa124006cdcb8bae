"""Reduce-on-plateau (``optax.contrib.reduce_on_plateau``): scale updates down when a
monitored value stops improving."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformationExtraArgs, safe_increment
from xform.optim.tree_utils import tree_dtype


class ReduceLROnPlateauState(NamedTuple):
    """State of :func:`reduce_on_plateau`: the current ``scale``, the ``best_value`` seen,
    the ``plateau_count`` and ``cooldown_count``, and the running average ``avg_value`` of
    the last ``count`` values."""
    scale: Any
    best_value: Any
    plateau_count: Any
    cooldown_count: Any
    count: Any
    avg_value: Any


def reduce_on_plateau(factor=0.1, patience=10, rtol=1e-4, atol=0.0, cooldown=0,
                      accumulation_size=1, min_scale=0.0):
    """Multiply updates by a scale that shrinks by ``factor`` after ``patience`` values
    (each the mean of ``accumulation_size`` calls' ``value=``) without improvement.

    A value improves on the best when ``value < (1 - rtol) * best - atol``.

    Args:
        factor: the scale's multiplier on a plateau, in (0, 1).
        patience: number of non-improving values before reducing.
        rtol: relative improvement threshold (in [0, 1]).
        atol: absolute improvement threshold (>= 0).
        cooldown: number of values to wait after a reduction before counting again.
        accumulation_size: number of ``update`` calls averaged into one value.
        min_scale: the scale never goes below this.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs` whose ``update`` takes the
        monitored ``value=`` keyword.

    Raises:
        ValueError: for ``factor`` outside (0, 1), negative ``rtol``/``atol``, both zero,
            or ``rtol > 1``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.reduce_on_plateau(factor=0.5, patience=1)
        >>> state = tx.init(jnp.zeros(1))
        >>> for v in [1.0, 2.0]:
        ...     u, state = tx.update(jnp.ones(1), state, value=v)
        >>> u
        Array([0.5], dtype=float32)
    """
    if factor <= 0.0 or factor >= 1.0:
        raise ValueError(f"Factor must be in the range (0, 1), got factor = {factor}.")
    if rtol < 0.0 or atol < 0.0:
        raise ValueError("Both rtol and atol must be non-negative, got "
                         f"rtol = {rtol} and atol = {atol}.")
    if rtol == 0.0 and atol == 0.0:
        raise ValueError("At least one of rtol or atol must be positive, got "
                         f"rtol = {rtol} and atol = {atol}.")
    if rtol > 1.0:
        raise ValueError(f"rtol must be less than or equal to 1.0, got rtol = {rtol}.")

    def init_fn(params):
        # the scale in the lowest dtype so it does not promote the updates
        low, high = tree_dtype(params, "lowest"), tree_dtype(params, "highest")
        return ReduceLROnPlateauState(
            scale=jnp.asarray(1.0, low), best_value=jnp.asarray(float("inf"), high),
            plateau_count=jnp.asarray(0, jnp.int32), cooldown_count=jnp.asarray(0, jnp.int32),
            count=jnp.asarray(0, jnp.int32), avg_value=jnp.asarray(0.0, high))

    def update_scale(state):
        avg_value = state.avg_value
        has_improved = jnp.where(avg_value < (1 - rtol) * state.best_value - atol, 1, 0)
        best_value = jnp.where(has_improved, avg_value.astype(state.best_value.dtype),
                               state.best_value)
        plateau = jnp.where(has_improved, 0, safe_increment(state.plateau_count))

        def in_cooldown():
            return jnp.asarray(0, jnp.int32), state.scale, state.cooldown_count - 1

        def not_in_cooldown():
            hit = plateau == patience
            return (jnp.where(hit, 0, plateau),
                    jnp.maximum(jnp.where(hit, state.scale * factor, state.scale), min_scale),
                    jnp.where(hit, cooldown, 0).astype(jnp.int32))

        plateau_count, scale, cooldown_count = lax.cond(state.cooldown_count > 0,
                                                        in_cooldown, not_in_cooldown)
        return ReduceLROnPlateauState(
            scale=scale, best_value=best_value.astype(state.best_value.dtype),
            plateau_count=plateau_count, cooldown_count=cooldown_count,
            count=jnp.asarray(0, jnp.int32), avg_value=jnp.asarray(0.0, avg_value.dtype))

    def update_fn(updates, state, params=None, *, value, **extra_args):
        new_count = safe_increment(state.count)
        avg = (state.count * state.avg_value
               + jnp.asarray(value).astype(state.avg_value.dtype)) / new_count
        state = state._replace(avg_value=avg.astype(state.avg_value.dtype), count=new_count)
        state = lax.cond(new_count == accumulation_size, update_scale, lambda s: s, state)
        return tu.tree_map(lambda g: state.scale * g, updates), state
    return GradientTransformationExtraArgs(init_fn, update_fn)


__all__ = ["ReduceLROnPlateauState", "reduce_on_plateau"]
