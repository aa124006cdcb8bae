"""``jax.example_libraries.optimizers``: optimizers as ``(init_fun, update_fun,
get_params)`` triples over pytrees, learning-rate schedules, and (de)serialization helpers.

Each optimizer takes ``step_size`` (a positive scalar, or a schedule mapping the step
index to one) and its hyperparameters, and returns an ``(init_fun, update_fun,
get_params)`` triple. It is written for one array (``init(x0) -> state``,
``update(i, g, state) -> state``, ``get_params(state) -> x``) and lifted to pytrees by
:func:`optimizer`. The
lifted state is an :class:`OptimizerState`: the flattened per-leaf states plus the outer
and inner tree structures, a pytree whose only children are the packed states. Formulas
keep JAX's order of operations so states match JAX's step for step.

>>> import xform.numpy as jnp
>>> opt_init, opt_update, get_params = sgd(0.5)
>>> state = opt_update(0, {"w": jnp.ones(2)}, opt_init({"w": jnp.zeros(2)}))
>>> get_params(state)["w"].tolist()
[-0.5, -0.5]
"""
from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu

__all__ = [
    "Optimizer", "OptimizerState", "JoinPoint", "optimizer", "sgd", "momentum",
    "nesterov", "adagrad", "rmsprop", "rmsprop_momentum", "adam", "adamax", "sm3",
    "constant", "exponential_decay", "inverse_time_decay", "polynomial_decay",
    "piecewise_constant", "make_schedule", "l2_norm", "clip_grads",
    "unpack_optimizer_state", "pack_optimizer_state"]

# The packed state: one flat list of inner-state leaves per parameter leaf, the outer
# (parameter) treedef, and one inner treedef per parameter leaf. Only ``packed_state``
# is a child, so transforms see the arrays and the structures ride along as aux data.
OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
tu.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))

Array = Any
Params = Any    # any pytree of arrays
State = Any     # one leaf's optimizer state
Updates = Params
InitFn = Callable[[Params], OptimizerState]
Step = int
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], float]


class Optimizer(NamedTuple):
    """An optimizer: ``(init_fn, update_fn, params_fn)``, unpacked as a triple."""
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _flatten_all(trees):
    """``(tuple of leaf lists, tuple of treedefs)`` of each tree (JAX's unzip2 layout)."""
    flat = [tu.tree_flatten(t) for t in trees]
    return tuple(leaves for leaves, _ in flat), tuple(tree for _, tree in flat)


def _unpack(opt_state, who):
    if not (isinstance(opt_state, tuple) and len(opt_state) == 3):
        raise TypeError(f"{who} expects the OptimizerState made by the optimizer's "
                        f"init_fn, got {type(opt_state).__name__}")
    states_flat, tree, subtrees = opt_state
    return [tu.tree_unflatten(d, s) for d, s in zip(subtrees, states_flat, strict=True)], tree


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]
              ) -> Callable[..., Optimizer]:
    """Decorator lifting an optimizer written for single arrays to pytrees of them.

    Args:
      opt_maker: returns an ``(init, update, get_params)`` triple acting on one array
        (``init(x0)`` may return any pytree of arrays as that leaf's state).

    Returns:
      A function with ``opt_maker``'s signature returning an :class:`Optimizer` whose
      functions take and return pytrees, the state being an :class:`OptimizerState`.

    Raises:
      TypeError: from ``update_fun`` when the gradient tree's structure differs from the
        parameters', or the per-leaf ``update`` changes its state's structure.
    """
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = tu.tree_flatten(x0_tree)
            states_flat, subtrees = _flatten_all([init(x0) for x0 in x0_flat])
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            states, tree = _unpack(opt_state, "update_fun")
            grad_flat, grad_def = tu.tree_flatten(grad_tree)
            if grad_def != tree:
                raise TypeError(
                    "optimizer update function was passed a gradient tree that did not "
                    "match the parameter tree structure with which it was initialized: "
                    f"parameter tree {tree} and grad tree {grad_def}.")
            new_states = [update(i, g, s) for g, s in zip(grad_flat, states)]
            new_flat, new_subtrees = _flatten_all(new_states)
            for old, new in zip(opt_state[2], new_subtrees):
                if new != old:
                    raise TypeError(
                        "optimizer update function produced an output structure that did "
                        f"not match its input structure: input {old} and output {new}.")
            return OptimizerState(new_flat, tree, opt_state[2])

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            states, tree = _unpack(opt_state, "get_params")
            return tu.tree_unflatten(tree, [get_params(s) for s in states])

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


# ---- optimizers (each: step_size is a scalar or a schedule i -> scalar) ----

def _params_first(state):
    return state[0]


@optimizer
def sgd(step_size):
    """Stochastic gradient descent: ``x - step_size(i) * g``."""
    step_size = make_schedule(step_size)
    return Optimizer(lambda x0: x0, lambda i, g, x: x - step_size(i) * g, lambda x: x)


@optimizer
def momentum(step_size: Schedule, mass: float):
    """SGD with (heavy-ball) momentum.

    Args:
      mass: the momentum coefficient.
    """
    return _with_velocity(step_size, mass, nesterov=False)


@optimizer
def nesterov(step_size: Schedule, mass: float):
    """SGD with Nesterov momentum: the step looks ahead along the new velocity.

    Args:
      mass: the momentum coefficient.
    """
    return _with_velocity(step_size, mass, nesterov=True)


def _with_velocity(step_size, mass, nesterov):
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g if nesterov else velocity), velocity
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _params_first


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al. 2011) with momentum on the scaled gradient.

    Args:
      momentum: the momentum coefficient.
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        g_sq_inv_sqrt = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return init, update, _params_first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: the gradient over the root of a decaying mean of its square.

    Args:
      gamma: the decay of the squared-gradient average.
      eps: added to the average under the square root.
    """
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _params_first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum (a separate optimizer: it keeps one more state array).

    Args:
      gamma: the decay of the squared-gradient average.
      eps: added to the average under the square root.
      momentum: the momentum coefficient.
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom
    return init, update, _params_first


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma & Ba 2014) with bias-corrected moments.

    Args:
      b1: decay rate of the first-moment estimate.
      b2: decay rate of the second-moment estimate.
      eps: added to the root of the second moment.
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        vhat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps), m, v
    return init, update, _params_first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax: Adam with the infinity norm in place of the second moment.

    Args:
      b1: decay rate of the first-moment estimate.
      b2: decay rate of the weighted infinity norm.
      eps: added to the norm.
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m / (u + eps)
        return x, m, u
    return init, update, _params_first


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al. 2019): one accumulator per axis, their minimum bounds each entry's.

    Args:
      momentum: the momentum coefficient.
    """
    step_size = make_schedule(step_size)

    def along(ndim, v, axis):   # v (one axis's accumulator) broadcastable along `axis`
        return v[tuple(slice(None) if d == axis else None for d in range(ndim))]

    def init(x0):
        x_shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        return x0, jnp.zeros_like(x0), [jnp.zeros(n, x0.dtype) for n in x0.shape], x_shape

    def update(i, g, state):
        x, m, vs, x_shape = state
        accum = functools.reduce(jnp.minimum, [along(g.ndim, v, a) for a, v in
                                               enumerate(vs)]) + jnp.square(g)
        accum_inv_sqrt = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * accum_inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(tuple(d for d in range(x.ndim) if d != a)) for a in range(x.ndim)]
        return x, m, vs, x_shape

    def get_params(state):
        x, _, _, x_shape = state
        return x.reshape(x_shape)
    return init, update, get_params


# ---- learning-rate schedules: step index -> step size ----

def constant(step_size) -> Schedule:
    """The schedule ``i -> step_size``."""
    return lambda i: step_size


def exponential_decay(step_size, decay_steps, decay_rate):
    """``step_size * decay_rate ** (i / decay_steps)``."""
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """``step_size / (1 + decay_rate * i / decay_steps)`` (``floor(i / decay_steps)``
    in place of ``i / decay_steps`` when ``staircase``)."""
    if staircase:
        return lambda i: step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """From ``step_size`` to ``final_step_size`` over ``decay_steps`` steps along
    ``(1 - i / decay_steps) ** power``, then constant."""
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any):
    """``values[k]`` for steps in ``(boundaries[k-1], boundaries[k]]``.

    Raises:
      ValueError: if ``boundaries``/``values`` are not 1-D or ``values`` is not one
        longer than ``boundaries``.
    """
    boundaries, values = jnp.array(boundaries), jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences, got shapes "
                         f"{boundaries.shape} and {values.shape}")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length, got "
                         f"{boundaries.shape[0]} boundaries and {values.shape[0]} values")
    return lambda i: values[jnp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A callable is the schedule itself; a scalar becomes :func:`constant`.

    Raises:
      TypeError: for anything else (e.g. an array of step sizes).
    """
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError("step_size must be a scalar or a callable schedule (step -> scalar), "
                    f"got {type(scalar_or_schedule).__name__} of shape "
                    f"{jnp.shape(scalar_or_schedule)}")


# ---- utilities ----

def l2_norm(tree):
    """The l2 norm of all the leaves of ``tree`` together (useful for weight decay)."""
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in tu.tree_leaves(tree)))


def clip_grads(grad_tree, max_norm):
    """Scales ``grad_tree`` down to l2 norm ``max_norm`` when its norm is larger."""
    norm = l2_norm(grad_tree)
    return tu.tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)),
                       grad_tree)


# ---- serialization: an OptimizerState as one nested pytree and back ----

class JoinPoint:
    """Marks the boundary between two joined (nested) pytrees: a leaf of the outer tree
    holding a whole inner tree (iterable, as containers of arrays are)."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        yield self.subtree


def unpack_optimizer_state(opt_state):
    """Converts an :class:`OptimizerState` to the parameter tree with a
    :class:`JoinPoint` (holding that leaf's state) at each leaf, e.g. to serialize it.

    >>> s = unpack_optimizer_state(momentum(0.1, 0.9).init_fn({"w": jnp.ones(1)}))
    >>> type(s["w"]).__name__, len(s["w"].subtree)
    ('JoinPoint', 2)
    """
    states, tree = _unpack(opt_state, "unpack_optimizer_state")
    return tu.tree_unflatten(tree, [JoinPoint(s) for s in states])


def pack_optimizer_state(marked_pytree):
    """The inverse of :func:`unpack_optimizer_state`.

    Raises:
      TypeError: if a leaf of ``marked_pytree`` is not a :class:`JoinPoint`.
    """
    sentinels, tree_def = tu.tree_flatten(marked_pytree)
    for path, s in tu.tree_leaves_with_path(marked_pytree):
        if not isinstance(s, JoinPoint):
            raise TypeError("pack_optimizer_state expects a pytree whose leaves are all "
                            f"JoinPoints (from unpack_optimizer_state); leaf "
                            f"{tu.keystr(path)} is a {type(s).__name__}")
    states_flat, subtree_defs = _flatten_all([s.subtree for s in sentinels])
    return OptimizerState(states_flat, tree_def, subtree_defs)
