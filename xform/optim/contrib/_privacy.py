"""Differentially private SGD (Abadi et al., 2016): clip per-example gradients to a global
norm, sum them, add Gaussian noise and average."""
import warnings
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform import random
from xform.core import dtypes, tree_util as tu
from xform.transforms.vmap import vmap
from xform.optim._base import GradientTransformation, chain, identity, tree_norm
from xform.optim._basic import scale_by_learning_rate, trace


class DifferentiallyPrivateAggregateState(NamedTuple):
    """State of :func:`differentially_private_aggregate`: the PRNG key for the noise."""
    rng_key: Any


def _canonicalize_key(key_or_seed):
    if hasattr(key_or_seed, "dtype") and jnp.issubdtype(key_or_seed.dtype,
                                                        dtypes.prng_key):
        return key_or_seed
    return random.key(key_or_seed)


def _per_example_global_norm_clip(grads, l2_norm_clip):
    # each example's gradient (row i of every leaf) scaled to global norm <= l2_norm_clip,
    # then summed over the batch
    if not grads or any(g.ndim == 0 or g.shape[0] != grads[0].shape[0] for g in grads):
        raise ValueError("Unlike other transforms, `per_example_global_norm_clip` expects"
                         " `grads` to have a batch dimension in the 0th axis.")
    norms = vmap(tree_norm)(grads)
    multipliers = jnp.nan_to_num(jnp.minimum(l2_norm_clip / norms, 1.0), nan=1.0)
    return [jnp.tensordot(multipliers, g, axes=1) for g in grads]


def differentially_private_aggregate(l2_norm_clip, noise_multiplier, key=None, *, seed=None):
    """Aggregate per-example gradients as DP-SGD does: clip each example's gradient to
    global norm ``l2_norm_clip``, sum, add ``N(0, (l2_norm_clip * noise_multiplier)^2)``
    noise and divide by the batch size.

    The updates must carry the batch on axis 0 of every leaf (per-example gradients, e.g.
    from ``xform.vmap(xform.grad(loss))``), so this goes first in a chain.

    Args:
        l2_norm_clip: the largest L2 norm of one example's gradient.
        noise_multiplier: the noise's standard deviation over ``l2_norm_clip``.
        key: a PRNG key (or an int seed) for the noise.
        seed: deprecated, use ``key``.

    Returns:
        A :class:`~xform.optim.GradientTransformation`.

    Raises:
        ValueError: if both ``seed`` and ``key`` are given.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.differentially_private_aggregate(1.0, 0.0, xform.random.key(0))
        >>> tx.init(None).rng_key.dtype
        key<fry>
    """
    if seed is not None:
        warnings.warn('"seed" is deprecated and will be removed in optax 0.2.7, use "key".',
                      DeprecationWarning)
        if key is not None:
            raise ValueError("Only one of seed or key can be specified.")
        key = random.key(seed)
    if key is None:
        warnings.warn("Specifying a key will be required in optax 0.2.7.")
        key = random.key(0)
    key = _canonicalize_key(key)
    noise_std = l2_norm_clip * noise_multiplier

    def init_fn(params):
        return DifferentiallyPrivateAggregateState(key)

    def update_fn(updates, state, params=None):
        grads, treedef = tu.tree_flatten(updates)
        bsize = grads[0].shape[0] if grads else 0
        clipped = _per_example_global_norm_clip(grads, l2_norm_clip)
        new_key, *rngs = random.split(state.rng_key, len(grads) + 1)
        noised = [(g + noise_std * random.normal(r, g.shape, g.dtype)) / bsize
                  for g, r in zip(clipped, rngs)]
        return tu.tree_unflatten(treedef, noised), DifferentiallyPrivateAggregateState(new_key)
    return GradientTransformation(init_fn, update_fn)


def dpsgd(learning_rate, l2_norm_clip, noise_multiplier, seed, momentum=None, nesterov=False):
    """DP-SGD: :func:`differentially_private_aggregate`, optional momentum, then SGD.

    Args:
        learning_rate: a fixed global scale.
        l2_norm_clip: the largest L2 norm of one example's gradient.
        noise_multiplier: the noise's standard deviation over ``l2_norm_clip``.
        seed: the noise's initial seed.
        momentum: momentum decay (None: no momentum).
        nesterov: use Nesterov momentum.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs` expecting per-example
        gradients (batch on axis 0).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> import warnings; warnings.simplefilter('ignore', DeprecationWarning)
        >>> tx = optax.contrib.dpsgd(0.1, l2_norm_clip=1.0, noise_multiplier=0.0, seed=0)
        >>> tx.update(jnp.array([[3., 4.]]), tx.init(jnp.zeros(2)))[0].round(4)
        Array([-0.06, -0.08], dtype=float32)
    """
    return chain(differentially_private_aggregate(l2_norm_clip=l2_norm_clip,
                                                  noise_multiplier=noise_multiplier, seed=seed),
                 trace(decay=momentum, nesterov=nesterov) if momentum is not None
                 else identity(),
                 scale_by_learning_rate(learning_rate))


__all__ = ["DifferentiallyPrivateAggregateState", "differentially_private_aggregate", "dpsgd"]
