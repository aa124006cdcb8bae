"""AdEMAMix (Pagliardini et al., 2024) and its simplified variant (Morwani et al., 2025):
Adam with a mixture of a fast and a slow momentum."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.optim._base import (GradientTransformation, bias_correction, canonicalize_dtype,
                               chain, safe_increment, tree_zeros_like, update_moment,
                               update_moment_per_elem_norm)
from xform.optim._basic import add_decayed_weights, scale_by_learning_rate
from xform.optim.contrib._common import value_or_schedule


class ScaleByAdemamixState(NamedTuple):
    """State of :func:`scale_by_ademamix`.

    Attributes:
        count: steps taken (drives the fast EMA and the second moment).
        count_m2: steps taken (drives the schedules of ``b3`` and ``alpha``).
        m1: fast EMA of the gradients.
        m2: slow EMA of the gradients.
        nu: EMA of the squared gradients.
    """
    count: Any
    count_m2: Any
    m1: Any
    m2: Any
    nu: Any


def scale_by_ademamix(b1=0.9, b2=0.999, b3=0.9999, alpha=6.0, eps=1e-8, eps_root=0.0,
                      mu_dtype=None):
    """Rescale updates by AdEMAMix: ``(m1_hat + alpha * m2) / (sqrt(nu_hat + eps_root) + eps)``.

    Args:
        b1: decay of the fast EMA.
        b2: decay of the second moment.
        b3: decay of the slow EMA (a float or a schedule).
        alpha: weight of the slow EMA (a float or a schedule).
        eps: added to the denominator outside the square root.
        eps_root: added inside the square root.
        mu_dtype: dtype of the accumulators.

    Returns:
        A :class:`~xform.optim.GradientTransformation`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.scale_by_ademamix(alpha=0.0)
        >>> tx.update(jnp.array([2.]), tx.init(jnp.zeros(1)))[0].round(4)
        Array([1.], dtype=float32)
    """
    mu_dtype = canonicalize_dtype(mu_dtype)

    def init_fn(params):
        zeros = lambda: tree_zeros_like(params, mu_dtype)  # noqa: E731
        return ScaleByAdemamixState(jnp.zeros([], jnp.int32), jnp.zeros([], jnp.int32),
                                    zeros(), zeros(), zeros())

    def update_fn(updates, state, params=None):
        c_b3 = value_or_schedule(b3, state.count_m2)
        c_alpha = value_or_schedule(alpha, state.count_m2)
        m1 = update_moment(updates, state.m1, b1, 1)
        m2 = update_moment(updates, state.m2, c_b3, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = safe_increment(state.count)
        count_m2_inc = safe_increment(state.count_m2)
        m1_hat = bias_correction(m1, b1, count_inc)
        nu_hat = bias_correction(nu, b2, count_inc)
        updates = tu.tree_map(lambda a, b, v: (a + c_alpha * b) / (jnp.sqrt(v + eps_root) + eps),
                              m1_hat, m2, nu_hat)
        return updates, ScaleByAdemamixState(count_inc, count_m2_inc, m1, m2, nu)
    return GradientTransformation(init_fn, update_fn)


def ademamix(learning_rate, b1=0.9, b2=0.999, b3=0.9999, alpha=5.0, eps=1e-8, eps_root=0.0,
             mu_dtype=None, weight_decay=0.0, mask=None):
    """AdEMAMix: AdamW whose numerator mixes a fast and a slow EMA of the gradients.

    Args:
        learning_rate: a float or a schedule.
        b1, b2, b3, alpha, eps, eps_root, mu_dtype: see :func:`scale_by_ademamix`.
        weight_decay: decoupled weight decay (multiplied by the learning rate).
        mask: pytree of bools (or a function returning one) selecting leaves to decay.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.ademamix(0.1, alpha=0.0)
        >>> p = jnp.ones(1)
        >>> tx.update(jnp.array([3.]), tx.init(p), p)[0].round(4)
        Array([-0.09999999], dtype=float32)
    """
    return chain(scale_by_ademamix(b1=b1, b2=b2, b3=b3, alpha=alpha, eps=eps,
                                   eps_root=eps_root, mu_dtype=mu_dtype),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


class ScaleBySimplifiedAdEMAMixState(NamedTuple):
    """State of :func:`scale_by_simplified_ademamix`: step ``t``, gradient accumulator
    ``m`` and second-moment EMA ``n``."""
    t: Any
    m: Any
    n: Any


def scale_by_simplified_ademamix(b1=0.99, b2=0.95, alpha=0.0, eps=1e-8, eps_root=0.0):
    """Rescale updates by simplified AdEMAMix: ``(m + alpha * g) / (sqrt(n_hat + eps_root)
    + eps)`` with ``m = b1 * m + g`` (no ``1 - b1`` factor, no bias correction of ``m``).

    Args:
        b1: decay of the gradient accumulator.
        b2: decay of the second moment.
        alpha: weight of the current gradient (a float or a schedule).
        eps: added outside the square root.
        eps_root: added inside the square root.

    Returns:
        A :class:`~xform.optim.GradientTransformation`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.scale_by_simplified_ademamix()
        >>> tx.update(jnp.array([2.]), tx.init(jnp.zeros(1)))[0].round(4)
        Array([1.], dtype=float32)
    """
    def init_fn(params):
        return ScaleBySimplifiedAdEMAMixState(jnp.array(0, jnp.int32), tree_zeros_like(params),
                                              tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        c_alpha = value_or_schedule(alpha, state.t)
        m = tu.tree_map(lambda g, m: g + b1 * m, updates, state.m)
        # lerp(b2, g*g, n) = g*g + b2 * (n - g*g)
        n = tu.tree_map(lambda g, n: g * g + b2 * (n - g * g), updates, state.n)
        t = safe_increment(state.t)
        n_hat = bias_correction(n, b2, t)
        u = tu.tree_map(lambda m, g, n: (m + c_alpha * g) / (jnp.sqrt(n + eps_root) + eps),
                        m, updates, n_hat)
        return u, ScaleBySimplifiedAdEMAMixState(t, m, n)
    return GradientTransformation(init_fn, update_fn)


def simplified_ademamix(learning_rate, b1=0.99, b2=0.95, alpha=0.0, eps=1e-8, eps_root=0.0,
                        weight_decay=0.0, mask=None):
    """Simplified AdEMAMix: one momentum buffer, the current gradient mixed in with
    ``alpha`` (``alpha=0`` recovers Adam up to reparametrizing ``lr`` and ``b1``).

    Args:
        learning_rate: a float or a schedule.
        b1, b2, alpha, eps, eps_root: see :func:`scale_by_simplified_ademamix`.
        weight_decay: decoupled weight decay (multiplied by the learning rate).
        mask: pytree of bools (or a function returning one) selecting leaves to decay.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.simplified_ademamix(0.1)
        >>> p = jnp.ones(1)
        >>> tx.update(jnp.array([3.]), tx.init(p), p)[0].round(4)
        Array([-0.09999999], dtype=float32)
    """
    return chain(scale_by_simplified_ademamix(b1=b1, b2=b2, alpha=alpha, eps=eps,
                                              eps_root=eps_root),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


__all__ = ["ScaleByAdemamixState", "scale_by_ademamix", "ademamix",
           "ScaleBySimplifiedAdEMAMixState", "scale_by_simplified_ademamix",
           "simplified_ademamix"]
