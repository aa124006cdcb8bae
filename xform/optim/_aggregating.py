"""``optax.experimental.aggregating``: transformations over per-example gradients
(``[*batch, *params]``) that average, accumulate across microbatches and track gradient
mean and variance, chained by :func:`process`."""
import math
from typing import Any, NamedTuple, Protocol, Sequence

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import (GradientTransformation, GradientTransformationExtraArgs, chain,
                               identity, init_empty_state, safe_increment, tree_zeros_like)
from xform.optim._tree_state import tree_get
from xform.optim.tree_utils import tree_scale, tree_where

PerElementUpdates = AggregatedUpdates = Any
MaybeAxis = int | Sequence[int] | None


class AggregatorUpdateFn(Protocol):
    """``update(per_elt_updates, state, params=None, **extra) -> (aggregated, state)``."""

    def __call__(self, per_elt_updates, state, params=None, **extra_args): ...


class Aggregator(GradientTransformationExtraArgs):
    """A transformation whose ``update`` takes per-example updates (a leading batch
    axis) and returns params-shaped ones."""


def process(preprocessor, aggregator, postprocessor, aggregator_has_aux=False):
    """``preprocessor`` on per-example updates, then ``aggregator``, then
    ``postprocessor`` (run only when the aggregator's state says ``ready``; zeros
    otherwise). With ``aggregator_has_aux`` the aggregator returns ``(updates, aux)``
    and ``aux`` is passed to the postprocessor as extra keyword arguments.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> agg = optax.experimental.aggregating
        >>> tx = agg.process(optax.identity(), agg.average_per_element_updates(),
        ...                  optax.sgd(1.))
        >>> tx.update(jnp.array([[1.], [3.]]), tx.init(jnp.zeros(1)))[0]
        Array([-2.], dtype=float32)
    """
    def init_fn(params):
        return preprocessor.init(params), aggregator.init(params), postprocessor.init(params)

    def update_fn(indiv_grads, states, params=None, **extra_args):
        pre_state, agg_state, post_state = states
        indiv, pre_state = preprocessor.update(indiv_grads, pre_state, params, **extra_args)
        aggregated, agg_state = aggregator.update(indiv, agg_state, params, **extra_args)
        if aggregator_has_aux:
            avg, aux = aggregated
            extra_args = extra_args | aux
        else:
            avg = aggregated
        updates, post_state = lax.cond(
            tree_get(agg_state, "ready", True),
            lambda g, s, p, kw: postprocessor.update(g, s, p, **kw),
            lambda g, s, *_: (tree_zeros_like(avg), s),
            avg, post_state, params, extra_args)
        return updates, (pre_state, agg_state, post_state)

    if isinstance(aggregator, Aggregator):
        return Aggregator(init_fn, update_fn)
    return GradientTransformationExtraArgs(init_fn, update_fn)


def average_per_element_updates(per_elt_axis=0):
    """Average the per-example updates over ``per_elt_axis``."""
    def update_fn(per_elt_updates, state, params=None):
        return tu.tree_map(lambda x: jnp.mean(x, axis=per_elt_axis), per_elt_updates), state
    return Aggregator(init_empty_state, update_fn)


class AccumulateAvgUpdatesState(NamedTuple):
    """State of :func:`accumulate_avg_updates`."""
    micro_step: Any
    ready: Any
    avg_grad: Any


def accumulate_avg_updates(accumulation_steps):
    """Average updates over ``accumulation_steps`` calls; emit the average (and set
    ``ready``) on the last, zeros before.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.experimental.aggregating.accumulate_avg_updates(2)
        >>> s = tx.init(jnp.zeros(1))
        >>> u, s = tx.update(jnp.ones(1), s)
        >>> tx.update(3 * jnp.ones(1), s)[0]
        Array([2.], dtype=float32)
    """
    if accumulation_steps < 1:
        raise ValueError("accumulation_steps must be larger than or equal to 1.")
    if accumulation_steps == 1:
        return identity()

    def init_fn(params):
        return AccumulateAvgUpdatesState(jnp.asarray(0), jnp.asarray(False),
                                         tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        step = state.micro_step + 1
        avg = tu.tree_map(lambda u, a: a + (u - a) / step, updates, state.avg_grad)
        ready = AccumulateAvgUpdatesState(jnp.asarray(0), jnp.asarray(True),
                                          tree_zeros_like(avg))
        not_ready = AccumulateAvgUpdatesState(step, jnp.asarray(False), avg)
        return tree_where(step == accumulation_steps, (avg, ready),
                          (tree_zeros_like(avg), not_ready))
    return GradientTransformation(init_fn, update_fn)


def average_incrementally_updates(per_elt_axis, accumulation_steps):
    """Average over ``per_elt_axis`` (if not None), then over ``accumulation_steps``
    calls."""
    if per_elt_axis is None:
        return accumulate_avg_updates(accumulation_steps)
    agg = chain(average_per_element_updates(per_elt_axis),
                accumulate_avg_updates(accumulation_steps))
    return Aggregator(agg.init, agg.update)


def get_batch_size_from_per_elt_updates(per_elt_updates, per_elt_axis):
    """The batch size of per-example updates (the product of ``per_elt_axis`` sizes).

    Raises:
        ValueError: if leaves disagree.
    """
    def size(u):
        if isinstance(per_elt_axis, int):
            return u.shape[per_elt_axis]
        return math.prod(u.shape[i] for i in per_elt_axis)
    sizes = [size(u) for u in tu.tree_leaves(per_elt_updates)]
    if not all(b == sizes[0] for b in sizes):
        raise ValueError(f"Per-element updates must have the same batch size. Got: {sizes}")
    return sizes[0]


class PerElementMeanAndSumSqDiffGradsState(NamedTuple):
    """State of :func:`get_per_element_mean_and_sum_sq_diff_grads`."""
    micro_step: Any
    ready: Any
    mean_grads: Any
    sum_sq_diff_grads: Any


def _batch_mean_and_sum_sq_diff(per_elt_updates, per_elt_axis):
    mean = tu.tree_map(lambda x: jnp.mean(x, axis=per_elt_axis, keepdims=True),
                       per_elt_updates)
    ssd = tu.tree_map(lambda x, a: jnp.sum(jnp.square(x - a), axis=per_elt_axis),
                      per_elt_updates, mean)
    return tu.tree_map(lambda x: x.squeeze(axis=per_elt_axis), mean), ssd


def get_per_element_mean_and_sum_sq_diff_grads(per_elt_axis=0, accumulation_steps=1):
    """An aggregator returning ``(mean, {'sum_sq_diff_grads', 'sample_size'})`` of the
    per-example updates, merged across ``accumulation_steps`` calls (Chan et al.'s
    parallel variance update).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> agg = optax.experimental.aggregating.get_per_element_mean_and_sum_sq_diff_grads()
        >>> (m, aux), _ = agg.update(jnp.array([[1.], [3.]]), agg.init(jnp.zeros(1)))
        >>> m, aux['sum_sq_diff_grads']
        (Array([2.], dtype=float32), Array([2.], dtype=float32))
    """
    def single(per_elt_updates, state, params=None):
        batch = get_batch_size_from_per_elt_updates(per_elt_updates, per_elt_axis)
        mean, ssd = _batch_mean_and_sum_sq_diff(per_elt_updates, per_elt_axis)
        return (mean, {"sum_sq_diff_grads": ssd, "sample_size": batch}), state

    if accumulation_steps == 1:
        return Aggregator(init_empty_state, single)

    def init_fn(params):
        return PerElementMeanAndSumSqDiffGradsState(
            jnp.asarray(0, dtype=jnp.int32), jnp.asarray(False), tree_zeros_like(params),
            tree_zeros_like(params))

    def update_fn(per_elt_updates, state, params=None):
        batch = get_batch_size_from_per_elt_updates(per_elt_updates, per_elt_axis)
        step = state.micro_step + 1
        b_mean, b_ssd = _batch_mean_and_sum_sq_diff(per_elt_updates, per_elt_axis)
        delta = tu.tree_map(lambda u, a: u - a, b_mean, state.mean_grads)
        mean = tu.tree_map(lambda a, d: a + d / step, state.mean_grads, delta)
        size_factor = state.micro_step * batch / step
        ssd = tu.tree_map(lambda a, s, d: a + s + d ** 2 * size_factor,
                          state.sum_sq_diff_grads, b_ssd, delta)
        outputs = (mean, {"sum_sq_diff_grads": ssd, "sample_size": batch * step})
        ready = PerElementMeanAndSumSqDiffGradsState(
            jnp.asarray(0, dtype=jnp.int32), jnp.asarray(True), tree_zeros_like(mean),
            tree_zeros_like(ssd))
        not_ready = PerElementMeanAndSumSqDiffGradsState(step, jnp.asarray(False), mean, ssd)
        return tree_where(step == accumulation_steps, (outputs, ready),
                          (tree_zeros_like(outputs), not_ready))
    return Aggregator(init_fn, update_fn)


class PerElementMeanAndVarianceEMAState(NamedTuple):
    """State of :func:`track_per_element_mean_and_variance_with_ema`."""
    count: Any
    ema_decay: Any
    mean_grads_ema: Any
    variance_grads_ema: Any


def track_per_element_mean_and_variance_with_ema(ema_decay=0.9):
    """Track EMAs of the gradient mean and (unbiased) variance, read from the
    ``sum_sq_diff_grads`` and ``sample_size`` extra arguments; updates pass unchanged."""
    def init_fn(params):
        return PerElementMeanAndVarianceEMAState(
            jnp.zeros([], jnp.int32), jnp.asarray(ema_decay), tree_zeros_like(params),
            tree_zeros_like(params))

    def update_fn(updates, state, params=None, *, sum_sq_diff_grads, sample_size):
        def ema(x, y):
            return (1.0 - ema_decay) * x + ema_decay * y
        mean = tu.tree_map(ema, updates, state.mean_grads_ema)
        var = tu.tree_map(ema, tree_scale(1 / (sample_size - 1), sum_sq_diff_grads),
                          state.variance_grads_ema)
        return updates, state._replace(count=safe_increment(state.count),
                                       mean_grads_ema=mean, variance_grads_ema=var)
    return GradientTransformationExtraArgs(init_fn, update_fn)


def get_unbiased_mean_and_variance_ema(state):
    """The debiased mean and variance EMAs held in an optimizer state.

    Raises:
        ValueError: if the state has no ``PerElementMeanAndVarianceEMAState``.
    """
    s = tree_get(state, "PerElementMeanAndVarianceEMAState", None)
    if s is None:
        raise ValueError("State must have PerElementMeanAndVarianceEMAState to compute "
                         "unbiased mean and variance EMA.")
    debias = 1 - s.ema_decay ** s.count
    return (tu.tree_map(lambda x: x / debias, s.mean_grads_ema),
            tu.tree_map(lambda x: x / debias, s.variance_grads_ema))


def add_mean_variance_to_opt(opt, ema_decay=0.9, per_elt_axis=0, accumulation_steps=1):
    """``opt`` fed per-example gradients, tracking their mean and variance EMAs (read
    them with :func:`get_unbiased_mean_and_variance_ema`).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> agg = optax.experimental.aggregating
        >>> tx = agg.add_mean_variance_to_opt(optax.sgd(1.))
        >>> _, s = tx.update(jnp.array([[1.], [3.]]), tx.init(jnp.zeros(1)))
        >>> mean, var = agg.get_unbiased_mean_and_variance_ema(s)
        >>> [round(float(mean[0]), 4), round(float(var[0]), 4)]
        [2.0, 2.0]
    """
    return process(
        preprocessor=identity(),
        aggregator=get_per_element_mean_and_sum_sq_diff_grads(per_elt_axis,
                                                               accumulation_steps),
        postprocessor=chain(track_per_element_mean_and_variance_with_ema(ema_decay), opt),
        aggregator_has_aux=True)
