"""Adam relatives from optax.contrib: ACProp (Zhuang et al., 2021), ADOPT (Taniguchi et
al., 2024) and MADGRAD (Defazio & Jelassi, 2021)."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.optim._base import (GradientTransformation, NO_PARAMS_MSG, bias_correction,
                               canonicalize_dtype, chain, safe_increment, tree_cast,
                               tree_zeros_like, update_moment, update_moment_per_elem_norm)
from xform.optim._basic import add_decayed_weights, scale_by_learning_rate
from xform.optim._scaling import ScaleByAdamState, ScaleByBeliefState
from xform.optim.contrib._common import value_or_schedule


def scale_by_acprop(b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16):
    """Rescale updates by ACProp: the gradient over the root of the *previous* step's
    centered second moment (an asynchronous AdaBelief).

    Args:
        b1: decay of the first moment.
        b2: decay of the centered second moment.
        eps: added to the denominator.
        eps_root: added to the second moment (must be > 0 to differentiate through it).

    Returns:
        A :class:`~xform.optim.GradientTransformation` with a ``ScaleByBeliefState``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.scale_by_acprop()
        >>> tx.update(jnp.array([2.]), tx.init(jnp.zeros(1)))[0]
        Array([2.], dtype=float32)
    """
    def init_fn(params):
        return ScaleByBeliefState(jnp.zeros([], jnp.int32), tree_zeros_like(params),
                                  tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        mu = update_moment(updates, state.mu, b1, 1)
        prediction_error = tu.tree_map(lambda g, m: g - m, updates, state.mu)
        nu = update_moment_per_elem_norm(prediction_error, state.nu, b2, 2)
        nu = tu.tree_map(lambda v: v + eps_root, nu)
        count_inc = safe_increment(state.count)
        initial = state.count == 0
        # the denominator uses the previous step's statistics (1 on the first step)
        nu_hat = bias_correction(state.nu, b2, jnp.where(initial, count_inc, state.count))
        nu_hat = tu.tree_map(lambda x: jnp.where(initial, 1, x), nu_hat)
        updates = tu.tree_map(lambda g, v: g / (jnp.sqrt(v) + eps), updates, nu_hat)
        return updates, ScaleByBeliefState(count_inc, mu, nu)
    return GradientTransformation(init_fn, update_fn)


def acprop(learning_rate, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, weight_decay=0.0,
           mask=None):
    """ACProp: momentum centering and asynchronous update (Zhuang et al., 2021).

    Args:
        learning_rate: a float or a schedule.
        b1, b2, eps, eps_root: see :func:`scale_by_acprop`.
        weight_decay: decoupled weight decay (multiplied by the learning rate).
        mask: pytree of bools (or a function returning one) selecting leaves to decay.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.acprop(0.1)
        >>> p = jnp.ones(1)
        >>> tx.update(jnp.array([2.]), tx.init(p), p)[0]
        Array([-0.2], dtype=float32)
    """
    return chain(scale_by_acprop(b1=b1, b2=b2, eps=eps, eps_root=eps_root),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def _default_clip(x):
    return x ** 0.25


def scale_by_adopt(b1=0.9, b2=0.9999, eps=1e-6, mu_dtype=None, *, nesterov=False,
                   use_clipping=True, clip_value_fn=_default_clip):
    """Rescale updates by ADOPT: normalize the gradient by the *previous* second moment,
    then take its momentum (the first step only initializes the second moment).

    Args:
        b1: decay of the first moment.
        b2: decay of the second moment.
        eps: lower bound of the denominator.
        mu_dtype: dtype of the first-moment accumulator.
        nesterov: use Nesterov momentum.
        use_clipping: clip the normalized gradient to ``clip_value_fn(step)``.
        clip_value_fn: clipping value from the step index (default ``step ** 0.25``).

    Returns:
        A :class:`~xform.optim.GradientTransformation` with a ``ScaleByAdamState``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.scale_by_adopt()
        >>> tx.update(jnp.array([2.]), tx.init(jnp.zeros(1)))[0]
        Array([0.], dtype=float32)
    """
    mu_dtype = canonicalize_dtype(mu_dtype)

    def init_fn(params):
        return ScaleByAdamState(jnp.zeros([], jnp.int32), tree_zeros_like(params, mu_dtype),
                                tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        b2_ = jnp.where(state.count > 0, b2, 0)
        b1_ = jnp.where(state.count > 0, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2_, 2)
        normalize = lambda g, n: g / jnp.maximum(jnp.sqrt(n), eps)  # noqa: E731
        if use_clipping:
            c = clip_value_fn(state.count)
            mu_updates = tu.tree_map(lambda g, n: jnp.clip(normalize(g, n), -c, c),
                                     updates, state.nu)
        else:
            mu_updates = tu.tree_map(normalize, updates, state.nu)
        mu = update_moment(mu_updates, state.mu, b1_, 1)
        updates = update_moment(mu_updates, mu, b1_, 1) if nesterov else mu
        return updates, ScaleByAdamState(safe_increment(state.count), tree_cast(mu, mu_dtype),
                                         nu)
    return GradientTransformation(init_fn, update_fn)


def adopt(learning_rate, b1=0.9, b2=0.9999, eps=1e-6, mu_dtype=None, *, nesterov=False,
          use_clipping=True, clip_value_fn=_default_clip):
    """ADOPT: a modified Adam that converges with any ``b2`` (Taniguchi et al., 2024).

    Args:
        learning_rate: a float or a schedule.
        b1, b2, eps, mu_dtype, nesterov, use_clipping, clip_value_fn: see
            :func:`scale_by_adopt`.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.adopt(0.1)
        >>> p = jnp.ones(1)
        >>> state = tx.init(p)
        >>> for _ in range(2):
        ...     u, state = tx.update(jnp.array([2.]), state, p)
        >>> u
        Array([-0.01], dtype=float32)
    """
    return chain(scale_by_adopt(b1=b1, b2=b2, eps=eps, mu_dtype=mu_dtype, nesterov=nesterov,
                                use_clipping=use_clipping, clip_value_fn=clip_value_fn),
                 scale_by_learning_rate(learning_rate))


class MadgradState(NamedTuple):
    """State of :func:`scale_by_madgrad`: step ``count``, weighted sums of squared
    gradients ``grad_sum_sq`` and of gradients ``s``, and the initial params ``x0``."""
    count: Any
    grad_sum_sq: Any
    s: Any
    x0: Any


def scale_by_madgrad(learning_rate, momentum=0.9, eps=1e-6):
    """The MADGRAD step (dual averaging with a cube-root denominator and momentum);
    its updates already include the learning rate.

    Args:
        learning_rate: a float or a schedule.
        momentum: momentum parameter.
        eps: added to the denominator.

    Returns:
        A :class:`~xform.optim.GradientTransformation` whose ``update`` needs ``params``.

    Raises:
        ValueError: if ``update`` is called without ``params``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.scale_by_madgrad(1.0, momentum=0.0, eps=0.0)
        >>> p = jnp.zeros(1)
        >>> tx.update(jnp.array([8.]), tx.init(p), p)[0]
        Array([-2.], dtype=float32)
    """
    def init_fn(params):
        return MadgradState(jnp.zeros([], jnp.int32), tree_zeros_like(params),
                            tree_zeros_like(params), tu.tree_map(lambda x: x, params))

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        lamb = (value_or_schedule(learning_rate, state.count) + eps) * jnp.sqrt(state.count + 1)
        grad_sum_sq = tu.tree_map(lambda s, g: s + (lamb * (g ** 2)).astype(g.dtype),
                                  state.grad_sum_sq, updates)
        s = tu.tree_map(lambda s, g: s + (lamb * g).astype(g.dtype), state.s, updates)
        z = tu.tree_map(lambda x0, s, gs: x0 - s / (jnp.cbrt(gs) + eps), state.x0, s,
                        grad_sum_sq)
        new = tu.tree_map(lambda z, x: (1 - momentum) * z + momentum * x, z, params)
        return (tu.tree_map(lambda n, o: n - o, new, params),
                MadgradState(safe_increment(state.count), grad_sum_sq, s, state.x0))
    return GradientTransformation(init_fn, update_fn)


def madgrad(learning_rate, momentum=0.9, weight_decay=0.0, eps=1e-6):
    """MADGRAD: a momentumized, adaptive, dual-averaged gradient method.

    Args:
        learning_rate: a float or a schedule.
        momentum: momentum parameter.
        weight_decay: L2 weight decay added to the gradient.
        eps: added to the denominator.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.madgrad(1.0, momentum=0.0, eps=0.0)
        >>> p = jnp.zeros(1)
        >>> tx.update(jnp.array([8.]), tx.init(p), p)[0]
        Array([-2.], dtype=float32)
    """
    return chain(add_decayed_weights(weight_decay),
                 scale_by_madgrad(learning_rate=learning_rate, momentum=momentum, eps=eps))


__all__ = ["scale_by_acprop", "acprop", "scale_by_adopt", "adopt", "MadgradState",
           "scale_by_madgrad", "madgrad"]
