"""The rest of ``optax.transforms``: unit-wise and per-example clipping, freezing,
flattening and monitoring (``snapshot``/``monitor``/``measure_with_ema``)."""
import math
from typing import NamedTuple

import numpy as np

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.transforms.vmap import vmap
from xform.optim._base import (GradientTransformation, GradientTransformationExtraArgs,
                               NO_PARAMS_MSG, _abs_sq, chain, init_empty_state, set_to_zero,
                               stateless, tree_norm, with_extra_args_support)
from xform.optim._basic import ema
from xform.optim._wrappers import masked, partition


def unitwise_norm(x, axis=None):
    """The L2 norm of each unit of ``x`` (a unit: a slice along ``axis``; by default the
    input axes of a linear or convolution kernel), broadcast back to ``x.shape``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.transforms.unitwise_norm(jnp.array([[3., 0.], [4., 1.]]))
        Array([[5., 1.],
               [5., 1.]], dtype=float32)
    """
    x = jnp.asarray(x)
    if axis is not None:
        sq = jnp.sum(_abs_sq(x), axis=axis, keepdims=True)
    elif jnp.squeeze(x).ndim <= 1:
        sq = jnp.sum(_abs_sq(x), keepdims=True)
    elif x.ndim in (2, 3):
        sq = jnp.sum(_abs_sq(x), axis=0, keepdims=True)
    elif x.ndim in (4, 5):
        sq = jnp.sum(_abs_sq(x), axis=tuple(range(x.ndim - 1)), keepdims=True)
    else:
        raise ValueError(f"Expected parameter with shape in {1, 2, 3, 4, 5}, got {x.shape}. "
                         "Use axis parameter to specify reduction axes for other shapes.")
    return jnp.broadcast_to(jnp.sqrt(sq), x.shape)


def unitwise_clip(g_norm, max_norm, grad, div_eps=1e-6):
    """Scale ``grad`` down to ``max_norm`` where its unit norm ``g_norm`` exceeds it.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> g = jnp.array([3., 4.])
        >>> optax.transforms.unitwise_clip(jnp.full(2, 5.), jnp.full(2, 1.), g)
        Array([0.6, 0.8], dtype=float32)
    """
    for name, v in (("max_norm", max_norm), ("grad", grad)):
        if np.shape(v) != np.shape(g_norm):
            raise ValueError(f"unitwise_clip: `{name}` shape {np.shape(v)} differs from "
                             f"`g_norm` shape {np.shape(g_norm)}")
    clipped = grad * (max_norm / jnp.maximum(g_norm, div_eps))
    return jnp.where(g_norm < max_norm, grad, clipped)


def adaptive_grad_clip(clipping, eps=1e-3, axis=None):
    """Clip updates unit-wise to at most ``clipping * max(param_norm, eps)`` (AGC,
    Brock et al. 2021).

    Args:
        clipping: the largest allowed ratio of update norm to parameter norm.
        eps: floor on the parameter norm, so zero-initialized params still move.
        axis: axes of a unit (default: inferred from each leaf's rank).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.adaptive_grad_clip(0.1)
        >>> tx.update(jnp.array([3., 4.]), tx.init(None), jnp.array([1., 0.]))[0]
        Array([0.06, 0.08], dtype=float32)
    """
    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError(NO_PARAMS_MSG)
        g_norm = tu.tree_map(lambda x: unitwise_norm(x, axis=axis), updates)
        p_norm = tu.tree_map(lambda x: unitwise_norm(x, axis=axis), params)
        max_norm = tu.tree_map(lambda x: clipping * jnp.maximum(x, eps), p_norm)
        return tu.tree_map(unitwise_clip, g_norm, max_norm, updates), state
    return GradientTransformation(init_empty_state, update_fn)


def _check_batch_dim(grads, fn):
    leaves = tu.tree_leaves(grads)
    if not leaves or not all(jnp.ndim(g) >= 1 and g.shape[0] == leaves[0].shape[0]
                             for g in leaves):
        raise ValueError(f"Unlike other transforms, `{fn}` expects `grads` to have a batch "
                         "dimension in the 0th axis; got shapes: "
                         f"{tu.tree_map(jnp.shape, grads)}.")


def per_example_global_norm_clip(grads, l2_norm_clip):
    """Clip each example's gradient (leading axis) to global norm ``l2_norm_clip`` and
    sum them (DP-SGD's clipping step).

    Returns:
        ``(clipped_sum, num_clipped)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> grads = [jnp.array([[0., 0.], [3., 4.]])]
        >>> optax.per_example_global_norm_clip(grads, 1.0)
        ([Array([0.6, 0.8], dtype=float32)], Array(1, dtype=int32))
    """
    _check_batch_dim(grads, "per_example_global_norm_clip")
    norms = vmap(tree_norm)(grads)
    multipliers = jnp.nan_to_num(jnp.minimum(l2_norm_clip / norms, 1.0), nan=1.0)
    num_clipped = jnp.sum(multipliers < 1.0)
    return tu.tree_map(lambda g: jnp.tensordot(multipliers, g, axes=1), grads), num_clipped


def per_example_layer_norm_clip(grads, global_l2_norm_clip, uniform=True):
    """Clip per example and per layer: layer ``i`` of ``K`` gets the clip norm
    ``C / sqrt(K)`` (``uniform``) or ``C * sqrt(D_i / D)`` (its share of parameters).

    Returns:
        ``(clipped_sums, nums_clipped)``, each structured like ``grads``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> grads = [jnp.array([[0., 0.], [3., 4.]])]
        >>> optax.per_example_layer_norm_clip(grads, 1.0)
        ([Array([0.6, 0.8], dtype=float32)], [Array(1, dtype=int32)])
    """
    _check_batch_dim(grads, "per_example_layer_norm_clip")
    leaves, treedef = tu.tree_flatten(grads)
    if uniform:
        clips = [global_l2_norm_clip * (1.0 / len(leaves)) ** 0.5 for _ in leaves]
    else:
        total = sum(math.prod(g.shape[1:]) for g in leaves)
        clips = [global_l2_norm_clip * (math.prod(g.shape[1:]) / total) ** 0.5
                 for g in leaves]
    results = [per_example_global_norm_clip(g, c) for g, c in zip(leaves, clips)]
    return (tu.tree_unflatten(treedef, [r[0] for r in results]),
            tu.tree_unflatten(treedef, [r[1] for r in results]))


def freeze(mask):
    """Zero the updates where ``mask`` (a static bool or bool pytree) is True.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.transforms.freeze({'a': True, 'b': False})
        >>> g = {'a': jnp.ones(1), 'b': jnp.ones(1)}
        >>> tx.update(g, tx.init(g))[0]
        {'a': Array([0.], dtype=float32), 'b': Array([1.], dtype=float32)}
    """
    return masked(set_to_zero(), mask)


def selective_transform(optimizer, *, freeze_mask):
    """Run ``optimizer`` on the leaves where ``freeze_mask`` is False, zero the others.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.transforms.selective_transform(optax.sgd(1.), freeze_mask={'a': True,
        ...                                           'b': False})
        >>> g = {'a': jnp.ones(1), 'b': jnp.ones(1)}
        >>> tx.update(g, tx.init(g))[0]
        {'a': Array([0.], dtype=float32), 'b': Array([-1.], dtype=float32)}
    """
    def label_fn(params):
        return tu.tree_map(lambda m: "freeze" if m else "train", freeze_mask)
    return partition({"train": optimizer, "freeze": set_to_zero()}, param_labels=label_fn)


def flatten(inner):
    """Run ``inner`` on one vector holding all leaves (fewer, larger ops).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.flatten(optax.sgd(1.))
        >>> g = {'a': jnp.ones(1), 'b': jnp.ones((1, 2))}
        >>> tx.update(g, tx.init(g))[0]['b']
        Array([[-1., -1.]], dtype=float32)
    """
    inner = with_extra_args_support(inner)

    def _flatten(tree):
        return jnp.concatenate([jnp.reshape(x, [-1]) for x in tu.tree_leaves(tree)])

    def _unflatten(like, flat):
        leaves, treedef = tu.tree_flatten(like)
        offsets = np.cumsum([np.size(x) for x in leaves])[:-1]
        pieces = jnp.split(flat, [int(o) for o in offsets])
        return tu.tree_unflatten(treedef, [jnp.reshape(p, jnp.shape(x))
                                           for p, x in zip(pieces, leaves)])

    def init_fn(params):
        return inner.init(_flatten(params))

    def update_fn(updates, state, params=None, **extra_args):
        if params is not None:
            params = _flatten(params)
        flat, state = inner.update(_flatten(updates), state, params, **extra_args)
        return _unflatten(updates, flat), state
    return GradientTransformationExtraArgs(init_fn, update_fn)


class SnapshotState(NamedTuple):
    measurement: dict


def snapshot(measure_name, measure):
    """Store ``measure(updates)`` in the state under ``measure_name`` (read it back with
    ``optax.tree.get(state, measure_name)``); updates pass unchanged.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.transforms.snapshot('norm', optax.tree.norm)
        >>> _, s = tx.update(jnp.array([3., 4.]), tx.init(jnp.zeros(2)))
        >>> float(optax.tree.get(s, 'norm'))
        5.0
    """
    def init_fn(params):
        return SnapshotState({measure_name: measure(params)})

    def update_fn(updates, state, params=None):
        return updates, SnapshotState({measure_name: measure(updates)})
    return GradientTransformation(init_fn, update_fn)


class MonitorState(NamedTuple):
    measurements: dict
    measure_states: tuple


def monitor(measures):
    """Record several measurements of the updates, each a plain callable or a
    (stateful) transformation such as :func:`measure_with_ema`; updates pass unchanged.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.monitor({'norm': optax.tree.norm})
        >>> _, s = tx.update(jnp.array([3., 4.]), tx.init(jnp.zeros(2)))
        >>> float(optax.tree.get(s, 'norm'))
        5.0
    """
    txs = {}
    for name, m in measures.items():
        if callable(m):
            m = stateless(lambda u, _, m=m: m(u))
        txs[name] = with_extra_args_support(m)
    names = tuple(txs)

    def init_fn(params):
        return MonitorState({}, tuple(txs[n].init(params) for n in names))

    def update_fn(updates, state, params=None, **extra_args):
        measurements, new_states = {}, []
        for n, s in zip(names, state.measure_states):
            measurements[n], s = txs[n].update(updates, s, params, **extra_args)
            new_states.append(s)
        return updates, MonitorState(measurements, tuple(new_states))
    return GradientTransformationExtraArgs(init_fn, update_fn)


def measure_with_ema(measure, decay, debias=True, accumulator_dtype=None):
    """A measurement of the updates averaged by an exponential moving average (its
    ``update`` returns the average, so use it inside :func:`monitor`).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.measure_with_ema(optax.tree.norm, decay=0.5)
        >>> tx.update(jnp.array([3., 4.]), tx.init(jnp.zeros(2)))[0]
        Array(5., dtype=float32)
    """
    base = ema(decay, debias, accumulator_dtype)
    measured = base._replace(init=lambda params: base.init(measure(params)))
    return chain(stateless(lambda updates, _: measure(updates)), measured)
