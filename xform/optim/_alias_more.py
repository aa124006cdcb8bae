"""Optax's remaining optimizers: distance-over-gradients (DoG), update-norm
normalization and optimistic Adam (both interfaces)."""
import warnings
from typing import NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformation, chain, init_empty_state, tree_cast, \
    tree_norm
from xform.optim._basic import scale_by_learning_rate
from xform.optim._more import scale_by_optimistic_gradient
from xform.optim._scaling import scale_by_adam


class ScaleByDistanceOverGradientsState(NamedTuple):
    """State of :func:`scale_by_distance_over_gradients`."""
    max_dist: object
    grad_sum_of_squares: object
    init_params: object


def scale_by_distance_over_gradients(reps_rel=1e-6, eps=1e-8, param_dtype=jnp.float32,
                                     global_scale=1.0):
    """Layer-wise DoG (Ivgi et al. 2023), learning-rate free: each leaf is scaled by its
    largest distance from the initial params over the root of its summed squared
    gradients.

    Args:
        reps_rel: sets the first step's distance, ``reps_rel * (1 + ||x0||)``.
        eps: added under the square root.
        param_dtype: dtype of the stored initial params.
        global_scale: overall factor (usually 1 or -1).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_distance_over_gradients()
        >>> p = jnp.array([3., 4.])
        >>> tx.update(jnp.ones(2), tx.init(p), p)[0].shape
        (2,)
    """
    def _l2(x, y=0.0):
        return jnp.sqrt(jnp.square(x - y).sum())

    def init_fn(params):
        return ScaleByDistanceOverGradientsState(
            tu.tree_map(lambda x: reps_rel * (1 + _l2(x)), params),
            tu.tree_map(lambda x: jnp.zeros(1), params),
            tree_cast(params, param_dtype))

    def update_fn(updates, state, params):
        max_dist = tu.tree_map(lambda d, x, y: jnp.maximum(d, _l2(x, y)), state.max_dist,
                               params, state.init_params)
        g_sos = tu.tree_map(lambda x, y: x + jnp.square(y).sum(), state.grad_sum_of_squares,
                            updates)
        updates = tu.tree_map(lambda g, d, s: global_scale * (d / jnp.sqrt(s + eps)) * g,
                              updates, max_dist, g_sos)
        return updates, ScaleByDistanceOverGradientsState(max_dist, g_sos, state.init_params)
    return GradientTransformation(init_fn, update_fn)


def normalize_by_update_norm(scale_factor=1.0, eps=1e-6):
    """Divide the updates by ``(global_norm + eps) / scale_factor``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.normalize_by_update_norm(eps=0.).update(jnp.array([3., 4.]),
        ...                                                optax.EmptyState())[0]
        Array([0.6, 0.8], dtype=float32)
    """
    def update_fn(updates, state, params=None):
        g_norm = (tree_norm(updates) + eps) / scale_factor
        return tu.tree_map(lambda g: g / g_norm, updates), state
    return GradientTransformation(init_empty_state, update_fn)


def optimistic_adam(learning_rate, optimism=None, b1=0.9, b2=0.999, eps=1e-08, eps_root=0.0,
                    mu_dtype=None, *, nesterov=True):
    """Optimistic Adam (deprecated interface; see :func:`optimistic_adam_v2`): Adam's
    ratio fed to optimistic gradient descent with ``alpha=learning_rate`` and
    ``beta=optimism`` (default: the learning rate); no schedules.

    Example:
        >>> import warnings, xform.numpy as jnp, xform.optim as optax
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter('ignore')
        ...     tx = optax.optimistic_adam(0.1)
        >>> tx.update(jnp.ones(1), tx.init(jnp.zeros(1)))[0].shape
        (1,)
    """
    warnings.warn("`optimistic_adam` is deprecated, please use `optimistic_adam_v2` instead.",
                  category=DeprecationWarning)
    if callable(learning_rate):
        raise ValueError("This version of `optimistic_adam` does not support learning rate "
                         "schedules but `optimistic_adam_v2` does.")
    optimism = learning_rate if optimism is None else optimism
    return chain(scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype,
                               nesterov=nesterov),
                 scale_by_optimistic_gradient(alpha=learning_rate, beta=optimism),
                 scale_by_learning_rate(1.0))


def optimistic_adam_v2(learning_rate, *, alpha=1.0, beta=1.0, b1=0.9, b2=0.999, eps=1e-08,
                       eps_root=0.0, mu_dtype=None, nesterov=True):
    """Optimistic Adam (Daskalakis et al. 2018): Adam's ratio ``r_t`` turned into
    ``alpha r_t + beta (r_t - r_{t-1})``, then scaled by ``-learning_rate``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.optimistic_adam_v2(0.1)
        >>> tx.update(jnp.ones(1), tx.init(jnp.zeros(1)))[0]
        Array([-0.14736743], dtype=float32)
    """
    return chain(scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype,
                               nesterov=nesterov),
                 scale_by_optimistic_gradient(alpha=alpha, beta=beta),
                 scale_by_learning_rate(learning_rate))
