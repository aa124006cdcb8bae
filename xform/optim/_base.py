"""The gradient-transformation protocol (Optax's ``base``/``combine``/``update``): the
``(init, update)`` pair, empty states, chaining, applying updates, and the numerics
helpers every transformation shares (safe counters, bias correction, moments)."""
import collections
import functools
from typing import Any, Callable, NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import dtypes, tree_util as tu
from xform.transforms.jit import jit

NO_PARAMS_MSG = ("You are using a transformation that requires the current value of "
                 "parameters, but you are not passing `params` when calling `update`.")

Params = Any
Updates = Any
OptState = Any
Schedule = Callable[[Any], Any]
ScalarOrSchedule = Any          # a float, an array, or a Schedule
ArrayTree = PyTree = Any
TransformInitFn = Callable[[Params], OptState]
TransformUpdateFn = Callable[..., tuple]


class GradientTransformation(NamedTuple):
    """A pair of pure functions ``init(params) -> state`` and
    ``update(updates, state, params=None) -> (updates, state)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale(-0.1)
        >>> state = tx.init(jnp.ones(2))
        >>> tx.update(jnp.ones(2), state)[0]
        Array([-0.1, -0.1], dtype=float32)
    """
    init: Callable
    update: Callable


class GradientTransformationExtraArgs(GradientTransformation):
    """A :class:`GradientTransformation` whose ``update`` also takes keyword arguments
    (``value=``, ``grad=`` ...), forwarded by :func:`chain` to every member."""


class EmptyState(NamedTuple):
    """The state of a stateless transformation (a pytree with no leaves)."""


def init_empty_state(params):
    """``init`` for stateless transformations: returns :class:`EmptyState`."""
    del params
    return EmptyState()


def identity():
    """The transformation that returns its updates unchanged.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.identity().update(jnp.ones(2), optax.EmptyState())[0]
        Array([1., 1.], dtype=float32)
    """
    return GradientTransformation(init_empty_state, lambda u, s, params=None: (u, s))


def set_to_zero():
    """Replace every update with zeros (freezes the parameters it is applied to).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.set_to_zero().update(jnp.ones(2), optax.EmptyState())[0]
        Array([0., 0.], dtype=float32)
    """
    def update_fn(updates, state, params=None):
        return tu.tree_map(jnp.zeros_like, updates), state
    return GradientTransformation(init_empty_state, update_fn)


def stateless(f):
    """A stateless transformation from ``f(updates, params) -> updates``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.stateless(lambda u, p: u * 2)
        >>> tx.update(jnp.ones(2), tx.init(None))[0]
        Array([2., 2.], dtype=float32)
    """
    def update_fn(updates, state, params=None):
        return f(updates, params), EmptyState()
    return GradientTransformation(init_empty_state, update_fn)


def stateless_with_tree_map(f):
    """A stateless transformation applying ``f(update, param)`` leaf by leaf
    (``param`` is None when ``update`` is called without params).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.stateless_with_tree_map(lambda u, p: -u)
        >>> tx.update({'w': jnp.ones(1)}, tx.init(None))[0]
        {'w': Array([-1.], dtype=float32)}
    """
    def update_fn(updates, state, params=None):
        if params is not None:
            return tu.tree_map(f, updates, params), EmptyState()
        return tu.tree_map(lambda u: f(u, None), updates), EmptyState()
    return GradientTransformation(init_empty_state, update_fn)


def with_extra_args_support(tx):
    """Wrap ``tx`` so its ``update`` accepts (and ignores) extra keyword arguments.

    Example:
        >>> import xform.optim as optax
        >>> tx = optax.with_extra_args_support(optax.scale(2.0))
        >>> isinstance(tx, optax.GradientTransformationExtraArgs)
        True
    """
    if isinstance(tx, GradientTransformationExtraArgs):
        return tx
    _check_transformation(tx, "tx")

    def update(updates, state, params=None, **extra_args):
        del extra_args
        return tx.update(updates, state, params)
    return GradientTransformationExtraArgs(tx.init, update)


def _check_transformation(tx, what):
    if not (hasattr(tx, "init") and hasattr(tx, "update")):
        raise TypeError(f"{what} must be a GradientTransformation (an (init, update) pair), "
                        f"got {type(tx).__name__}: {tx!r}")


def chain(*args):
    """Compose transformations: each one's output updates feed the next.

    Args:
        *args: the transformations, applied first to last.

    Returns:
        A :class:`GradientTransformationExtraArgs` whose state is the tuple of the
        members' states.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.chain(optax.clip(1.0), optax.scale(-0.5))
        >>> tx.update(jnp.array([3., -0.2]), tx.init(jnp.zeros(2)))[0]
        Array([-0.5,  0.1], dtype=float32)
    """
    for i, t in enumerate(args):
        _check_transformation(t, f"chain argument {i}")
    transforms = [with_extra_args_support(t) for t in args]

    def init_fn(params):
        return tuple(t.init(params) for t in transforms)

    def update_fn(updates, state, params=None, **extra_args):
        if not isinstance(state, tuple) or len(state) != len(transforms):
            raise ValueError(
                f"chain of {len(transforms)} transformations got a state that is not a "
                f"tuple of {len(transforms)} states ({type(state).__name__}); make sure you "
                "pass the state returned by this chain's init")
        new_state = []
        for s, t in zip(state, transforms):
            updates, s = t.update(updates, s, params, **extra_args)
            new_state.append(s)
        return updates, tuple(new_state)
    return GradientTransformationExtraArgs(init_fn, update_fn)


def named_chain(*args):
    """Like :func:`chain`, with ``(name, transformation)`` pairs; the state is a dict
    (insertion-ordered) from name to that member's state.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.named_chain(('clip', optax.clip(1.0)), ('lr', optax.scale(-1.)))
        >>> list(tx.init(jnp.zeros(2)))
        ['clip', 'lr']
    """
    names = [name for name, _ in args]
    if len(names) != len(set(names)):
        raise ValueError(f"Named transformations must have unique names, but got {names}")
    transforms = [(name, with_extra_args_support(t)) for name, t in args]

    def init_fn(params):
        return collections.OrderedDict((name, t.init(params)) for name, t in transforms)

    def update_fn(updates, state, params=None, **extra_args):
        new_state = collections.OrderedDict()
        for name, t in transforms:
            updates, new_state[name] = t.update(updates, state[name], params, **extra_args)
        return updates, new_state
    return GradientTransformationExtraArgs(init_fn, update_fn)


def apply_updates(params, updates):
    """``params + updates`` leaf by leaf, each result cast back to its param's dtype.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.apply_updates({'w': jnp.ones(2)}, {'w': jnp.array([0.5, -1.])})
        {'w': Array([1.5, 0. ], dtype=float32)}
    """
    return tu.tree_map(
        lambda p, u: None if p is None else jnp.asarray(p + u).astype(jnp.asarray(p).dtype),
        params, updates, is_leaf=lambda x: x is None)


def incremental_update(new_tensors, old_tensors, step_size):
    """Polyak averaging: ``step_size * new + (1 - step_size) * old`` leaf by leaf.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.incremental_update(jnp.ones(1), jnp.zeros(1), 0.25)
        Array([0.25], dtype=float32)
    """
    return tu.tree_map(
        lambda new, old: None if new is None else step_size * new + (1.0 - step_size) * old,
        new_tensors, old_tensors, is_leaf=lambda x: x is None)


def periodic_update(new_tensors, old_tensors, steps, update_period):
    """``new_tensors`` when ``steps % update_period == 0``, else ``old_tensors``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.periodic_update(jnp.ones(1), jnp.zeros(1), 4, 2)
        Array([1.], dtype=float32)
    """
    return lax.cond(jnp.mod(steps, update_period) == 0, lambda _: new_tensors,
                    lambda _: old_tensors, None)


# ---- tree math shared by the transformations (Optax's optax.tree namespace) ----

def tree_sum(tree, associative_reduction=False):
    """Sum of all elements of all leaves: left to right from 0, or with
    ``associative_reduction`` pairwise (halves summed, then added), as Optax's
    ``jax.tree.reduce_associative``; the order shows in rounding and in mixed-dtype
    promotion (bf16 + int32 sums round to bf16 before an f32 one joins)."""
    sums = [jnp.sum(x) for x in tu.tree_leaves(tree)]
    if associative_reduction:
        return _pairwise_sum(sums) if sums else 0
    out = 0
    for s in sums:
        out = out + s
    return out


def _pairwise_sum(xs):
    if len(xs) == 1:
        return xs[0]
    half = len(xs) // 2
    return _pairwise_sum(xs[:half]) + _pairwise_sum(xs[half:])


def _abs_sq(x):
    x = jnp.asarray(x)
    if jnp.iscomplexobj(x):
        return (x.conj() * x).real
    return x * x


def tree_norm(tree, ord=None, squared=False):
    """The norm of a pytree seen as one flat vector (ord None/2, 1 or inf).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.tree_utils.tree_norm({'a': jnp.array([3.]), 'b': jnp.array([4.])})
        Array(5., dtype=float32)
    """
    if ord is None or ord == 2:
        sq = tree_sum(tu.tree_map(lambda x: jnp.square(jnp.real(x)) + jnp.square(jnp.imag(x))
                                  if jnp.iscomplexobj(x) else jnp.square(x), tree))
        return jnp.asarray(sq if squared else jnp.sqrt(sq))
    if ord == 1:
        ret = tree_sum(tu.tree_map(jnp.abs, tree))
    elif ord in (np.inf, "inf", "infinity"):
        ret = -np.inf
        for x in tu.tree_leaves(tree):
            if jnp.size(x):
                ret = jnp.maximum(ret, jnp.max(jnp.abs(x)))
    else:
        raise ValueError(f"Unsupported ord: {ord!r} (use None, 2, 1 or 'inf')")
    return jnp.asarray(jnp.square(ret) if squared else ret)


def global_norm(updates):
    """The L2 norm of all leaves together (``optax.global_norm``).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.global_norm([jnp.array([3.]), jnp.array([4.])])
        Array(5., dtype=float32)
    """
    return tree_norm(updates)


def safe_increment(count):
    """``count + 1``, saturating at the dtype's maximum instead of overflowing.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.safe_increment(jnp.array(2147483647, jnp.int32))
        Array(2147483647, dtype=int32)
    """
    count = jnp.asarray(count)
    dtype = count.dtype
    if jnp.issubdtype(dtype, jnp.integer):
        top = jnp.iinfo(dtype).max
    elif jnp.issubdtype(dtype, jnp.floating):
        top = jnp.finfo(dtype).max
    else:
        raise ValueError(f"Cannot safely increment count with dtype {dtype}, valid dtypes "
                         "are integer or floating")
    top = jnp.array(top, dtype)
    return jnp.where(count < top, count + jnp.array(1, dtype), top)


safe_int32_increment = safe_increment


def _zeros(dtype=None):
    return lambda x: jnp.zeros_like(x, dtype=dtype)


def tree_zeros_like(tree, dtype=None):
    return tu.tree_map(_zeros(dtype), tree)


def tree_full_like(tree, fill_value, dtype=None):
    return tu.tree_map(lambda x: jnp.full_like(x, fill_value, dtype=dtype), tree)


def tree_cast(tree, dtype):
    return tree if dtype is None else tu.tree_map(lambda t: t.astype(dtype), tree)


def tree_cast_like(tree, other_tree):
    return tu.tree_map(lambda t, o: t.astype(o.dtype) if hasattr(o, "dtype") else t,
                       tree, other_tree)


def _is_none(x):
    return x is None


def update_moment(updates, moments, decay, order):
    """``(1 - decay) * g**order + decay * m`` leaf by leaf."""
    return tu.tree_map(lambda g, t: None if g is None else (1 - decay) * (g ** order) + decay * t,
                       updates, moments, is_leaf=_is_none)


def update_moment_per_elem_norm(updates, moments, decay, order):
    """Like :func:`update_moment` with ``|g|**order`` (complex-safe)."""
    def norm(g):
        if not jnp.iscomplexobj(g):
            return g ** order
        half = order / 2
        return _abs_sq(g) ** (int(half) if half.is_integer() else half)
    return tu.tree_map(lambda g, t: None if g is None else (1 - decay) * norm(g) + decay * t,
                       updates, moments, is_leaf=_is_none)


def update_infinity_moment(updates, moments, decay, eps):
    return tu.tree_map(lambda g, t: None if g is None else jnp.maximum(jnp.abs(g) + eps, decay * t),
                       updates, moments, is_leaf=_is_none)


@functools.partial(jit, inline=True)
def bias_correction(moment, decay, count):
    """``moment / (1 - decay**count)`` leaf by leaf.

    ``jit(inline=True)`` as Optax's: eagerly a compiled call, so ``decay`` is a runtime
    argument and XLA's ``pow`` of it rounds unlike a folded constant (the ``1 -
    decay**count`` cancellation turns that ulp into ~1e-5 of the update); under ``jit``
    its ops join the caller's program, as a nested call would change what XLA fuses,
    and with it whether bf16/f16 intermediates are rounded (an AdEMAMix step on bf16
    and f16 leaves was 2e-3 off Optax's).
    """
    correction = 1 - decay ** count
    return tu.tree_map(lambda t: t / correction.astype(t.dtype), moment)


def canonicalize_dtype(dtype):
    if dtype is None:
        return None
    return dtypes.canonicalize_dtype(dtype)


def tree_dtype_highest(tree):
    """The highest float dtype among the leaves (float32 when there is none)."""
    best = None
    for x in tu.tree_leaves(tree):
        dt = jnp.asarray(x).dtype
        if best is None or jnp.promote_types(best, dt) == dt:
            best = dt
    return best if best is not None else jnp.dtype(jnp.float32)


__all__ = ["GradientTransformation", "GradientTransformationExtraArgs", "EmptyState",
           "init_empty_state", "identity", "set_to_zero", "stateless",
           "stateless_with_tree_map", "with_extra_args_support", "chain", "named_chain",
           "apply_updates", "incremental_update", "periodic_update", "global_norm",
           "safe_increment", "safe_int32_increment", "NO_PARAMS_MSG"]
