"""GaLore (Zhao et al., 2024): run a base optimizer on gradients projected to a low-rank
subspace (refreshed from the gradient's SVD) and project its updates back."""
import math
from typing import Any, NamedTuple, Sequence, Union

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformation, chain, safe_increment
from xform.optim._basic import add_decayed_weights, scale_by_learning_rate
from xform.optim._scaling import scale_by_adam


class GaLoreDimensionNumbers(NamedTuple):
    """Which axes of a weight form GaLore's 2D matrix: ``reduction_axis`` (input) and
    ``output_axis``; together they must cover every axis (e.g. ``(0, (1, 2))`` for an
    ``(embed, heads, head_dim)`` projection)."""
    reduction_axis: Union[Sequence[int], int] = 0
    output_axis: Union[Sequence[int], int] = 1


def _is_dim_nums_leaf(x):
    return x is None or isinstance(x, GaLoreDimensionNumbers)


def _compute_galore_reshape(x, dim_nums):
    """``(reshape, inverse)``: to ``(reduction, output)`` and back."""
    if x.ndim < 2:
        raise ValueError(f"GaLore requires tensors with rank >= 2, got shape {x.shape}")
    norm = lambda axes: tuple(a % x.ndim for a in ((axes,) if isinstance(axes, int)  # noqa: E731
                                                  else axes))
    reduction_axes, output_axes = norm(dim_nums.reduction_axis), norm(dim_nums.output_axis)
    if set(reduction_axes) & set(output_axes):
        raise ValueError(f"Reduction axes {reduction_axes} and output axes {output_axes} "
                         f"must be disjoint. Got dim_nums={dim_nums} for shape {x.shape}")
    if len(set(reduction_axes) | set(output_axes)) != x.ndim:
        raise ValueError(f"All axes must be specified. Got reduction={reduction_axes}, "
                         f"output={output_axes} for tensor with {x.ndim} dimensions")
    perm = reduction_axes + output_axes
    inv_perm = tuple(sorted(range(x.ndim), key=lambda i: perm[i]))
    r_shape = tuple(x.shape[a] for a in reduction_axes)
    o_shape = tuple(x.shape[a] for a in output_axes)
    flat = (math.prod(r_shape), math.prod(o_shape))
    return (lambda y: jnp.transpose(y, perm).reshape(flat),
            lambda y: jnp.transpose(y.reshape(r_shape + o_shape), inv_perm))


class GaLoreState(NamedTuple):
    """State of GaLore: step ``count``, the base optimizer's state (on the low-rank
    gradients) and the projection matrix of each projected parameter."""
    count: Any
    base_optimizer_state: Any
    projector: Any


def scale_by_galore(rank=128, update_proj_gap=200, scale=1.0, base_optimizer=None,
                    weight_dimension_numbers=None):
    """Run ``base_optimizer`` (default ``scale_by_adam()``) on low-rank projections of
    the matrix gradients; non-matrix leaves go through at full size.

    Each ``(m, n)`` gradient is projected on its top-``rank`` left (``m >= n``) or right
    singular vectors, recomputed every ``update_proj_gap`` steps. The base optimizer
    must not need ``params`` (no weight decay inside it).

    Args:
        rank: the projection rank.
        update_proj_gap: steps between projector refreshes.
        scale: multiplies the projected-back updates.
        base_optimizer: the transformation run in the subspace.
        weight_dimension_numbers: None (project 2D leaves), one
            :class:`GaLoreDimensionNumbers` (for every leaf of rank >= 2), a pytree of them
            (None leaves not projected), or a function of the params returning one.

    Returns:
        A :class:`~xform.optim.GradientTransformation`.

    Raises:
        TypeError: if ``rank`` is not an int.
        ValueError: if ``rank`` is not positive.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.scale_by_galore(rank=1)
        >>> state = tx.init({'w': jnp.ones((3, 2))})
        >>> state.projector['w'].shape
        (3, 1)
    """
    if base_optimizer is None:
        base_optimizer = scale_by_adam()
    if not isinstance(rank, int):
        raise TypeError(f"`rank` must be an int, got {type(rank)}")
    if rank <= 0:
        raise ValueError(f"`rank` must be positive, got {rank}")

    def get_dim_nums(params):
        if weight_dimension_numbers is None:
            return tu.tree_map(lambda p: GaLoreDimensionNumbers() if p.ndim == 2 else None,
                               params)
        if callable(weight_dimension_numbers):
            return weight_dimension_numbers(params)
        if isinstance(weight_dimension_numbers, GaLoreDimensionNumbers):
            return tu.tree_map(lambda p: weight_dimension_numbers if p.ndim >= 2 else None,
                               params)
        return weight_dimension_numbers

    def geometry(p, dim_num):
        m, n = _compute_galore_reshape(p, dim_num)[0](p).shape
        return m, n, m >= n, min(rank, m, n)

    def shapes(p, dim_num):
        if dim_num is None:
            return jnp.zeros((0, 0), p.dtype), jnp.zeros_like(p)
        m, n, left, r = geometry(p, dim_num)
        return (jnp.zeros((m, r) if left else (n, r), p.dtype),
                jnp.zeros((r, n) if left else (m, r), p.dtype))

    def split_pairs(tree, pairs):
        return tu.tree_transpose(tu.tree_structure(tree), tu.tree_structure((0, 0)), pairs)

    def init_fn(params):
        if not tu.tree_leaves(params):
            return GaLoreState(jnp.zeros([], jnp.int32), base_optimizer.init(params), params)
        pairs = tu.tree_map(shapes, params, get_dim_nums(params), is_leaf=_is_dim_nums_leaf)
        projectors, proxies = split_pairs(params, pairs)
        return GaLoreState(jnp.zeros([], jnp.int32), base_optimizer.init(proxies), projectors)

    def update_fn(updates, state, params=None):
        refresh = (state.count % update_proj_gap) == 0
        dim_nums = get_dim_nums(updates)

        def project(g, projector, dim_num):
            if dim_num is None:
                return g, projector
            g2 = _compute_galore_reshape(g, dim_num)[0](g)
            _, _, left, r = geometry(g, dim_num)

            def fresh():
                u, _, vh = jnp.linalg.svd(g2.astype(jnp.float32), full_matrices=False)
                return (u[:, :r] if left else vh[:r, :].T).astype(g.dtype)
            projector = lax.cond(refresh, fresh, lambda: projector)
            return (projector.T @ g2 if left else g2 @ projector), projector

        def project_back(low, projector, g, dim_num):
            if dim_num is None:
                return low
            _, inverse = _compute_galore_reshape(g, dim_num)
            left = geometry(g, dim_num)[2]
            full = inverse(projector @ low if left else low @ projector.T)
            return (scale * full).astype(g.dtype)

        pairs = tu.tree_map(project, updates, state.projector, dim_nums,
                            is_leaf=_is_dim_nums_leaf)
        low_grads, projectors = split_pairs(updates, pairs)
        low_updates, base_state = base_optimizer.update(low_grads, state.base_optimizer_state,
                                                        None)
        full = tu.tree_map(project_back, low_updates, projectors, updates, dim_nums,
                           is_leaf=_is_dim_nums_leaf)
        return full, GaLoreState(safe_increment(state.count), base_state, projectors)
    return GradientTransformation(init_fn, update_fn)


def galore(learning_rate, rank=128, update_proj_gap=200, scale=1.0, base_optimizer=None,
           weight_decay=0.0, mask=None, weight_dimension_numbers=None):
    """GaLore: memory-efficient training by gradient low-rank projection.

    :func:`scale_by_galore`, then decoupled weight decay in the full parameter space,
    then the learning rate.

    Args:
        learning_rate: a float or a schedule (use 1.0 if ``base_optimizer`` has one).
        rank, update_proj_gap, scale, base_optimizer, weight_dimension_numbers: see
            :func:`scale_by_galore`.
        weight_decay: decoupled weight decay (multiplied by the learning rate).
        mask: pytree of bools (or a function returning one) selecting leaves to decay.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.galore(0.01, rank=1)
        >>> state = tx.init({'w': jnp.ones((3, 2)), 'b': jnp.ones(2)})
        >>> state[0].projector['w'].shape, state[0].projector['b'].shape
        ((3, 1), (0, 0))
    """
    return chain(scale_by_galore(rank=rank, update_proj_gap=update_proj_gap, scale=scale,
                                 base_optimizer=base_optimizer,
                                 weight_dimension_numbers=weight_dimension_numbers),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


__all__ = ["GaLoreDimensionNumbers", "GaLoreState", "scale_by_galore", "galore"]
