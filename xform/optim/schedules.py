"""Step-size schedules (``optax.schedules``): functions from the step count to a value,
traceable so they run inside ``jit`` with a traced count."""
import logging
import warnings

import xform.numpy as jnp
from xform.optim._base import Schedule  # noqa: F401
from xform.optim._protocols import StatefulSchedule  # noqa: F401
from xform.optim._wrappers import (  # noqa: F401
    InjectHyperparamsState, InjectStatefulHyperparamsState, WrappedSchedule, inject_hyperparams)

__all__ = ["constant_schedule", "polynomial_schedule", "linear_schedule",
           "piecewise_constant_schedule", "exponential_decay", "cosine_decay_schedule",
           "piecewise_interpolate_schedule", "linear_onecycle_schedule",
           "cosine_onecycle_schedule", "warmup_constant_schedule",
           "warmup_cosine_decay_schedule", "warmup_exponential_decay_schedule",
           "sgdr_schedule", "join_schedules", "inject_hyperparams",
           "inject_stateful_hyperparams", "InjectHyperparamsState",
           "InjectStatefulHyperparamsState", "WrappedSchedule", "Schedule", "StatefulSchedule"]


def constant_schedule(value):
    """Always ``value``.

    Example:
        >>> import xform.optim as optax
        >>> optax.constant_schedule(0.1)(100)
        0.1
    """
    return lambda count: value


def polynomial_schedule(init_value, end_value, power, transition_steps, transition_begin=0):
    """From ``init_value`` to ``end_value`` along ``(1 - t/T) ** power`` over
    ``transition_steps`` steps starting at ``transition_begin``.

    Example:
        >>> import xform.optim as optax
        >>> float(optax.polynomial_schedule(1., 0., 2, 10)(5))
        0.25
    """
    if transition_steps <= 0:
        logging.info("polynomial_schedule: non-positive transition_steps gives the constant "
                     "init_value")
        return lambda count: init_value
    transition_begin = max(transition_begin, 0)

    def schedule(count):
        count = jnp.clip(count - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * (frac ** power) + end_value
    return schedule


def linear_schedule(init_value, end_value, transition_steps, transition_begin=0):
    """Linear interpolation from ``init_value`` to ``end_value``.

    Example:
        >>> import xform.optim as optax
        >>> float(optax.linear_schedule(1., 0., 4)(1))
        0.75
    """
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def piecewise_constant_schedule(init_value, boundaries_and_scales=None):
    """``init_value`` multiplied by ``scale`` at each boundary step passed.

    Example:
        >>> import xform.optim as optax
        >>> float(optax.piecewise_constant_schedule(1., {2: 0.5, 4: 0.1})(3))
        0.5
    """
    if boundaries_and_scales is not None:
        if not all(s >= 0.0 for s in boundaries_and_scales.values()):
            raise ValueError("`piecewise_constant_schedule` expects non-negative scale factors")

    def schedule(count):
        v = init_value
        if boundaries_and_scales is not None:
            for threshold, s in sorted(boundaries_and_scales.items()):
                ind = jnp.maximum(0.0, jnp.sign(threshold - count))
                v = v * ind + (1 - ind) * s * v
        return v
    return schedule


def exponential_decay(init_value, transition_steps, decay_rate, transition_begin=0,
                      staircase=False, end_value=None):
    """``init_value * decay_rate ** ((count - transition_begin) / transition_steps)``,
    optionally floored (``staircase``) and bounded by ``end_value``.

    Example:
        >>> import xform.optim as optax
        >>> float(optax.exponential_decay(1., 10, 0.5)(20))
        0.25
    """
    if transition_steps <= 0 or decay_rate == 0:
        logging.info("exponential_decay: non-positive transition_steps or zero decay_rate "
                     "gives the constant init_value")
        return lambda count: init_value
    transition_begin = max(transition_begin, 0)
    clip_fn = jnp.maximum if decay_rate < 1.0 else jnp.minimum

    def schedule(count):
        dec = count - transition_begin
        p = dec / transition_steps
        if staircase:
            p = jnp.floor(p)
        v = jnp.where(dec <= 0, init_value, init_value * jnp.power(decay_rate, p))
        return v if end_value is None else clip_fn(v, end_value)
    return schedule


def cosine_decay_schedule(init_value, decay_steps, alpha=0.0, exponent=1.0):
    """Half a cosine from ``init_value`` down to ``alpha * init_value`` over
    ``decay_steps``.

    Example:
        >>> import xform.optim as optax
        >>> round(float(optax.cosine_decay_schedule(1., 10)(5)), 6)
        0.5
    """
    if not decay_steps > 0:
        raise ValueError(f"The cosine_decay_schedule requires positive decay_steps, "
                         f"got decay_steps={decay_steps!r}.")

    def schedule(count):
        steps = float(decay_steps) if isinstance(decay_steps, int) else decay_steps
        count = float(count) if isinstance(count, int) else count
        count = jnp.minimum(count, steps)
        cos = 0.5 * (1 + jnp.cos(jnp.pi * count / steps))
        return init_value * ((1 - alpha) * cos ** exponent + alpha)
    return schedule


def _linear_interpolate(start, end, pct):
    return (end - start) * pct + start


def _cosine_interpolate(start, end, pct):
    return end + (start - end) / 2.0 * (jnp.cos(jnp.pi * pct) + 1)


def piecewise_interpolate_schedule(interpolate_type, init_value, boundaries_and_scales=None):
    """Piecewise linear or cosine interpolation between values that change by ``scale``
    at each boundary.

    Example:
        >>> import xform.optim as optax
        >>> float(optax.piecewise_interpolate_schedule('linear', 1., {4: 0.5})(2))
        0.75
    """
    if interpolate_type == "linear":
        interp = _linear_interpolate
    elif interpolate_type == "cosine":
        interp = _cosine_interpolate
    else:
        raise ValueError("`interpolate_type` must be either 'cosine' or 'linear'")
    if boundaries_and_scales:
        boundaries, scales = zip(*sorted(boundaries_and_scales.items()))
        if not all(s >= 0.0 for s in scales):
            raise ValueError("`piecewise_interpolate_schedule` expects non-negative scale "
                             "factors")
    else:
        boundaries, scales = (), ()

    def schedule(count):
        bounds = jnp.stack((0,) + boundaries)
        values = jnp.cumprod(jnp.stack((init_value,) + scales))
        sizes = jnp.maximum(bounds[1:] - bounds[:-1], 1)
        ind = jnp.logical_and(bounds[:-1] <= count, count < bounds[1:])
        pct = (count - bounds[:-1]) / sizes
        vals = interp(values[:-1], values[1:], pct)
        return ind.dot(vals) + (bounds[-1] <= count) * values[-1]
    return schedule


def linear_onecycle_schedule(transition_steps, peak_value, pct_start=0.3, pct_final=0.85,
                             div_factor=25.0, final_div_factor=1e4):
    """The one-cycle policy with linear ramps."""
    if transition_steps <= 0:
        raise ValueError("A linear onecycle schedule was set with a non-positive "
                         "`transition_steps`")
    return piecewise_interpolate_schedule(
        "linear", peak_value / div_factor,
        {int(pct_start * transition_steps): div_factor,
         int(pct_final * transition_steps): 1.0 / div_factor,
         transition_steps: 1.0 / final_div_factor})


def cosine_onecycle_schedule(transition_steps, peak_value, pct_start=0.3, div_factor=25.0,
                             final_div_factor=1e4):
    """The one-cycle policy (Smith & Topin, 2017) with cosine ramps up to ``peak_value``
    and down to ``peak_value / (div_factor * final_div_factor)``.

    Example:
        >>> import xform.optim as optax
        >>> round(float(optax.cosine_onecycle_schedule(100, 1.)(30)), 6)
        1.0
    """
    if transition_steps <= 0:
        raise ValueError("A cosine onecycle schedule was set with a non-positive "
                         "`transition_steps`")
    return piecewise_interpolate_schedule(
        "cosine", peak_value / div_factor,
        {int(pct_start * transition_steps): div_factor,
         int(transition_steps): 1.0 / (div_factor * final_div_factor)})


def warmup_constant_schedule(init_value, peak_value, warmup_steps):
    """Linear warmup to ``peak_value``, then constant."""
    return linear_schedule(init_value, peak_value, warmup_steps)


def join_schedules(schedules, boundaries):
    """Run ``schedules[i]`` from ``boundaries[i-1]`` on, each restarted at step 0.

    Example:
        >>> import xform.optim as optax
        >>> s = optax.join_schedules([optax.constant_schedule(1.),
        ...                           optax.linear_schedule(1., 0., 10)], [5])
        >>> float(s(10))
        0.5
    """
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(f"join_schedules needs len(schedules) - 1 boundaries, got "
                         f"{len(schedules)} schedules and {len(boundaries)} boundaries")

    def schedule(step):
        out = schedules[0](step)
        for b, s in zip(boundaries, schedules[1:]):
            out = jnp.where(step < b, out, s(step - b))
        return out
    return schedule


def warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps, decay_steps,
                                 end_value=0.0, exponent=1.0):
    """Linear warmup to ``peak_value``, then cosine decay to ``end_value`` at step
    ``decay_steps`` (which counts the warmup).

    Example:
        >>> import xform.optim as optax
        >>> s = optax.warmup_cosine_decay_schedule(0., 1., 10, 110)
        >>> float(s(5)), float(s(10))
        (0.5, 1.0)
    """
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules(
        [linear_schedule(init_value, peak_value, warmup_steps),
         cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)],
        [warmup_steps])


def warmup_exponential_decay_schedule(init_value, peak_value, warmup_steps, transition_steps,
                                      decay_rate, transition_begin=0, staircase=False,
                                      end_value=None):
    """Linear warmup to ``peak_value``, then :func:`exponential_decay`."""
    return join_schedules(
        [linear_schedule(init_value, peak_value, warmup_steps),
         exponential_decay(peak_value, transition_steps, decay_rate, transition_begin,
                           staircase, end_value)],
        [warmup_steps])


def sgdr_schedule(cosine_kwargs):
    """SGDR (Loshchilov & Hutter, 2016): warm restarts, one
    :func:`warmup_cosine_decay_schedule` per dict of keyword arguments."""
    boundaries, schedules, step = [], [], 0
    for kwargs in cosine_kwargs:
        schedules.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    return join_schedules(schedules, boundaries[:-1])



def inject_stateful_hyperparams(inner_factory, static_args=(), hyperparam_dtype=None):
    """Deprecated alias of :func:`inject_hyperparams` (which takes stateful schedules too).

    Example:
        >>> import warnings, xform.optim as optax
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter('ignore')
        ...     f = optax.schedules.inject_stateful_hyperparams(optax.sgd)
        >>> callable(f)
        True
    """
    warnings.warn("inject_stateful_hyperparams is deprecated, use inject_hyperparams instead",
                  DeprecationWarning)
    return inject_hyperparams(inner_factory, static_args, hyperparam_dtype)
