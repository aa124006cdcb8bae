"""Muon: momentum orthogonalized by Newton-Schulz iterations (``optax.contrib.muon``);
non-matrix parameters go to AdamW."""
import math
from typing import Any, NamedTuple, Sequence, Union

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu
from xform.transforms.vmap import vmap
from xform.optim._alias import adamw
from xform.optim._base import (GradientTransformation, bias_correction, canonicalize_dtype,
                               chain, init_empty_state, safe_increment, tree_cast,
                               tree_zeros_like, update_moment)
from xform.optim._basic import add_decayed_weights, scale_by_learning_rate
from xform.optim._wrappers import MaskedNode, partition

_PRECONDITIONINGS = ("frobenius", "spectral", "aol", "schatten")
_DEFAULT_NS_COEFFS = (3.4445, -4.7750, 2.0315)
_DION_NS_COEFFS = [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377),
                   (3.7418, -5.5913, 2.3037), (2.8769, -3.1427, 1.2046),
                   (2.8366, -3.0525, 1.2012)]
_NS_COEFFS_PRESET_DICT = {"standard": _DEFAULT_NS_COEFFS, "dion": _DION_NS_COEFFS}


class MuonDimensionNumbers(NamedTuple):
    """Which axes of a weight form the matrix Muon orthogonalizes.

    The weight acts as ``x @ W``: ``reduction_axis`` are the input axes, ``output_axis``
    the output axes; every other axis is a batch axis, orthogonalized independently.
    """
    reduction_axis: Union[Sequence[int], int] = 0
    output_axis: Union[Sequence[int], int] = 1


def _is_weight_dim_nums(x):
    return isinstance(x, MuonDimensionNumbers)


def _normalize_axes(x, dim_nums):
    def norm(axes):
        axes = (axes,) if isinstance(axes, int) else axes
        return tuple(ax % x.ndim for ax in axes)
    return norm(dim_nums.reduction_axis), norm(dim_nums.output_axis)


def _compute_muon_reshape(x, dim_nums):
    """``(reshape, inverse)``: to ``(batch, reduction, output)`` and back."""
    if x.ndim < 2:
        raise ValueError(f"Muon optimized parameters must have rank >= 2, got x.ndim={x.ndim}")
    reduction_axes, output_axes = _normalize_axes(x, dim_nums)
    if set(reduction_axes) & set(output_axes):
        raise ValueError("Normalized reduction axes and output axes must be disjoint, got "
                         f"{reduction_axes} and {output_axes}. Originally dim_nums={dim_nums} "
                         f"and x.shape={x.shape}")
    batch_axes = tuple(sorted(set(range(x.ndim)) - set(reduction_axes) - set(output_axes)))
    perm = batch_axes + reduction_axes + output_axes
    inv_perm = tuple(sorted(range(x.ndim), key=lambda i: perm[i]))
    sizes = [tuple(x.shape[a] for a in axes) for axes in (batch_axes, reduction_axes,
                                                           output_axes)]
    flat_shape = tuple(math.prod(s) for s in sizes)
    unflat_shape = sizes[0] + sizes[1] + sizes[2]
    return (lambda y: jnp.transpose(y, perm).reshape(flat_shape),
            lambda y: jnp.transpose(y.reshape(unflat_shape), inv_perm))


def _fans(x, dim_nums):
    reduction_axes, output_axes = _normalize_axes(x, dim_nums)
    return (math.prod(x.shape[a] for a in reduction_axes),
            math.prod(x.shape[a] for a in output_axes))


def _resolve(weight_dimension_numbers, tree):
    return (weight_dimension_numbers(tree) if callable(weight_dimension_numbers)
            else weight_dimension_numbers)


def scale_by_shape(weight_dimension_numbers=None, consistent_rms=None):
    """Scale each update by a factor of its matrix shape: ``sqrt(max(1, fan_out/fan_in))``,
    or ``sqrt(max(fan_in, fan_out)) * consistent_rms`` when ``consistent_rms`` is given."""
    def scaled(u, dim_nums):
        fan_in, fan_out = _fans(u, dim_nums)
        if consistent_rms is not None:
            return jnp.sqrt(jnp.maximum(fan_in, fan_out)) * consistent_rms * u
        return jnp.sqrt(jnp.maximum(1, fan_out / fan_in)) * u

    def update_fn(updates, state, params=None):
        dim_nums = _resolve(weight_dimension_numbers, updates)
        return tu.tree_map(scaled, updates, dim_nums, is_leaf=_is_weight_dim_nums), state
    return GradientTransformation(init_empty_state, update_fn)


# ---- Newton-Schulz: X <- a X + (b A + c A @ A) X with A = X X^H ----

def _ns_step(x, coeffs):
    a = x @ x.T.conj()
    b = coeffs[1] * a + coeffs[2] * a @ a
    return coeffs[0] * x + b @ x


def _aol_first_step(x, coeffs, eps=1e-8):
    # "Almost Orthogonal Layer" rescaling folded into the first iteration.
    a = x @ x.T.conj()
    s = jnp.expand_dims(lax.rsqrt(jnp.maximum(jnp.abs(a).sum(axis=-1), eps)), -1)
    x, a = x * s, a * s * jnp.swapaxes(s, -1, -2)
    b = coeffs[1] * a + coeffs[2] * a @ a
    return coeffs[0] * x + b @ x


def _schatten_first_step(x, coeffs, eps=1e-8):
    # Schatten-4 rescaling: divide by sqrt(||X X^T||_F).
    a = x @ x.T
    s = lax.rsqrt(jnp.maximum(jnp.linalg.norm(a, ord="fro", axis=(-2, -1)), eps))
    s = jnp.expand_dims(s, (0, -1))
    x, a = x * s, a * s ** 2
    b = coeffs[1] * a + coeffs[2] * a @ a
    return coeffs[0] * x + b @ x


def _ns_iterator(preconditioning):
    first = {"aol": _aol_first_step, "schatten": _schatten_first_step}.get(preconditioning)
    if first is None:
        return lambda i, x, coeffs: _ns_step(x, coeffs)
    return lambda i, x, coeffs: lax.cond(i == 0, lambda y: first(y, coeffs),
                                         lambda y: _ns_step(y, coeffs), x)


def orthogonalize_via_newton_schulz(x, ns_coeffs, ns_steps=5, preconditioning="frobenius",
                                    eps=1e-8, dimension_numbers=None):
    """Approximately orthogonalize ``x`` (``U S V^T -> U S' V^T``, ``S'`` near 1) by
    Newton-Schulz iterations; ``ns_coeffs`` has shape ``(3,)`` or ``(n, 3)``."""
    if x.ndim != 2 and not isinstance(dimension_numbers, MuonDimensionNumbers):
        raise ValueError("Input must have shape (m, n) or weight dimension numbers must be "
                         f"provided. Got shape={x.shape} and "
                         f"dimension_numbers={dimension_numbers}.")
    if x.ndim == 2:
        dimension_numbers = MuonDimensionNumbers(reduction_axis=0, output_axis=1)
    if ns_coeffs.ndim > 2 or ns_coeffs.shape[-1] != 3:
        raise ValueError("Newton-Schulz coefficients must have shape (3,) or (n, 3), got "
                         f"{ns_coeffs.shape}")
    if preconditioning not in _PRECONDITIONINGS:
        raise ValueError(f"Unknown preconditioning {preconditioning}")
    step = _ns_iterator(preconditioning)

    def orthogonalize(m):
        transposed = m.shape[0] > m.shape[1]
        if transposed:
            m = m.T
        if preconditioning == "frobenius":
            m = m / (jnp.linalg.norm(m, ord="fro") + eps)
        elif preconditioning == "spectral":
            m = m / (jnp.linalg.norm(m, ord=2) + eps)
        coeffs = ns_coeffs.astype(m.dtype)
        if coeffs.ndim == 1:
            m = lax.fori_loop(0, ns_steps, lambda i, y: step(i, y, coeffs), m, unroll=True)
        else:
            def body(carry, c):
                i, y = carry
                return (i + 1, step(i, y, c)), None
            (_, m), _ = lax.scan(body, (jnp.asarray(0, jnp.int32), m), coeffs)
        return m.T if transposed else m

    reshape_fn, inverse_fn = _compute_muon_reshape(x, dimension_numbers)
    return inverse_fn(vmap(orthogonalize)(reshape_fn(x)))


class MuonState(NamedTuple):
    """State of :func:`scale_by_muon`: step ``count``, momentum ``mu`` and the
    Newton-Schulz coefficients ``ns_coeffs`` in use."""
    count: Any
    mu: Any
    ns_coeffs: Any


def scale_by_muon(ns_coeffs=_DEFAULT_NS_COEFFS, ns_steps=5, beta=0.95, eps=1e-8,
                  mu_dtype=None, *, nesterov=True, adaptive=False,
                  preconditioning="frobenius", weight_dimension_numbers=None):
    """Rescale updates by Muon: orthogonalize the (Nesterov) momentum of each matrix.

    Args:
        ns_coeffs: Newton-Schulz coefficients, a triple or a tuple of triples (one per step).
        ns_steps: number of Newton-Schulz iterations (the last ``ns_steps`` rows are used
            when ``ns_coeffs`` has one row per step).
        beta: decay of the momentum.
        eps: added to denominators.
        mu_dtype: dtype of the momentum accumulator.
        nesterov: use Nesterov momentum.
        adaptive: scale each update by ``<momentum, update>`` (the dual norm).
        preconditioning: ``'frobenius'``, ``'spectral'``, ``'aol'`` or ``'schatten'``.
        weight_dimension_numbers: a pytree of :class:`MuonDimensionNumbers` (or a function of
            the updates returning one); None means every parameter is a 2D matrix.

    Returns:
        A :class:`~xform.optim.GradientTransformation`.

    Raises:
        ValueError: at ``init`` if ``ns_coeffs`` is not ``(3,)``/``(n, 3)`` or has more
            rows than ``ns_steps``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.scale_by_muon()
        >>> tx.init(jnp.zeros((2, 2))).ns_coeffs
        Array([ 3.4445, -4.775 ,  2.0315], dtype=float32)
    """
    mu_dtype = canonicalize_dtype(mu_dtype)

    def init_fn(params):
        coeffs = jnp.asarray(ns_coeffs)
        if coeffs.ndim > 2 or coeffs.shape[-1] != 3:
            raise ValueError(f"ns_coeffs must have shape (3,) or (n, 3), got {coeffs.shape}")
        if coeffs.ndim == 2:
            if not coeffs.shape[0] <= ns_steps:
                raise ValueError(f"Not enough coeffs to perform {ns_steps} steps")
            coeffs = coeffs[-ns_steps:]
        return MuonState(jnp.zeros([], jnp.int32), tree_zeros_like(params, mu_dtype), coeffs)

    def update_fn(updates, state, params=None):
        dim_nums = _resolve(weight_dimension_numbers, updates)
        mu = update_moment(updates, state.mu, beta, 1)
        count_inc = safe_increment(state.count)
        if nesterov:
            mu_hat = tu.tree_map(lambda m, g: beta * m + (1 - beta) * g,
                                 bias_correction(mu, beta, safe_increment(count_inc)),
                                 bias_correction(updates, beta, count_inc))
        else:
            mu_hat = bias_correction(mu, beta, count_inc)
        updates = tu.tree_map(
            lambda x, d: orthogonalize_via_newton_schulz(x, state.ns_coeffs, ns_steps,
                                                         preconditioning, eps, d),
            mu_hat, dim_nums, is_leaf=_is_weight_dim_nums)
        if adaptive:
            updates = tu.tree_map(lambda x, y: jnp.sum(x.conj() * y) * y, mu_hat, updates)
        return updates, MuonState(count_inc, tree_cast(mu, mu_dtype), state.ns_coeffs)
    return GradientTransformation(init_fn, update_fn)


def muon(learning_rate, ns_coeffs=_DEFAULT_NS_COEFFS, ns_steps=5, beta=0.95, eps=1e-8,
         weight_decay=0.0, weight_decay_mask=None, mu_dtype=None, *, nesterov=True,
         adaptive=False, preconditioning="frobenius", adam_b1=0.9, adam_b2=0.999,
         adam_eps_root=0.0, adam_weight_decay=0.0, adam_learning_rate=None,
         muon_weight_dimension_numbers=None, consistent_rms=None):
    """Muon: Momentum Orthogonalized by Newton-Schulz (Jordan, 2024).

    Matrix parameters (2D by default, or those ``muon_weight_dimension_numbers`` names)
    get :func:`scale_by_muon`, shape scaling, weight decay and the learning rate; all
    other parameters get :func:`~xform.optim.adamw` (``adam_*`` arguments).

    Args:
        learning_rate: a float or a schedule.
        ns_coeffs: Newton-Schulz coefficients, or a preset name (``'standard'``, ``'dion'``).
        ns_steps: number of Newton-Schulz iterations.
        beta: momentum decay.
        eps: added to denominators.
        weight_decay: decoupled weight decay of the Muon parameters (times the learning rate).
        weight_decay_mask: pytree of bools (or a function returning one) selecting leaves
            to decay.
        mu_dtype: dtype of the momentum accumulators.
        nesterov: use Nesterov momentum.
        adaptive: scale updates by the dual norm of the momentum.
        preconditioning: ``'frobenius'``, ``'spectral'``, ``'aol'`` or ``'schatten'``.
        adam_b1, adam_b2, adam_eps_root, adam_weight_decay: AdamW's hyperparameters.
        adam_learning_rate: AdamW's learning rate (defaults to ``learning_rate``).
        muon_weight_dimension_numbers: pytree of :class:`MuonDimensionNumbers` (None leaves
            go to AdamW), or a function of the params returning one.
        consistent_rms: if given, scale updates by ``sqrt(max(fan_in, fan_out)) *
            consistent_rms`` instead of ``sqrt(max(1, fan_out / fan_in))``.

    Returns:
        A :class:`~xform.optim.GradientTransformationExtraArgs` (a :func:`partition`).

    Raises:
        ValueError: for an unknown ``ns_coeffs`` preset name.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> params = {'w': jnp.ones((2, 3)), 'b': jnp.zeros(3)}
        >>> tx = optax.contrib.muon(1e-2)
        >>> sorted(tx.init(params).inner_states)
        ['adam', 'muon']
    """
    if adam_learning_rate is None:
        adam_learning_rate = learning_rate
    if isinstance(ns_coeffs, str):
        if ns_coeffs not in _NS_COEFFS_PRESET_DICT:
            raise ValueError(f"Unknown ns_coeff preset string: {ns_coeffs}")
        ns_coeffs = _NS_COEFFS_PRESET_DICT[ns_coeffs]
    is_spec = lambda x: x is None or _is_weight_dim_nums(x)  # noqa: E731

    if muon_weight_dimension_numbers is None:
        def param_labels(params):
            return tu.tree_map(lambda x: "muon" if x.ndim == 2 else "adam", params)
        muon_weight_dimension_numbers = MuonDimensionNumbers()
    else:
        def param_labels(params):
            dim_nums = _resolve(muon_weight_dimension_numbers, params)
            return tu.tree_map(
                lambda d, sub: tu.tree_map(lambda _: "adam" if d is None else "muon", sub),
                dim_nums, params, is_leaf=is_spec)

    def muon_dim_nums(params):
        dim_nums = _resolve(muon_weight_dimension_numbers, params)
        mask = tu.tree_map(lambda label: label == "muon", param_labels(params))
        return tu.tree_map(
            lambda d, sub: tu.tree_map(lambda m: d if m else MaskedNode(), sub),
            dim_nums, mask, is_leaf=lambda x: is_spec(x) or isinstance(x, MaskedNode))

    return partition(
        {"muon": chain(
            scale_by_muon(ns_coeffs=ns_coeffs, ns_steps=ns_steps, beta=beta, eps=eps,
                          mu_dtype=mu_dtype, nesterov=nesterov, adaptive=adaptive,
                          preconditioning=preconditioning,
                          weight_dimension_numbers=muon_dim_nums),
            scale_by_shape(weight_dimension_numbers=muon_dim_nums,
                           consistent_rms=consistent_rms),
            add_decayed_weights(weight_decay, weight_decay_mask),
            scale_by_learning_rate(learning_rate)),
         "adam": adamw(learning_rate=adam_learning_rate, b1=adam_b1, b2=adam_b2, eps=eps,
                       eps_root=adam_eps_root, weight_decay=adam_weight_decay,
                       mu_dtype=mu_dtype, nesterov=nesterov)},
        param_labels=param_labels)


__all__ = ["MuonDimensionNumbers", "MuonState", "scale_by_muon", "muon"]
