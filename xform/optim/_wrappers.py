"""Transformations of transformations: masking, partitioning by label, skipping
non-finite steps, gradient accumulation (``MultiSteps``) and hyperparameters held in
the state (``inject_hyperparams``)."""
import functools
import inspect
from typing import Any, NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.core.array_ops import ArrayOps
from xform.optim._tree_state import _ParamsPlaceholder
from xform.optim._base import (GradientTransformation, GradientTransformationExtraArgs,
                               canonicalize_dtype, safe_increment, tree_cast_like,
                               tree_dtype_highest, tree_zeros_like, with_extra_args_support)
from xform.transforms.jit import eval_shape


class MaskedState(NamedTuple):
    inner_state: Any


class MaskedNode(NamedTuple):
    """Stands in for a masked-out subtree: a pytree node with no leaves."""


def _mask_callable(mask):
    leaves = tu.tree_leaves(tu.tree_map(callable, mask))
    return len(leaves) > 0 and all(leaves)


def masked(inner, mask, *, mask_compatible_extra_args=False):
    """Apply ``inner`` only to the leaves where ``mask`` is True; others pass unchanged.

    Args:
        inner: the transformation to mask.
        mask: a pytree of bools with the params' structure (or a prefix of it), or a
            function from the params/updates to one.
        mask_compatible_extra_args: also mask extra arguments shaped like the updates.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.masked(optax.scale(0.), {'a': True, 'b': False})
        >>> g = {'a': jnp.ones(1), 'b': jnp.ones(1)}
        >>> tx.update(g, tx.init(g))[0]
        {'a': Array([0.], dtype=float32), 'b': Array([1.], dtype=float32)}
    """
    inner = with_extra_args_support(inner)

    def mask_pytree(tree, mask_tree):
        try:
            return tu.tree_map(lambda m, p: p if m else MaskedNode(), mask_tree, tree)
        except ValueError as e:
            raise ValueError(f"masked: the mask's structure {tu.tree_structure(mask_tree)} is "
                             f"not a prefix of the params/updates' structure "
                             f"{tu.tree_structure(tree)}: {e}") from None

    def mask_extra(extra, base, mask_tree):
        base_def = tu.tree_structure(base)
        return {k: mask_pytree(v, mask_tree)
                if mask_compatible_extra_args and tu.tree_structure(v) == base_def else v
                for k, v in extra.items()}

    def init_fn(params):
        if isinstance(params, _ParamsPlaceholder):
            # tree_map_params' probe: a mask cannot apply to it, and Optax passes it down
            # unmasked so the inner state marks where params-shaped subtrees sit.
            return MaskedState(inner.init(params))
        mask_tree = mask(params) if _mask_callable(mask) else mask
        return MaskedState(inner.init(mask_pytree(params, mask_tree)))

    def update_fn(updates, state, params=None, **extra_args):
        mask_tree = mask(updates) if _mask_callable(mask) else mask
        extra = mask_extra(extra_args, updates, mask_tree)
        masked_updates = mask_pytree(updates, mask_tree)
        masked_params = None if params is None else mask_pytree(params, mask_tree)
        new, inner_state = inner.update(masked_updates, state.inner_state, masked_params, **extra)
        out = tu.tree_map(lambda m, n, o: n if m else o, mask_tree, new, updates)
        return out, MaskedState(inner_state)
    return GradientTransformationExtraArgs(init_fn, update_fn)


class PartitionState(NamedTuple):
    inner_states: Any


MultiTransformState = PartitionState


def partition(transforms, param_labels, *, mask_compatible_extra_args=False):
    """Apply a different transformation to each group of parameters.

    Args:
        transforms: dict from label to transformation.
        param_labels: a pytree of labels with the params' structure (or a prefix), or a
            function from the params to one.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.multi_transform({'sgd': optax.sgd(1.), 'frozen': optax.set_to_zero()},
        ...                            {'w': 'sgd', 'b': 'frozen'})
        >>> g = {'w': jnp.ones(1), 'b': jnp.ones(1)}
        >>> tx.update(g, tx.init(g))[0]
        {'b': Array([0.], dtype=float32), 'w': Array([-1.], dtype=float32)}
    """
    transforms = {k: with_extra_args_support(v) for k, v in transforms.items()}

    def group_mask(labels, group):
        return tu.tree_map(lambda label: label == group, labels)

    def init_fn(params):
        labels = param_labels(params) if callable(param_labels) else param_labels
        label_set = set(tu.tree_leaves(labels))
        if not label_set.issubset(transforms.keys()):
            raise ValueError(
                "Some parameters have no corresponding transformation.\n"
                f"Parameter labels: {sorted(map(str, label_set))}\n"
                f"Transforms keys: {sorted(map(str, transforms.keys()))}")
        return PartitionState({g: masked(tx, group_mask(labels, g),
                                         mask_compatible_extra_args=mask_compatible_extra_args
                                         ).init(params) for g, tx in transforms.items()})

    def update_fn(updates, state, params=None, **extra_args):
        labels = param_labels(updates) if callable(param_labels) else param_labels
        new_inner = {}
        for g, tx in transforms.items():
            m = masked(tx, group_mask(labels, g),
                       mask_compatible_extra_args=mask_compatible_extra_args)
            updates, new_inner[g] = m.update(updates, state.inner_states[g], params, **extra_args)
        return updates, PartitionState(new_inner)
    return GradientTransformationExtraArgs(init_fn, update_fn)


multi_transform = partition


class ApplyIfFiniteState(NamedTuple):
    notfinite_count: Any
    last_finite: Any
    total_notfinite: Any
    inner_state: Any


def _all_finite(tree):
    leaves = tu.tree_leaves(tree)
    if not leaves:
        return jnp.array(True)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def apply_if_finite(inner, max_consecutive_errors):
    """Skip (zero update, state kept) steps whose updates hold a NaN or inf, unless more
    than ``max_consecutive_errors`` such steps came in a row.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.apply_if_finite(optax.sgd(1.), 2)
        >>> u, s = tx.update(jnp.array([jnp.inf]), tx.init(jnp.zeros(1)))
        >>> u, s.notfinite_count
        (Array([0.], dtype=float32), Array(1, dtype=int32))
    """
    inner = with_extra_args_support(inner)

    def init(params):
        return ApplyIfFiniteState(jnp.zeros([], jnp.int32), jnp.array(True, jnp.bool_),
                                  jnp.zeros([], jnp.int32), inner.init(params))

    def update(updates, state, params=None, **extra_args):
        isfinite = _all_finite(updates)
        count = jnp.where(isfinite, jnp.zeros([], jnp.int32),
                          safe_increment(state.notfinite_count))
        inner_state = state.inner_state
        new_updates, new_inner = lax.cond(
            jnp.logical_or(isfinite, count > max_consecutive_errors),
            lambda _: inner.update(updates, inner_state, params, **extra_args),
            lambda _: (tree_zeros_like(updates), inner_state), None)
        total = jnp.where(isfinite, state.total_notfinite, safe_increment(state.total_notfinite))
        return new_updates, ApplyIfFiniteState(count, isfinite, total, new_inner)
    return GradientTransformationExtraArgs(init, update)


class MultiStepsState(NamedTuple):
    mini_step: Any
    gradient_step: Any
    inner_opt_state: Any
    acc_grads: Any
    skip_state: Any = ()


def skip_not_finite(updates, gradient_step, params):
    """A ``should_skip_update_fn`` for :class:`MultiSteps`: skip non-finite updates."""
    del gradient_step, params
    counts = [jnp.sum(jnp.logical_not(jnp.isfinite(p))) for p in tu.tree_leaves(updates)]
    n = jnp.sum(jnp.stack(counts)) if counts else jnp.array(0)
    return n > 0, {"should_skip": n > 0, "num_not_finite": n}


def skip_large_updates(updates, gradient_step, params, max_squared_norm):
    """A ``should_skip_update_fn``: skip updates whose squared norm reaches the bound."""
    del gradient_step, params
    sq = [jnp.sum(p ** 2) for p in tu.tree_leaves(updates)]
    norm_sq = jnp.sum(jnp.stack(sq)) if sq else jnp.array(0.0)
    skip = jnp.logical_not(norm_sq < max_squared_norm)
    return skip, {"should_skip": skip, "norm_squared": norm_sq}


def _is_array(v):
    """Optax's ``isinstance(v, jax.Array)``: an array or a tracer of one."""
    return isinstance(v, ArrayOps)


class MultiSteps:
    """Gradient accumulation: apply ``opt`` once every ``k`` calls, to the mean (or sum)
    of the gradients of those ``k`` calls; the other calls return zero updates.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> ms = optax.MultiSteps(optax.sgd(1.), every_k_schedule=2)
        >>> s = ms.init(jnp.zeros(1))
        >>> u, s = ms.update(jnp.array([1.]), s)
        >>> u, s = ms.update(jnp.array([3.]), s)
        >>> u
        Array([-2.], dtype=float32)
    """

    def __init__(self, opt, every_k_schedule, use_grad_mean=True, should_skip_update_fn=None,
                 accumulator_dtype=jnp.float32):
        self._opt = with_extra_args_support(opt)
        if isinstance(every_k_schedule, int):
            if every_k_schedule < 1:
                raise ValueError(f"every_k_schedule must be >= 1, got {every_k_schedule}")
            self._every_k_schedule = lambda step: every_k_schedule
        else:
            self._every_k_schedule = every_k_schedule
        self._use_grad_mean = use_grad_mean
        self._accumulator_dtype = canonicalize_dtype(accumulator_dtype)
        if should_skip_update_fn is None:
            def should_skip_update_fn(*unused_args, **unused_kwargs):
                return jnp.array(False, dtype=jnp.bool_), ()
        self._should_skip_update_fn = should_skip_update_fn

    @property
    def inner_opt(self):
        return self._opt

    def _acc(self, g, acc, n):
        return acc + (g - acc) / (n + 1) if self._use_grad_mean else g + acc

    def init(self, params):
        """Initial state: zero accumulators and the inner optimizer's state."""
        gradient_step = jnp.zeros([], dtype=jnp.int32)
        _, skip_state = self._should_skip_update_fn(tree_zeros_like(params), gradient_step,
                                                    params)
        return MultiStepsState(jnp.zeros([], dtype=jnp.int32), gradient_step,
                               self._opt.init(params),
                               tree_zeros_like(params, self._accumulator_dtype), skip_state)

    def update(self, updates, state, params=None, **extra_args):
        """Accumulate ``updates``; every k-th call, run the inner optimizer."""
        k = self._every_k_schedule(state.gradient_step)
        skip, skip_state = self._should_skip_update_fn(updates, state.gradient_step, params)
        skip = jnp.asarray(skip)
        if (skip.dtype, skip.shape) != (jnp.dtype(jnp.bool_), ()):
            raise ValueError("The `should_skip_update_fn` function should return a boolean "
                             f"scalar array, but it returned an array of dtype {skip.dtype} "
                             f"and shape {skip.shape}")

        # The branches take (updates, state, params) as operands, as Optax's do: closed
        # over, a concrete ``emit`` would be a literal, and XLA folds ``emit * nan`` to
        # nan where Optax's select-rewrite gives 0 (NaN gradients, eager).
        def do_update(updates, state, params):
            acc = tu.tree_map(lambda g, a: self._acc(g, a, state.mini_step), updates,
                              state.acc_grads)
            final, new_inner = self._opt.update(tree_cast_like(acc, updates),
                                                state.inner_opt_state, params=params,
                                                **extra_args)
            emit = state.mini_step == k - 1
            new_state = MultiStepsState(
                mini_step=safe_increment(state.mini_step) % k,
                gradient_step=(emit * safe_increment(state.gradient_step)
                               + (1 - emit) * state.gradient_step),
                inner_opt_state=tu.tree_map(
                    lambda st, nst: jnp.where(emit, nst, st).astype(jnp.asarray(st).dtype),
                    state.inner_opt_state, new_inner),
                acc_grads=tu.tree_map(lambda a: ((1 - emit) * a).astype(self._accumulator_dtype),
                                      acc),
                skip_state=skip_state)
            return tu.tree_map(lambda u: emit * u, final), new_state

        def skip_update(updates, state, params):
            static = {k: v for k, v in extra_args.items() if not _is_array(v)}
            dyn = {k: v for k, v in extra_args.items() if _is_array(v)}
            zeros, _ = eval_shape(functools.partial(self._opt.update, **static),
                                  tree_cast_like(state.acc_grads, updates),
                                  state.inner_opt_state, params=params, **dyn)
            zeros = tu.tree_map(lambda z: jnp.zeros(z.shape, z.dtype), zeros)
            return zeros, MultiStepsState(state.mini_step, state.gradient_step,
                                          state.inner_opt_state, state.acc_grads, skip_state)

        return lax.cond(skip, skip_update, do_update, updates, state, params)

    def has_updated(self, state):
        """True when the last call applied the inner optimizer."""
        return jnp.logical_and(state.mini_step == 0, state.gradient_step > 0)

    def gradient_transformation(self):
        """This accumulator as a :class:`GradientTransformation`."""
        return GradientTransformation(init=self.init, update=self.update)


class InjectHyperparamsState(NamedTuple):
    count: Any
    hyperparams: Any
    inner_state: Any


class InjectStatefulHyperparamsState(NamedTuple):
    count: Any
    hyperparams: Any
    hyperparams_states: Any
    inner_state: Any


class WrappedScheduleState(NamedTuple):
    count: Any


class WrappedSchedule:
    """A plain schedule ``f(count)`` as a stateful one (``init``/``update``/``__call__``)."""

    def __init__(self, schedule_fn):
        self.schedule_fn = schedule_fn

    def init(self):
        return WrappedScheduleState(jnp.zeros([], jnp.int32))

    def update(self, state, **extra_args):
        return WrappedScheduleState(safe_increment(state.count))

    def __call__(self, state, **extra_args):
        return self.schedule_fn(state.count)


def _is_stateful_schedule(v):
    return all(callable(getattr(v, a, None)) for a in ("init", "update", "__call__")) \
        and not isinstance(v, type)


def _is_weak_or_python(x):
    if isinstance(x, (bool, int, float, complex)):
        return True
    weak = getattr(x, "weak_type", None)
    if weak is None:
        weak = getattr(getattr(x, "aval", None), "weak_type", False)
    return bool(weak) or isinstance(x, np.ndarray) or np.isscalar(x)


def _convert_floats(x, dtype):
    # Floats given as Python numbers (or weakly typed) follow the params' dtype.
    if not _is_weak_or_python(x):
        return x
    current = x.dtype if hasattr(x, "dtype") else np.dtype(type(x))
    if jnp.issubdtype(current, jnp.floating):
        return jnp.asarray(x, dtype=dtype)
    return x


def inject_hyperparams(inner_factory, static_args=(), hyperparam_dtype=None):
    """Wrap an optimizer factory so its numeric hyperparameters live in the state
    (``state.hyperparams['learning_rate']``), where they can be read or changed between
    steps; callables given for them are schedules evaluated at each step.

    Args:
        inner_factory: e.g. ``optax.adam``.
        static_args: names of arguments to keep as Python values.
        hyperparam_dtype: dtype of float hyperparameters (default: the params' highest).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1)
        >>> s = tx.init(jnp.zeros(1))
        >>> s.hyperparams['learning_rate']
        Array(0.1, dtype=float32)
    """
    static_args = {static_args} if isinstance(static_args, str) else set(static_args)
    sig = inspect.signature(inner_factory)
    if not static_args.issubset(sig.parameters):
        raise ValueError("`static_args` must specify a subset of `inner_factory`'s parameters. "
                         f"Given `static_args`: {static_args}. `inner_factory` parameters: "
                         f"{set(sig.parameters)}")

    @functools.wraps(inner_factory)
    def wrapped(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        sched, numeric, other = {}, {}, {}
        for name, value in bound.arguments.items():
            # NB: classes (dtypes such as jnp.bfloat16) stay static; Optax would take them
            # for schedules and fail
            if name in static_args or isinstance(value, (bool, type)):
                other[name] = value
            elif _is_stateful_schedule(value):
                sched[name] = value
            elif callable(value):
                sched[name] = WrappedSchedule(value)
            elif isinstance(value, (int, float, np.ndarray)) or _is_array(value):
                # as Optax: NumPy scalars other than float64 (np.float32(.9)) stay static
                numeric[name] = value
            else:
                other[name] = value

        def hp_dtype(params):
            return hyperparam_dtype if hyperparam_dtype is not None \
                else tree_dtype_highest(params)

        def init_fn(params):
            dtype = hp_dtype(params)
            hparams = {k: jnp.asarray(_convert_floats(v, dtype)) for k, v in numeric.items()}
            states = {k: f.init() for k, f in sched.items()}
            hparams.update({k: _convert_floats(f(states[k]), dtype) for k, f in sched.items()})
            return InjectStatefulHyperparamsState(jnp.zeros([], jnp.int32), hparams, states,
                                                  inner_factory(**other, **hparams).init(params))

        def update_fn(updates, state, params=None, **extra_args):
            dtype = hp_dtype(params if params is not None else updates)
            hparams = {k: _convert_floats(v, dtype) for k, v in state.hyperparams.items()}
            hparams.update({k: _convert_floats(f(state.hyperparams_states[k], **extra_args),
                                               dtype) for k, f in sched.items()})
            states = {k: f.update(state.hyperparams_states[k], **extra_args)
                      for k, f in sched.items()}
            tx = with_extra_args_support(inner_factory(**other, **hparams))
            updates, inner_state = tx.update(updates, state.inner_state, params, **extra_args)
            return updates, InjectStatefulHyperparamsState(safe_increment(state.count), hparams,
                                                           states, inner_state)
        return GradientTransformationExtraArgs(init_fn, update_fn)
    return wrapped


class ApplyEvery(NamedTuple):
    count: Any
    grad_acc: Any


def apply_every(k=1):
    """Accumulate gradients and emit their sum every ``k`` steps (zeros otherwise)."""
    def init_fn(params):
        return ApplyEvery(jnp.zeros([], jnp.int32), tree_zeros_like(params))

    def update_fn(updates, state, params=None):
        c = state.count % k
        acc = tu.tree_map(lambda g, ga: (c != 0) * ga + g, updates, state.grad_acc)
        emit = c == k - 1
        return (tu.tree_map(lambda ga: emit * ga, acc),
                ApplyEvery(safe_increment(state.count) % k, acc))
    return GradientTransformation(init_fn, update_fn)

