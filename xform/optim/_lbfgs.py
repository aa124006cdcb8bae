"""L-BFGS (Optax's ``scale_by_lbfgs`` and ``lbfgs``): the two-loop recursion over a ring
buffer of parameter and gradient differences, chained with a linesearch."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformation, chain, identity, safe_increment
from xform.optim._basic import scale, scale_by_learning_rate
from xform.optim._linesearch import scale_by_zoom_linesearch
from xform.optim.tree_utils import (tree_add_scale, tree_cast_like, tree_norm, tree_real,
                                    tree_scale, tree_sub, tree_vdot, tree_zeros_like)


class ScaleByLBFGSState(NamedTuple):
    """State of :func:`scale_by_lbfgs`: the iteration ``count``, the previous ``params``
    and ``updates``, and ring buffers (leaves stacked along a leading ``memory_size``
    axis) of their differences and of the weights ``1 / <dw, du>``."""
    count: Any
    params: Any
    updates: Any
    diff_params_memory: Any
    diff_updates_memory: Any
    weights_memory: Any


def _precondition_by_lbfgs(updates, diff_params_memory, diff_updates_memory,
                           weights_memory, identity_scale, memory_idx):
    """``P_k u``: Nocedal & Wright's two-loop recursion (algorithm 7.4), oldest memory
    slot first in the second loop; ``memory_idx`` is the oldest slot."""
    rhos = weights_memory
    memory_size = weights_memory.shape[0]
    indices = (memory_idx + jnp.arange(memory_size)) % memory_size

    def slot(idx):
        return tu.tree_map(lambda x: x[idx], (diff_params_memory, diff_updates_memory))

    def right_product(vec, idx):
        dwi, dui = slot(idx)
        alpha = rhos[idx] * tree_real(tree_vdot(dwi, vec))
        return tree_cast_like(tree_add_scale(vec, -alpha, dui), vec), alpha

    precond, alphas = lax.scan(right_product, updates, indices, reverse=True)
    precond = tree_scale(identity_scale, precond)

    def left_product(vec, idx_alpha):
        idx, alpha = idx_alpha
        dwi, dui = slot(idx)
        beta = rhos[idx] * tree_real(tree_vdot(dui, vec))
        return tree_cast_like(tree_add_scale(vec, alpha - beta, dwi), vec), beta

    precond, _ = lax.scan(left_product, precond, (indices, alphas))
    return precond


def scale_by_lbfgs(memory_size=10, scale_init_precond=True):
    r"""Scales updates by L-BFGS's approximation of the inverse Hessian.

    Keeps the last ``memory_size`` differences :math:`\delta w_k = w_{k+1} - w_k`,
    :math:`\delta u_k = u_{k+1} - u_k` of parameters and updates, and returns
    :math:`P_k u_k` where :math:`P_k` is the limited-memory BFGS inverse-Hessian
    approximation started from :math:`\gamma_k I`, with :math:`\gamma_k = \langle\delta
    w_{k-1}, \delta u_{k-1}\rangle / \|\delta u_{k-1}\|^2` if ``scale_init_precond``
    (else 1). At the first step :math:`\gamma_0 = \min(1, 1/\|u_0\|)` (a heuristic:
    the first step lies in the unit ball). The memory is updated before
    preconditioning, so chaining a linesearch after this updates it once per accepted
    step. Supports complex parameters.

    Args:
      memory_size: number of past differences kept.
      scale_init_precond: use the scaled identity :math:`\gamma_k I` above.

    Returns:
      A :class:`GradientTransformation`.

    Raises:
      ValueError: ``memory_size < 1``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.scale_by_lbfgs()
        >>> tx.update(jnp.array([3., 4.]), tx.init(jnp.zeros(2)), jnp.zeros(2))[0]
        Array([0.6, 0.8], dtype=float32)
    """
    if memory_size < 1:
        raise ValueError("memory_size must be >= 1")

    def init_fn(params):
        stacked = tu.tree_map(lambda x: jnp.zeros((memory_size,) + x.shape, x.dtype), params)
        return ScaleByLBFGSState(
            count=jnp.asarray(0, jnp.int32), params=tree_zeros_like(params),
            updates=tree_zeros_like(params), diff_params_memory=stacked,
            diff_updates_memory=stacked, weights_memory=jnp.zeros(memory_size))

    def update_fn(updates, state, params):
        memory_idx = state.count % memory_size
        prev_memory_idx = (state.count - 1) % memory_size
        # 1. store the newest differences (zero at the first step, when undefined)
        diff_params = tree_sub(params, state.params)
        diff_updates = tree_sub(updates, state.updates)
        vdot = tree_real(tree_vdot(diff_updates, diff_params))
        weight = jnp.where(vdot == 0.0, 0.0, 1.0 / vdot)
        diff_params, diff_updates, weight = tu.tree_map(
            lambda x: jnp.where(state.count > 0, x, jnp.zeros_like(x)),
            (diff_params, diff_updates, weight))
        diff_params_memory, diff_updates_memory, weights_memory = tu.tree_map(
            lambda x, y: x.at[prev_memory_idx].set(y),
            (state.diff_params_memory, state.diff_updates_memory, state.weights_memory),
            (diff_params, diff_updates, weight))
        # 2. the scale gamma_k of the initial identity
        if scale_init_precond:
            numerator = tree_real(tree_vdot(diff_updates, diff_params))
            denominator = tree_norm(diff_updates, squared=True)
            identity_scale = jnp.where(denominator > 0.0, numerator / denominator, 1.0)
            capped_inv_norm = jnp.minimum(1.0, 1.0 / tree_norm(lax.stop_gradient(updates)))
            identity_scale = jnp.where(state.count > 0, identity_scale, capped_inv_norm)
        else:
            identity_scale = 1.0
        # 3. P_k u_k
        precond = _precondition_by_lbfgs(updates, diff_params_memory, diff_updates_memory,
                                         weights_memory, identity_scale, memory_idx)
        return precond, ScaleByLBFGSState(
            count=safe_increment(state.count), params=params, updates=updates,
            diff_params_memory=diff_params_memory, diff_updates_memory=diff_updates_memory,
            weights_memory=weights_memory)

    return GradientTransformation(init_fn, update_fn)


def lbfgs(learning_rate=None, memory_size=10, scale_init_precond=True,
          linesearch=scale_by_zoom_linesearch(max_linesearch_steps=20,
                                              initial_guess_strategy="one")):
    """The L-BFGS optimizer: :func:`scale_by_lbfgs`, a sign flip (or
    ``scale_by_learning_rate``), then a linesearch (default: zoom, strong Wolfe).

    Best for deterministic objectives of small to medium size; reuse the linesearch's
    value and gradient with :func:`value_and_grad_from_state`.

    Args:
      learning_rate: optional fixed or scheduled global scale; by default the
        linesearch picks the stepsize.
      memory_size: number of past differences kept.
      scale_init_precond: see :func:`scale_by_lbfgs`.
      linesearch: a linesearch transformation (e.g. :func:`scale_by_zoom_linesearch`
        or :func:`scale_by_backtracking_linesearch`), or None for none.

    Returns:
      A :class:`GradientTransformationExtraArgs`: pass ``value=``, ``grad=`` and
      ``value_fn=`` to its ``update``.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> f = lambda x: jnp.sum(x ** 2)
        >>> solver = optax.lbfgs()
        >>> params = jnp.array([1., 2., 3.])
        >>> state = solver.init(params)
        >>> value, grad = xform.value_and_grad(f)(params)
        >>> updates, state = solver.update(grad, state, params, value=value, grad=grad,
        ...                                value_fn=f)
        >>> print(f"{f(optax.apply_updates(params, updates)):.2E}")
        7.52E+00
    """
    base_scaling = scale(-1.0) if learning_rate is None else scale_by_learning_rate(
        learning_rate)
    return chain(scale_by_lbfgs(memory_size=memory_size,
                                scale_init_precond=scale_init_precond),
                 base_scaling, identity() if linesearch is None else linesearch)
