"""Parameter-free step sizes from the distance travelled: DoG (Ivgi et al., 2023) and
DoWG (Khaled et al., 2023)."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformation, chain, identity, tree_norm
from xform.optim._basic import add_decayed_weights, scale_by_learning_rate
from xform.optim.tree_utils import tree_dtype


def _sub(x, y):
    return tu.tree_map(lambda a, b: a - b, x, y)


def _scale(s, tree):
    return tu.tree_map(lambda x: s * x, tree)


class DoGState(NamedTuple):
    """State of DoG: ``is_init_step``, the ``init_params``, the largest distance from
    them so far ``max_dist`` and the running ``sum_sq_norm_grads``."""
    is_init_step: Any
    init_params: Any
    max_dist: Any
    sum_sq_norm_grads: Any


def scale_by_dog(init_step, eps=1e-8):
    """Scale updates by DoG's step ``max_dist / sqrt(sum ||g||^2 + eps)``.

    Args:
        init_step: ``(tag, value)`` with tag ``'distance'`` (initial distance),
            ``'learning_rate'`` (first step's learning rate) or ``'heuristic'``
            (distance ``value * (1 + ||x0||)``).
        eps: added to the sum of squared gradient norms.

    Returns:
        A :class:`~xform.optim.GradientTransformation` whose ``update`` needs ``params``.

    Raises:
        ValueError: at ``init`` for an unknown tag.
    """
    init_step_type, init_step_value = init_step

    def init_fn(params):
        dtype = tree_dtype(params, "lowest")
        if init_step_type == "distance":
            r_epsilon = init_step_value
        elif init_step_type == "heuristic":
            r_epsilon = init_step_value * (1 + tree_norm(params))
        elif init_step_type == "learning_rate":
            r_epsilon = 0.0
        else:
            raise ValueError("Invalid init_step specification for scale_by_dog: "
                             f"init_step_type={init_step_type!r}")
        return DoGState(jnp.asarray(True), params, jnp.asarray(r_epsilon, dtype),
                        jnp.asarray(0.0, dtype))

    def update_fn(updates, state, params):
        max_dist = jnp.maximum(state.max_dist, tree_norm(_sub(state.init_params, params)))
        sum_sq = state.sum_sq_norm_grads + tree_norm(updates, squared=True)
        learning_rate = max_dist / jnp.sqrt(sum_sq + eps)
        if init_step_type == "learning_rate":
            learning_rate = jnp.where(state.is_init_step, init_step_value, learning_rate)
        return _scale(learning_rate, updates), DoGState(jnp.asarray(False), state.init_params,
                                                        max_dist, sum_sq)
    return GradientTransformation(init_fn, update_fn)


def dog(learning_rate=1.0, init_step=("heuristic", 1e-6), eps=1e-8, weight_decay=None,
        mask=None):
    r"""Distance over Gradients: SGD with step ``max_k ||x_k - x_0|| / sqrt(sum_k ||g_k||^2)``.

    Args:
        learning_rate: a float or a schedule multiplying DoG's step.
        init_step: ``(tag, value)``, see :func:`scale_by_dog`; ``('heuristic', 1e-6)``
            sets the initial distance to ``1e-6 * (1 + ||x0||)`` (so ``init`` needs the
            real params).
        eps: added to the sum of squared gradient norms.
        weight_decay: weight decay added to the gradient (None: none).
        mask: pytree of bools (or a function returning one) selecting leaves to decay.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.dog(init_step=('learning_rate', 0.1))
        >>> p = jnp.ones(1)
        >>> tx.update(jnp.array([2.]), tx.init(p), p)[0]
        Array([-0.2], dtype=float32)
    """
    return chain(add_decayed_weights(weight_decay, mask) if weight_decay is not None
                 else identity(),
                 scale_by_dog(init_step, eps),
                 scale_by_learning_rate(learning_rate))


class DoWGState(NamedTuple):
    """State of DoWG: the ``init_params``, the weighted sum of squared gradient norms
    and the squared-distance estimate."""
    init_params: Any
    weighted_sq_norm_grads: Any
    estim_sq_dist: Any


def scale_by_dowg(init_estim_sq_dist=None, eps=1e-4):
    """Scale updates by DoWG's step ``r^2 / (sqrt(sum_k r_k^2 ||g_k||^2) + eps)``.

    Args:
        init_estim_sq_dist: initial squared-distance estimate (default ``eps``).
        eps: added to the denominator.

    Returns:
        A :class:`~xform.optim.GradientTransformation` whose ``update`` needs ``params``.
    """
    def init_fn(params):
        dtype = tree_dtype(params, "lowest")
        init = eps if init_estim_sq_dist is None else init_estim_sq_dist
        return DoWGState(params, jnp.asarray(0.0, dtype), jnp.asarray(init, dtype))

    def update_fn(updates, state, params):
        curr = tree_norm(_sub(state.init_params, params), squared=True)
        estim_sq_dist = jnp.maximum(state.estim_sq_dist, curr)
        weighted = estim_sq_dist * tree_norm(updates, squared=True) + \
            state.weighted_sq_norm_grads
        learning_rate = estim_sq_dist / (jnp.sqrt(weighted) + eps)
        return _scale(learning_rate, updates), state._replace(
            estim_sq_dist=estim_sq_dist, weighted_sq_norm_grads=weighted)
    return GradientTransformation(init_fn, update_fn)


def dowg(learning_rate=1.0, init_estim_sq_dist=None, eps=1e-4, weight_decay=None, mask=None):
    """Distance over Weighted Gradients: DoG with gradients weighted by the distance.

    Args:
        learning_rate: a float or a schedule multiplying DoWG's step.
        init_estim_sq_dist: initial squared-distance estimate (default ``eps``).
        eps: added to the denominator.
        weight_decay: weight decay added to the gradient (None: none).
        mask: pytree of bools (or a function returning one) selecting leaves to decay.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.dowg()
        >>> p = jnp.ones(1)
        >>> tx.update(jnp.array([2.]), tx.init(p), p)[0].shape
        (1,)
    """
    return chain(add_decayed_weights(weight_decay, mask) if weight_decay is not None
                 else identity(),
                 scale_by_dowg(init_estim_sq_dist, eps),
                 scale_by_learning_rate(learning_rate))


__all__ = ["DoGState", "scale_by_dog", "dog", "DoWGState", "scale_by_dowg", "dowg"]
