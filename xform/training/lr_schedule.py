"""Per-epoch learning-rate schedules of Flax's image-classification examples
(``flax.training.lr_schedule``; deprecated there in favour of :mod:`xform.optim`
schedules). Each returns ``f(step) -> lr``; ``warmup_length`` epochs ramp it up from 0."""
import logging

import numpy as np

import xform.numpy as jnp

__all__ = ["create_constant_learning_rate_schedule", "create_cosine_learning_rate_schedule",
           "create_stepped_learning_rate_schedule"]

_DEPRECATED = ("Learning rate schedules in ``flax.training`` are effectively deprecated in "
               "favor of Optax schedules. Please refer to https://optax.readthedocs.io/en/"
               "latest/api.html#optimizer-schedules for alternatives.")


def _warmup(lr, step, warmup_length, steps_per_epoch):
    if warmup_length > 0.0:
        lr = lr * jnp.minimum(1.0, step / float(warmup_length) / steps_per_epoch)
    return lr


def create_constant_learning_rate_schedule(base_learning_rate, steps_per_epoch,
                                           warmup_length=0.0):
    """``base_learning_rate`` after the warmup.

    >>> f = create_constant_learning_rate_schedule(0.1, 10, warmup_length=1)
    >>> round(float(f(5)), 4), round(float(f(20)), 4)
    (0.05, 0.1)
    """
    logging.getLogger(__name__).warning(_DEPRECATED)
    return lambda step: _warmup(base_learning_rate, step, warmup_length, steps_per_epoch)


def create_stepped_learning_rate_schedule(base_learning_rate, steps_per_epoch,
                                          lr_sched_steps, warmup_length=0.0):
    """``base_learning_rate`` times the factor of the last ``[epoch, factor]`` step passed.

    >>> f = create_stepped_learning_rate_schedule(1., 10, [[1, 0.1], [2, 0.01]])
    >>> [round(float(f(s)), 4) for s in (5, 15, 25)]
    [1.0, 0.1, 0.01]
    """
    logging.getLogger(__name__).warning(_DEPRECATED)
    boundaries = np.round(np.array([s[0] for s in lr_sched_steps]) * steps_per_epoch)
    boundaries = boundaries.astype(int)
    values = np.array([1.0] + [s[1] for s in lr_sched_steps]) * base_learning_rate

    def learning_rate_fn(step):
        lr = jnp.take(values, jnp.sum(boundaries < step))
        return _warmup(lr, step, warmup_length, steps_per_epoch)
    return learning_rate_fn


def create_cosine_learning_rate_schedule(base_learning_rate, steps_per_epoch,
                                         halfcos_epochs, warmup_length=0.0):
    """Half a cosine wave from ``base_learning_rate`` to 0 over ``halfcos_epochs``.

    >>> f = create_cosine_learning_rate_schedule(1., 10, 2)
    >>> [round(float(f(s)), 4) for s in (0, 10, 20)]
    [1.0, 0.5, 0.0]
    """
    logging.getLogger(__name__).warning(_DEPRECATED)
    halfwavelength_steps = halfcos_epochs * steps_per_epoch

    def learning_rate_fn(step):
        scale_factor = jnp.cos(step * jnp.pi / halfwavelength_steps) * 0.5 + 0.5
        return _warmup(base_learning_rate * scale_factor, step, warmup_length,
                       steps_per_epoch)
    return learning_rate_fn
