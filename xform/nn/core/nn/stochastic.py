"""``flax.core.nn.stochastic``: ``dropout`` as a scope function."""
import xform.numpy as jnp
from xform import lax, random

__all__ = ["dropout"]


def dropout(scope, inputs, rate, deterministic=False, rng=None):
    """Zeroes each input with probability ``rate`` and scales the rest by
    ``1 / (1 - rate)`` (identity when ``deterministic``); the mask's key is ``rng`` or
    ``scope.make_rng('dropout')``."""
    if rate == 0.0 or deterministic:
        return inputs
    keep_prob = 1.0 - rate
    if rng is None:
        rng = scope.make_rng("dropout")
    mask = random.bernoulli(rng, p=keep_prob, shape=inputs.shape)
    return lax.select(mask, inputs / keep_prob, jnp.zeros_like(inputs))
