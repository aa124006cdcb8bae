"""Less common rules Optax users reach for: Adan, Rprop, optimistic gradient descent,
the Polyak step size (an extra-args transformation: it needs the loss ``value``) and
the step-conditional wrappers."""
from typing import Any, NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import (GradientTransformation, GradientTransformationExtraArgs,
                               bias_correction, chain, init_empty_state, safe_increment,
                               tree_full_like,
                               tree_norm, tree_zeros_like, update_moment,
                               update_moment_per_elem_norm, with_extra_args_support)
from xform.optim._basic import add_decayed_weights, scale, scale_by_learning_rate
from xform.optim._alias import sgd


class ScaleByAdanState(NamedTuple):
    m: Any
    v: Any
    n: Any
    g: Any
    t: Any


def scale_by_adan(b1=0.98, b2=0.92, b3=0.99, eps=1e-8, eps_root=0.0):
    """Adan's rescaling: Nesterov momentum estimated from gradient differences.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_adan()
        >>> tx.update(jnp.array([2.]), tx.init(jnp.zeros(1)))[0].round(3)
        Array([1.], dtype=float32)
    """
    def init_fn(params):
        z = tree_zeros_like(params)
        return ScaleByAdanState(z, z, z, z, jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None):
        g = updates
        diff = tu.tree_map(lambda a, b: jnp.where(state.t == 0, jnp.zeros_like(a), a - b),
                           g, state.g)
        m = update_moment(g, state.m, b1, 1)
        v = update_moment(diff, state.v, b2, 1)
        sq = tu.tree_map(lambda a, d: a + (1 - b2) * d, g, diff)
        n = update_moment_per_elem_norm(sq, state.n, b3, 2)
        t = safe_increment(state.t)
        m_hat, v_hat, n_hat = (bias_correction(m, b1, t), bias_correction(v, b2, t),
                               bias_correction(n, b3, t))
        u = tu.tree_map(lambda a, b, c: (a + (1 - b2) * b) / (jnp.sqrt(c + eps_root) + eps),
                        m_hat, v_hat, n_hat)
        return u, ScaleByAdanState(m, v, n, g, t)
    return GradientTransformation(init_fn, update_fn)


def adan(learning_rate, b1=0.98, b2=0.92, b3=0.99, eps=1e-8, eps_root=1e-8,
         weight_decay=0.0, mask=None):
    """Adan (Xie et al., 2022)."""
    return chain(scale_by_adan(b1=b1, b2=b2, b3=b3, eps=eps, eps_root=eps_root),
                 add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))


class ScaleByRpropState(NamedTuple):
    step_sizes: Any
    prev_updates: Any


def scale_by_rprop(learning_rate, eta_minus=0.5, eta_plus=1.2, min_step_size=1e-6,
                   max_step_size=50.0):
    """Rprop: per-element step sizes grown while the gradient keeps its sign and shrunk
    when it flips; only the signs of the gradients are used."""
    def init_fn(params):
        return ScaleByRpropState(tree_full_like(params, learning_rate), tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        sign = tu.tree_map(lambda g, p: g * p, updates, state.prev_updates)
        steps = tu.tree_map(
            lambda s, st: jnp.where(s == 0, st, jnp.clip(st * jnp.where(s > 0, eta_plus,
                                                                        eta_minus),
                                                         min_step_size, max_step_size)),
            sign, state.step_sizes)
        prev = tu.tree_map(lambda s, g, st: jnp.where(s < 0, jnp.zeros_like(g),
                                                      st * jnp.sign(g)), sign, updates, steps)
        out = tu.tree_map(lambda s, g, pg: jnp.where(s < 0, jnp.zeros_like(pg), pg),
                          sign, prev, state.prev_updates)
        return out, ScaleByRpropState(steps, prev)
    return GradientTransformation(init_fn, update_fn)


def rprop(learning_rate, eta_minus=0.5, eta_plus=1.2, min_step_size=1e-6, max_step_size=50.0):
    """Rprop (Riedmiller & Braun, 1993)."""
    return chain(scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size,
                                max_step_size), scale(-1.0))


class ScaleByOptimisticGradientState(NamedTuple):
    is_initial_step: Any
    previous_gradient: Any


def scale_by_optimistic_gradient(alpha=1.0, beta=1.0):
    """``(alpha + beta) * g_t - beta * g_{t-1}`` (optimistic gradient descent)."""
    def init_fn(params):
        return ScaleByOptimisticGradientState(jnp.array(True), tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        def one(g, prev):
            prev = jnp.where(state.is_initial_step, g, prev)
            return (alpha + beta) * g - beta * prev
        new = tu.tree_map(one, updates, state.previous_gradient)
        return new, ScaleByOptimisticGradientState(jnp.array(False), updates)
    return GradientTransformation(init_fn, update_fn)


def optimistic_gradient_descent(learning_rate, alpha=1.0, beta=1.0):
    """Optimistic gradient descent (Mokhtari et al., 2019), for min-max games."""
    return chain(scale_by_optimistic_gradient(alpha=alpha, beta=beta),
                 scale_by_learning_rate(learning_rate))


def scale_by_polyak(f_min=0.0, max_learning_rate=1.0, eps=0.0, variant="sps"):
    """The Polyak step size ``(f(x) - f_min) / ||g||^2``, capped at ``max_learning_rate``.
    Its ``update`` needs the loss: ``tx.update(grads, state, params, value=loss)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_polyak()
        >>> tx.update(jnp.array([2.]), tx.init(None), value=jnp.array(1.))[0]
        Array([0.5], dtype=float32)
    """
    if variant not in ("sps", "sps+"):
        raise ValueError(f"Invalid argument value for Polyak SGD: variant={variant!r}")

    def update_fn(updates, state, params=None, *, value, **extra_args):
        sq = tree_norm(updates, squared=True)
        gap = jnp.array(value - f_min).astype(sq.dtype)
        if variant == "sps+":
            gap = jnp.maximum(gap, 0)
        # Optax compares with float64's eps (jnp.finfo(float)), whatever the dtype
        step = jnp.where(sq + eps <= np.finfo(float).eps, jnp.array(0.0),
                         jnp.minimum(gap / (sq + eps), max_learning_rate))
        return tu.tree_map(lambda g: step * g, updates), state
    return GradientTransformationExtraArgs(init_empty_state, update_fn)


def polyak_sgd(max_learning_rate=1.0, scaling=1.0, f_min=0.0, eps=0.0, variant="sps"):
    """SGD with the Polyak step size (Loizou et al., 2021); pass ``value=loss`` to update."""
    return chain(sgd(learning_rate=scaling),
                 scale_by_polyak(max_learning_rate=max_learning_rate, f_min=f_min, eps=eps,
                                 variant=variant))


class ConditionallyTransformState(NamedTuple):
    inner_state: Any
    step: Any


class ConditionallyMaskState(NamedTuple):
    step: Any
    inner_state: Any


def conditionally_transform(inner, should_transform_fn, forward_extra_args=False):
    """Apply ``inner`` at the steps where ``should_transform_fn(step)`` holds; pass the
    updates through unchanged otherwise."""
    inner = with_extra_args_support(inner)

    def init_fn(params):
        return ConditionallyTransformState(inner.init(params), jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None, **extra_args):
        kw = extra_args if forward_extra_args else {}
        u, s = lax.cond(should_transform_fn(state.step, **kw),
                        lambda _: inner.update(updates, state.inner_state, params, **extra_args),
                        lambda _: (updates, state.inner_state), None)
        return u, ConditionallyTransformState(s, safe_increment(state.step))
    return GradientTransformationExtraArgs(init_fn, update_fn)


def conditionally_mask(inner, should_transform_fn, forward_extra_args=False):
    """Apply ``inner`` at the steps where ``should_transform_fn(step)`` holds; return
    zero updates otherwise."""
    inner = with_extra_args_support(inner)

    def init_fn(params):
        return ConditionallyMaskState(jnp.zeros([], jnp.int32), inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        kw = extra_args if forward_extra_args else {}
        u, s = lax.cond(should_transform_fn(state.step, **kw),
                        lambda _: inner.update(updates, state.inner_state, params, **extra_args),
                        lambda _: (tree_zeros_like(updates), state.inner_state), None)
        return u, ConditionallyMaskState(safe_increment(state.step), s)
    return GradientTransformationExtraArgs(init_fn, update_fn)
