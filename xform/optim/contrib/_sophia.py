"""Sophia (Liu et al., 2023): clipped momentum preconditioned by an EMA of a Hessian-
diagonal estimate (Hutchinson's by default), refreshed every ``update_interval`` steps."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform import debug, lax
from xform import random
from xform.core import tree_util as tu
from xform.transforms.ad import grad, jvp
from xform.optim._base import (GradientTransformationExtraArgs, bias_correction,
                               canonicalize_dtype, chain, safe_increment, tree_cast,
                               tree_zeros_like, update_moment, with_extra_args_support)
from xform.optim._basic import add_decayed_weights, scale_by_learning_rate
from xform.optim.tree_utils import tree_dtype


class HutchinsonState(NamedTuple):
    """State of :func:`hutchinson_estimator_diag_hessian`: the PRNG key."""
    key: Any


def hutchinson_estimator_diag_hessian(random_seed=None):
    """Estimate the Hessian diagonal as ``z * (H z)`` with a Rademacher vector ``z``
    (Hutchinson's unbiased, high-variance estimator).

    ``update(updates, state, params, obj_fn=f)`` returns the estimate at ``params`` of
    the scalar function ``f(params)``; ``updates`` are ignored.

    Args:
        random_seed: the PRNG key (default ``PRNGKey(0)``).

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Raises:
        ValueError: if ``update`` gets no ``params`` or no ``obj_fn``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.hutchinson_estimator_diag_hessian()
        >>> p = jnp.array([1., 2.])
        >>> tx.update(None, tx.init(p), p, obj_fn=lambda x: jnp.sum(x ** 2))[0]
        Array([2., 2.], dtype=float32)
    """
    def init_fn(params):
        return HutchinsonState(random_seed if random_seed is not None else random.PRNGKey(0))

    def update_fn(updates, state, params=None, obj_fn=None, **extra_args):
        if params is None:
            raise ValueError("params must be provided to hutchinson update function.")
        if obj_fn is None:
            raise ValueError("obj_fn must be provided to hutchinson update function.")
        key, subkey = random.split(state.key)
        treedef = tu.tree_structure(params)
        keys = tu.tree_unflatten(treedef, list(random.split(subkey, treedef.num_leaves)))
        signs = tu.tree_map(lambda x, k: random.rademacher(k, jnp.shape(x), jnp.float32),
                            params, keys)
        signs = tree_cast(signs, tree_dtype(params, "lowest"))
        hvp = jvp(grad(obj_fn), (params,), (signs,))[1]
        return tu.tree_map(lambda h, r: h * r, hvp, signs), HutchinsonState(key)
    return GradientTransformationExtraArgs(init_fn, update_fn)


class SophiaState(NamedTuple):
    """State of Sophia: step ``count``, momentum ``mu``, Hessian-diagonal EMA ``nu`` and
    the Hessian estimator's state."""
    count: Any
    mu: Any
    nu: Any
    hessian_fn_state: Any


def scale_by_sophia(b1=0.965, b2=0.99, eps=1e-8, gamma=0.01, clip_threshold=1.0,
                    update_interval=10, hessian_diagonal_fn=hutchinson_estimator_diag_hessian(),
                    mu_dtype=None, verbose=False, print_win_rate_every_n_steps=0):
    """Rescale updates by Sophia: ``clip(mu_hat / max(gamma * h, eps), clip_threshold)``.

    See :func:`sophia` for the arguments.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs` whose ``update`` needs
        ``params`` and forwards its keyword arguments to ``hessian_diagonal_fn``.

    Raises:
        ValueError: if ``update`` is called without ``params``.
    """
    mu_dtype = canonicalize_dtype(mu_dtype)
    hessian_diagonal_fn = with_extra_args_support(hessian_diagonal_fn)

    def init_fn(params):
        return SophiaState(jnp.zeros([], jnp.int32), tree_zeros_like(params, mu_dtype),
                           tree_zeros_like(params), hessian_diagonal_fn.init(params))

    def update_fn(updates, state, params=None, **hess_fn_kwargs):
        if params is None:
            raise ValueError("params must be provided to sophia's update function.")
        count_inc = safe_increment(state.count)
        grads = updates
        mu = update_moment(updates, state.mu, b1, 1)
        mu_hat = bias_correction(mu, b1, count_inc)
        updates = tu.tree_map(lambda m, h: m / jnp.maximum(gamma * h, eps), mu_hat, state.nu)
        if clip_threshold is not None:
            if verbose:
                leaves = tu.tree_leaves(updates)
                not_clipped = sum(jnp.sum(jnp.abs(u) < clip_threshold) for u in leaves)
                win_rate = not_clipped / sum(jnp.size(u) for u in leaves)
                lax.cond(count_inc % print_win_rate_every_n_steps == 0,
                         lambda: debug.print("Sophia optimizer win rate: {}", win_rate),
                         lambda: None)
            updates = tu.tree_map(lambda u: jnp.clip(u, -clip_threshold, clip_threshold),
                                  updates)

        def update_hessian_diag(hess_state, nu):
            diag, hess_state = hessian_diagonal_fn.update(grads, hess_state, params=params,
                                                          **hess_fn_kwargs)
            return hess_state, update_moment(diag, nu, b2, 1)

        hessian_fn_state, nu = lax.cond(jnp.equal(state.count % update_interval, 0),
                                        update_hessian_diag, lambda h, n: (h, n),
                                        state.hessian_fn_state, state.nu)
        return updates, SophiaState(count_inc, tree_cast(mu, mu_dtype), nu, hessian_fn_state)
    return GradientTransformationExtraArgs(init_fn, update_fn)


def sophia(learning_rate, b1=0.965, b2=0.99, eps=1e-8, weight_decay=1e-4,
           weight_decay_mask=None, gamma=0.01, clip_threshold=1.0, update_interval=10,
           hessian_diagonal_fn=hutchinson_estimator_diag_hessian(), mu_dtype=None,
           verbose=False, print_win_rate_every_n_steps=0):
    """Sophia: a second-order clipped optimizer for language-model pre-training.

    Keyword arguments of ``update`` go to ``hessian_diagonal_fn``; the default
    (Hutchinson's estimator) needs ``obj_fn=lambda params: loss`` (a scalar).

    Args:
        learning_rate: a float or a schedule.
        b1: decay of the momentum.
        b2: decay of the Hessian-diagonal EMA (per refresh, every ``update_interval``).
        eps: lower bound of the denominator.
        weight_decay: decoupled weight decay (multiplied by the learning rate).
        weight_decay_mask: pytree of bools (or a function returning one) selecting
            leaves to decay.
        gamma: scale of the Hessian diagonal in the denominator.
        clip_threshold: clip the preconditioned update to this (None: no clipping).
        update_interval: steps between Hessian-diagonal refreshes.
        hessian_diagonal_fn: the transformation estimating the Hessian diagonal.
        mu_dtype: dtype of the momentum.
        verbose: print the fraction of unclipped coordinates ("win rate").
        print_win_rate_every_n_steps: how often ``verbose`` prints.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.sophia(0.1)
        >>> tx.init(jnp.array([1., -2.]))[0].nu
        Array([0., 0.], dtype=float32)
    """
    return chain(scale_by_sophia(b1=b1, b2=b2, eps=eps, gamma=gamma,
                                 clip_threshold=clip_threshold, update_interval=update_interval,
                                 hessian_diagonal_fn=hessian_diagonal_fn, mu_dtype=mu_dtype,
                                 verbose=verbose,
                                 print_win_rate_every_n_steps=print_win_rate_every_n_steps),
                 add_decayed_weights(weight_decay, mask=weight_decay_mask),
                 scale_by_learning_rate(learning_rate))


__all__ = ["HutchinsonState", "hutchinson_estimator_diag_hessian", "SophiaState", "sophia"]
