"""Microbatching (``optax.microbatching``): evaluate a function on slices of its batch
sequentially (a ``fori_loop``) and combine the results with an :class:`Accumulator`, to
bound peak memory; ``micro_vmap`` and ``micro_grad`` build on it."""
import collections
import dataclasses
import enum
import functools
from typing import Any, Callable

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.transforms.ad import value_and_grad
from xform.transforms.jit import eval_shape
from xform.transforms.vmap import vmap

__all__ = ["Accumulator", "AccumulationType", "microbatch", "micro_grad", "micro_vmap",
           "reshape_batch_axis"]

IndividualOutputs = collections.namedtuple("Aux", ["values", "metrics", "aux"])


@dataclasses.dataclass(frozen=True)
class Accumulator:
    """How microbatch results combine: ``carry = init(shape_of_one_result)``, then
    ``carry = update(carry, x_i, i)`` per microbatch, result ``finalize(carry)``;
    ``aggregate`` reduces a stacked batch of results at once (used by ``micro_vmap``)."""
    init: Callable[[Any], Any]
    update: Callable[[Any, Any, int], Any]
    finalize: Callable[[Any], Any]
    aggregate: Callable[[Any], Any]


class AccumulationType(enum.Enum):
    """The built-in accumulators."""
    MEAN = enum.auto()
    """Average the microbatch outputs."""
    SUM = enum.auto()
    """Sum the microbatch outputs."""
    RUNNING_MEAN = enum.auto()
    """Average the microbatch outputs over `num_real_microbatches`."""
    CONCAT = enum.auto()
    """Concatenate the microbatch outputs along axis 0."""


def reshape_batch_axis(tree, microbatch_size, axis=0):
    """Split each leaf's batch axis into ``(num_microbatches, microbatch_size)``, in
    column-major order (microbatch ``i`` holds rows ``i, i + n, i + 2n, ...``).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.microbatching.reshape_batch_axis(jnp.arange(4), 2)
        Array([[0, 2],
               [1, 3]], dtype=int32)
    """
    def reshape_leaf(x):
        return x.reshape(x.shape[:axis] + (-1, microbatch_size) + x.shape[axis + 1:], order="F")
    return tu.tree_map(reshape_leaf, tree)


def _floating_only(fn):
    def wrapper(x):
        if not all(jnp.issubdtype(d, jnp.floating)
                   for d in tu.tree_leaves(tu.tree_map(lambda v: v.dtype, x))):
            raise ValueError("MEAN and RUNNING_MEAN Accumulators require floating-point values.")
        return fn(x)
    return wrapper


def _lift(acc):
    # An array Accumulator applied leaf by leaf.
    return Accumulator(
        lambda value: tu.tree_map(acc.init, value),
        lambda carry, value, i: tu.tree_map(lambda c, v: acc.update(c, v, i), carry, value),
        lambda carry: tu.tree_map(acc.finalize, carry),
        lambda values: tu.tree_map(acc.aggregate, values))


def _concat_accumulator(n):
    def finalize(carry):
        return carry.reshape(-1, *carry.shape[2:], order="F")
    return Accumulator(lambda value: jnp.broadcast_to(jnp.zeros_like(value), (n,) + value.shape),
                       lambda carry, value, i: carry.at[i].set(value), finalize, lambda x: x)


def _running_mean_update(carry, value, index):
    p = index / (index + 1)
    return carry * p + value * (1 - p)


def _accumulator(kind, n):
    if isinstance(kind, Accumulator):
        return kind
    if kind in (AccumulationType.MEAN, AccumulationType.CONCAT) and n <= 0:
        raise ValueError(f"num_microbatches={n} must be positive.")
    if kind is AccumulationType.SUM:
        acc = Accumulator(jnp.zeros_like, lambda c, v, _: c + v, lambda x: x,
                          functools.partial(jnp.sum, axis=0))
    elif kind is AccumulationType.MEAN:
        acc = Accumulator(_floating_only(jnp.zeros_like), lambda c, v, _: c + v,
                          lambda c: c / n, functools.partial(jnp.mean, axis=0))
    elif kind is AccumulationType.RUNNING_MEAN:
        acc = Accumulator(_floating_only(jnp.zeros_like), _running_mean_update, lambda x: x,
                          functools.partial(jnp.mean, axis=0))
    elif kind is AccumulationType.CONCAT:
        acc = _concat_accumulator(n)
    else:
        raise ValueError(f"Unknown accumulator: {kind}")
    return _lift(acc)


def _canonicalize(tree, n):
    # A pytree (prefix of the outputs) of accumulators -> one Accumulator.
    accs = tu.tree_map(lambda a: _accumulator(a, n), tree,
                       is_leaf=lambda a: isinstance(a, (Accumulator, AccumulationType)))
    is_acc = lambda a: isinstance(a, Accumulator)  # noqa: E731
    return Accumulator(
        lambda values: tu.tree_map(lambda a, v: a.init(v), accs, values, is_leaf=is_acc),
        lambda carry, value, i: tu.tree_map(lambda a, c, v: a.update(c, v, i), accs, carry,
                                            value, is_leaf=is_acc),
        lambda carry: tu.tree_map(lambda a, c: a.finalize(c), accs, carry, is_leaf=is_acc),
        lambda values: tu.tree_map(lambda a, v: a.aggregate(v), accs, values, is_leaf=is_acc))


def microbatch(fun, argnums, microbatch_size, accumulator=AccumulationType.SUM, *,
               argnames=(), in_axes=0, num_real_microbatches=None):
    """``fun`` evaluated microbatch by microbatch over the batch arguments (positions
    ``argnums``, keywords ``argnames``, batch axes ``in_axes``) and combined by
    ``accumulator`` (a pytree prefix of the outputs of :class:`AccumulationType` or
    :class:`Accumulator`); ``microbatch_size=None`` returns ``fun``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> fun = lambda x: (x + 1, jnp.sum(3 * x))
        >>> acc = (optax.microbatching.AccumulationType.CONCAT,
        ...        optax.microbatching.AccumulationType.SUM)
        >>> optax.microbatch(fun, argnums=0, microbatch_size=2, accumulator=acc)(
        ...     jnp.array([1, 2, 3, 4]))
        (Array([2, 3, 4, 5], dtype=int32), Array(30, dtype=int32))
    """
    if microbatch_size is None:
        return fun
    argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    argnames = (argnames,) if isinstance(argnames, str) else tuple(argnames)
    if isinstance(in_axes, int):
        in_axes = (in_axes,) * (len(argnums) + len(argnames))
    pos_axes, kw_axes = in_axes[:len(argnums)], in_axes[len(argnums):]

    def microbatched_fun(*args, **kwargs):
        batch = [args[i] for i in argnums] + [kwargs[k] for k in argnames]
        sizes = [x.shape[ax] for ax, sub in zip(in_axes, batch) for x in tu.tree_leaves(sub)]
        if len(set(sizes)) > 1:
            raise ValueError(f"Batch Arguments must have equal-size batch axes, found {sizes}.")
        if sizes[0] % microbatch_size != 0:
            raise ValueError(f"batch_size={sizes[0]} must be divisible by "
                             f"microbatch_size={microbatch_size}.")
        args, kwargs = list(args), dict(kwargs)
        for i, ax in zip(argnums, pos_axes):
            args[i] = reshape_batch_axis(args[i], microbatch_size, ax)
        for k, ax in zip(argnames, kw_axes):
            kwargs[k] = reshape_batch_axis(kwargs[k], microbatch_size, ax)
        acc = _canonicalize(accumulator, sizes[0] // microbatch_size)

        def f(index):
            a, kw = list(args), dict(kwargs)
            take = lambda ax: functools.partial(jnp.take, indices=index, axis=ax)  # noqa: E731
            for i, ax in zip(argnums, pos_axes):
                a[i] = tu.tree_map(take(ax), a[i])
            for k, ax in zip(argnames, kw_axes):
                kw[k] = tu.tree_map(take(ax), kw[k])
            return fun(*a, **kw)

        bound = num_real_microbatches if num_real_microbatches is not None \
            else sizes[0] // microbatch_size
        carry = lax.fori_loop(0, bound, lambda i, c: acc.update(c, f(i), i),
                              acc.init(eval_shape(f, 0)))
        return acc.finalize(carry)
    return microbatched_fun


def micro_vmap(fun, in_axes=0, out_axes=0, *, microbatch_size=None, vmap_fn=vmap,
               accumulator=AccumulationType.CONCAT, num_real_microbatches=None):
    """``vmap`` evaluated ``microbatch_size`` rows at a time; ``accumulator`` CONCAT
    (default) matches ``vmap``, SUM/MEAN reduce over the batch instead.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.microbatching.micro_vmap(lambda x: x ** 2, microbatch_size=2)(jnp.arange(4))
        Array([0, 1, 4, 9], dtype=int32)
    """
    if out_axes != 0:
        raise NotImplementedError("out_axis != 0 is not currently supported")
    in_axes = (in_axes,) if isinstance(in_axes, int) else tuple(in_axes)

    def vmap_reduce_fn(*args, kwargs):
        out = vmap_fn(fun, in_axes, out_axes)(*args, **kwargs)
        return _canonicalize(accumulator, tu.tree_leaves(out)[0].shape[0]).aggregate(out)

    micro_fn = microbatch(
        vmap_reduce_fn, argnums=tuple(i for i, ax in enumerate(in_axes) if ax is not None),
        argnames="kwargs", microbatch_size=microbatch_size, accumulator=accumulator,
        in_axes=tuple(ax for ax in in_axes if ax is not None) + (0,),
        num_real_microbatches=num_real_microbatches)
    return lambda *args, **kwargs: micro_fn(*args, kwargs=kwargs)


def micro_grad(fun, has_aux=False, argnums=0, *, batch_argnums=1, keep_batch_dim=True,
               microbatch_size=None, accumulator=AccumulationType.SUM,
               transform_fn=lambda x: x, metrics_fn=lambda x: None,
               num_real_microbatches=None):
    """Per-example gradients of ``fun``, each passed through ``transform_fn`` and combined
    by ``accumulator``; returns ``(combined, Aux(values, metrics, aux))`` with per-example
    values and ``metrics_fn`` of each per-example gradient.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> loss = lambda p, x, y: 0.5 * jnp.mean((x @ p - y) ** 2)
        >>> g, aux = optax.microbatching.micro_grad(loss, batch_argnums=(1, 2))(
        ...     jnp.zeros(1), jnp.ones((4, 1)), jnp.array([0., 2., 4., 6.]))
        >>> g
        Array([-12.], dtype=float32)
    """
    batch_argnums = (batch_argnums,) if isinstance(batch_argnums, int) else batch_argnums
    if not has_aux:
        fun = (lambda f: lambda *a, **k: (f(*a, **k), None))(fun)
    vg = value_and_grad(fun, argnums, has_aux=True)

    def grad_fn(*args, **kwargs):
        (value, aux), grad = vg(*args, **kwargs)
        return transform_fn(grad), IndividualOutputs(value, metrics_fn(grad), aux)

    in_axes = [None] * (max(batch_argnums) + 1)
    for i in batch_argnums:
        in_axes[i] = 0
    micro_fun = micro_vmap(grad_fn, in_axes=in_axes,
                           accumulator=(accumulator, AccumulationType.CONCAT),
                           microbatch_size=microbatch_size,
                           num_real_microbatches=num_real_microbatches)
    if not keep_batch_dim:
        return micro_fun

    def with_group_axis(*args, **kwargs):
        args = list(args)
        for i in batch_argnums:
            args[i] = tu.tree_map(lambda x: jnp.expand_dims(x, axis=1), args[i])
        return micro_fun(*args, **kwargs)
    return with_group_axis
