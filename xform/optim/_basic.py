"""The simple building blocks: fixed and scheduled scaling, momentum (``trace``, ``ema``),
weight decay, gradient noise, clipping and the NaN/sign guards (Optax's
``transform``/``_accumulation``/``_adding``/``_clipping``/``_constraining``)."""
import warnings
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform import lax
from xform.core import dtypes, tree_util as tu
from xform.optim._base import (EmptyState, GradientTransformation, NO_PARAMS_MSG, _abs_sq,
                               bias_correction, canonicalize_dtype, identity, init_empty_state,
                               safe_increment, tree_cast, tree_norm, tree_zeros_like,
                               update_moment)
from xform import random
from xform.optim._wrappers import masked


def scale(step_size):
    """Multiply every update by ``step_size``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.scale(-2.).update(jnp.ones(2), optax.EmptyState())[0]
        Array([-2., -2.], dtype=float32)
    """
    def update_fn(updates, state, params=None):
        return tu.tree_map(lambda g: step_size * g, updates), state
    return GradientTransformation(init_empty_state, update_fn)


def scale_by_sign():
    """Replace updates by their sign (signSGD).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.scale_by_sign().update(jnp.array([-3., 0.5]), optax.EmptyState())[0]
        Array([-1.,  1.], dtype=float32)
    """
    return GradientTransformation(init_empty_state,
                                  lambda u, s, params=None: (tu.tree_map(jnp.sign, u), s))


class ScaleByScheduleState(NamedTuple):
    count: Any


def scale_by_schedule(step_size_fn):
    """Multiply updates by ``step_size_fn(count)``, ``count`` the number of updates so far.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_schedule(lambda c: 0.5 ** c)
        >>> tx.update(jnp.ones(1), tx.init(None))[0]
        Array([1.], dtype=float32)
    """
    if not callable(step_size_fn):
        raise TypeError(f"scale_by_schedule needs a callable schedule, got {step_size_fn!r}; "
                        "use optax.scale for a constant")

    def init_fn(params):
        return ScaleByScheduleState(jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None):
        s = step_size_fn(state.count)
        updates = tu.tree_map(lambda g: jnp.array(s, dtype=g.dtype) * g, updates)
        return updates, ScaleByScheduleState(safe_increment(state.count))
    return GradientTransformation(init_fn, update_fn)


def scale_by_learning_rate(learning_rate=None, *, flip_sign=True):
    """Scale by ``-learning_rate`` (a float or a schedule); the last step of most aliases.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.scale_by_learning_rate(0.1).update(jnp.ones(1), optax.EmptyState())[0]
        Array([-0.1], dtype=float32)
    """
    if learning_rate is None:
        return identity()
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: m * learning_rate(count))
    return scale(m * learning_rate)


def safe_norm(x, min_norm, ord=None, axis=None, keepdims=False):
    """``max(||x||, min_norm)`` whose gradient is finite (and zero) below ``min_norm``."""
    norm = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=True)
    x = jnp.where(norm <= min_norm, jnp.ones_like(x), x)
    norm = norm if keepdims else jnp.squeeze(norm, axis=axis)
    masked = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    return jnp.where(norm <= min_norm, min_norm, masked)


def safe_root_mean_squares(x, min_rms):
    rms = jnp.sqrt(jnp.mean(_abs_sq(x)))
    x = jnp.where(rms <= min_rms, jnp.ones_like(x), x)
    return jnp.where(rms <= min_rms, min_rms, jnp.sqrt(jnp.mean(_abs_sq(x))))


def scale_by_trust_ratio(min_norm=0.0, trust_coefficient=1.0, eps=0.0):
    """LARS/LAMB's layer-wise trust ratio ``||param|| / ||update||``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_trust_ratio()
        >>> tx.update(jnp.array([0., 1.]), tx.init(None), jnp.array([0., 3.]))[0]
        Array([0., 3.], dtype=float32)
    """
    def one(u, p):
        pn, un = safe_norm(p, min_norm), safe_norm(u, min_norm)
        ratio = trust_coefficient * pn / (un + eps)
        zero = jnp.logical_or(pn == 0.0, un == 0.0)
        return u * jnp.where(zero, jnp.array(1.0, dtype=p.dtype), ratio)

    def update_fn(updates, state, params):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        return tu.tree_map(one, updates, params), state
    return GradientTransformation(init_empty_state, update_fn)


def scale_by_param_block_norm(min_scale=1e-3):
    """Scale each update by its parameter's norm (at least ``min_scale``)."""
    def update_fn(updates, state, params):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        return tu.tree_map(lambda u, p: u * safe_norm(p, min_scale), updates, params), state
    return GradientTransformation(init_empty_state, update_fn)


def scale_by_param_block_rms(min_scale=1e-3):
    """Scale each update by its parameter's RMS (at least ``min_scale``)."""
    def update_fn(updates, state, params):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        return (tu.tree_map(lambda u, p: u * safe_root_mean_squares(p, min_scale),
                            updates, params), state)
    return GradientTransformation(init_empty_state, update_fn)


class TraceState(NamedTuple):
    trace: Any


def trace(decay, nesterov=False, accumulator_dtype=None):
    """Momentum: ``t = g + decay * t`` (heavy ball, or Nesterov's look-ahead).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.trace(0.5)
        >>> u, s = tx.update(jnp.ones(1), tx.init(jnp.zeros(1)))
        >>> tx.update(jnp.ones(1), s)[0]
        Array([1.5], dtype=float32)
    """
    accumulator_dtype = canonicalize_dtype(accumulator_dtype)

    def init_fn(params):
        return TraceState(tree_zeros_like(params, accumulator_dtype))

    def update_fn(updates, state, params=None):
        f = lambda g, t: g + decay * t  # noqa: E731
        new = tu.tree_map(lambda g, t: None if g is None else f(g, t), updates, state.trace,
                          is_leaf=lambda g: g is None)
        updates = tu.tree_map(f, updates, new) if nesterov else new
        return updates, TraceState(tree_cast(new, accumulator_dtype))
    return GradientTransformation(init_fn, update_fn)


class EmaState(NamedTuple):
    count: Any
    ema: Any


def ema(decay, debias=True, accumulator_dtype=None):
    """Exponential moving average of the updates (bias-corrected when ``debias``).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.ema(0.5)
        >>> tx.update(jnp.array([2.]), tx.init(jnp.zeros(1)))[0]
        Array([2.], dtype=float32)
    """
    accumulator_dtype = canonicalize_dtype(accumulator_dtype)

    def init_fn(params):
        return EmaState(jnp.zeros([], jnp.int32), tree_zeros_like(params, accumulator_dtype))

    def update_fn(updates, state, params=None):
        updates = new = update_moment(updates, state.ema, decay, 1)
        count_inc = safe_increment(state.count)
        if debias:
            updates = bias_correction(new, decay, count_inc)
        return updates, EmaState(count_inc, tree_cast(new, accumulator_dtype))
    return GradientTransformation(init_fn, update_fn)


class WeightDecaySchedule(NamedTuple):
    count: Any


AddDecayedWeightsState = EmptyState


def add_decayed_weights(weight_decay=0.0, mask=None):
    """Add ``weight_decay * param`` to each update (decoupled weight decay).

    Args:
        weight_decay: a float or a schedule.
        mask: a pytree of bools (or a function of the params returning one) selecting
            the leaves to decay.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.add_decayed_weights(0.1)
        >>> tx.update(jnp.zeros(1), tx.init(None), jnp.array([2.]))[0]
        Array([0.2], dtype=float32)
    """
    def init_fn(params):
        return WeightDecaySchedule(jnp.zeros([], jnp.int32)) if callable(weight_decay) \
            else EmptyState()

    def update_fn(updates, state, params):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        new_state = WeightDecaySchedule(safe_increment(state.count)) if callable(weight_decay) \
            else state
        if isinstance(weight_decay, (int, float)) and weight_decay == 0.0:
            return updates, new_state
        s = weight_decay(state.count) if callable(weight_decay) else weight_decay
        updates = tu.tree_map(lambda g, p: None if g is None else g + s * p, updates, params,
                              is_leaf=lambda x: x is None)
        return updates, new_state
    tx = GradientTransformation(init_fn, update_fn)
    if mask is not None:
        return masked(tx, mask)
    return tx


class AddNoiseState(NamedTuple):
    count: Any
    rng_key: Any


def add_noise(eta, gamma, key=None, *, seed=None):
    """Add Gaussian noise of variance ``eta / (step + 1) ** gamma`` to the updates.

    Needs ``xform.random``; the key is a typed key or a seed for ``random.key`` (a raw
    ``PRNGKey`` array is refused there, as Optax's ``canonicalize_key`` does). Warns as
    Optax 0.2.8 does when ``seed=`` or no key is given.
    """
    if seed is not None:
        warnings.warn('"seed" is deprecated and will be removed in optax 0.2.7, use "key".',
                      DeprecationWarning)
        if key is not None:
            raise ValueError("Only one of seed or key can be specified.")
        key = seed
    if key is None:
        warnings.warn("Specifying a key will be required in optax 0.2.7.")
        key = 0

    def init_fn(params):
        k = key
        if not (hasattr(k, "dtype") and jnp.issubdtype(k.dtype, dtypes.prng_key)):
            k = random.key(k)
        return AddNoiseState(jnp.zeros([], jnp.int32), k)

    def update_fn(updates, state, params=None):
        count_inc = safe_increment(state.count)
        std = jnp.sqrt(eta / count_inc ** gamma)
        rng_key, sample_key = random.split(state.rng_key)
        leaves, treedef = tu.tree_flatten(updates)
        keys = random.split(sample_key, len(leaves))
        noise = [random.normal(keys[i], x.shape, x.dtype) for i, x in enumerate(leaves)]
        std = jnp.asarray(std)
        updates = tu.tree_unflatten(treedef, [x + std * n for x, n in zip(leaves, noise)])
        return updates, AddNoiseState(count_inc, rng_key)
    return GradientTransformation(init_fn, update_fn)


def clip(max_delta):
    """Clip every update element to ``[-max_delta, max_delta]``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.clip(1.).update(jnp.array([-3., .5]), optax.EmptyState())[0]
        Array([-1. ,  0.5], dtype=float32)
    """
    def update_fn(updates, state, params=None):
        return tu.tree_map(lambda g: jnp.clip(g, -max_delta, max_delta), updates), state
    return GradientTransformation(init_empty_state, update_fn)


def clip_by_block_rms(threshold):
    """Rescale each leaf so its RMS is at most ``threshold``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.clip_by_block_rms(1.).update(jnp.array([4., 4.]), optax.EmptyState())[0]
        Array([1., 1.], dtype=float32)
    """
    def one(u):
        return u / jnp.maximum(1.0, jnp.sqrt(jnp.mean(_abs_sq(u))) / threshold)

    def update_fn(updates, state, params=None):
        return tu.tree_map(one, updates), state
    return GradientTransformation(init_empty_state, update_fn)


def clip_by_global_norm(max_norm):
    """Rescale all updates together so their global L2 norm is at most ``max_norm``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.clip_by_global_norm(1.)
        >>> tx.update([jnp.array([3.]), jnp.array([4.])], tx.init(None))[0]
        [Array([0.6], dtype=float32), Array([0.8], dtype=float32)]
    """
    def update_fn(updates, state, params=None):
        g_norm = tree_norm(updates)
        trigger = jnp.squeeze(g_norm < max_norm)
        return tu.tree_map(lambda t: lax.select(trigger, t, t / g_norm.astype(t.dtype) * max_norm),
                           updates), state
    return GradientTransformation(init_empty_state, update_fn)


class ZeroNansState(NamedTuple):
    found_nan: Any


def zero_nans():
    """Replace NaNs in the updates by zero; the state records which leaves had one.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.zero_nans()
        >>> tx.update(jnp.array([jnp.nan, 1.]), tx.init(jnp.zeros(2)))[0]
        Array([0., 1.], dtype=float32)
    """
    def init_fn(params):
        return ZeroNansState(tu.tree_map(lambda p: jnp.array(False, dtype=jnp.bool_), params))

    def update_fn(updates, state, params=None):
        found = ZeroNansState(tu.tree_map(lambda p: jnp.any(jnp.isnan(p)), updates))
        return tu.tree_map(lambda p: jnp.where(jnp.isnan(p), jnp.zeros_like(p), p),
                           updates), found
    return GradientTransformation(init_fn, update_fn)


def keep_params_nonnegative():
    """Modify updates so that ``params + updates`` stays non-negative."""
    def update_fn(updates, state, params):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        return tu.tree_map(lambda p, u: None if p is None else jnp.where(p + u < 0.0, -p, u),
                           params, updates, is_leaf=lambda x: x is None), state
    return GradientTransformation(init_empty_state, update_fn)


def centralize():
    """Gradient centralization: subtract each (>1-d) leaf's mean over all but axis 0."""
    def one(g):
        if g.ndim > 1:
            return g - g.mean(tuple(range(1, g.ndim)), keepdims=True)
        return g
    return GradientTransformation(init_empty_state,
                                  lambda u, s, params=None: (tu.tree_map(one, u), s))
