"""Optax-style composable gradient transformations: ``import xform.optim as optax``.

A transformation is an ``(init, update)`` pair of pure functions; optimizers are chains
of them; states are NamedTuples of pytrees, so ``jit``, ``vmap``, ``pmap`` and
``xform.checkpoint`` handle them. Names, signatures and numerics follow Optax 0.2.8.

Example:
    >>> import xform, xform.numpy as jnp, xform.optim as optax
    >>> params = {'w': jnp.array([1., -2.])}
    >>> tx = optax.adamw(1e-2)
    >>> opt_state = tx.init(params)
    >>> grads = xform.grad(lambda p: jnp.sum(p['w'] ** 2))(params)
    >>> updates, opt_state = tx.update(grads, opt_state, params)
    >>> [round(float(x), 4) for x in optax.apply_updates(params, updates)['w']]
    [0.99, -1.99]
"""
from xform.optim._base import (  # noqa: F401
    GradientTransformation, GradientTransformationExtraArgs, EmptyState, init_empty_state,
    identity, set_to_zero, stateless, stateless_with_tree_map, with_extra_args_support,
    chain, named_chain, apply_updates, incremental_update, periodic_update, global_norm,
    safe_increment, safe_int32_increment, NO_PARAMS_MSG, Params, Updates, OptState, Schedule,
    ScalarOrSchedule, ArrayTree, PyTree, TransformInitFn, TransformUpdateFn)
from xform.optim._basic import (  # noqa: F401
    scale, scale_by_sign, scale_by_schedule, ScaleByScheduleState, scale_by_learning_rate,
    scale_by_trust_ratio, scale_by_param_block_norm, scale_by_param_block_rms, trace,
    TraceState, ema, EmaState, add_decayed_weights, AddDecayedWeightsState,
    WeightDecaySchedule, add_noise, AddNoiseState, clip, clip_by_block_rms,
    clip_by_global_norm, zero_nans, ZeroNansState, keep_params_nonnegative, centralize,
    safe_norm, safe_root_mean_squares)
from xform.optim._scaling import (  # noqa: F401
    scale_by_rss, ScaleByRssState, scale_by_rms, ScaleByRmsState, ScaleByRmsWithCountState,
    scale_by_stddev, ScaleByRStdDevState, ScaleByRStdDevWithCountState, scale_by_adam,
    ScaleByAdamState, scale_by_amsgrad, ScaleByAmsgradState, scale_by_adamax, scale_by_lion,
    ScaleByLionState, scale_by_adadelta, ScaleByAdaDeltaState, scale_by_belief,
    ScaleByBeliefState, scale_by_yogi, scale_by_radam, scale_by_novograd,
    ScaleByNovogradState, scale_by_sm3, ScaleBySM3State, scale_by_factored_rms, FactoredState)
from xform.optim._wrappers import (  # noqa: F401
    masked, MaskedState, MaskedNode, partition, multi_transform, PartitionState,
    MultiTransformState, apply_if_finite, ApplyIfFiniteState, MultiSteps, MultiStepsState,
    skip_not_finite, skip_large_updates, inject_hyperparams, InjectHyperparamsState,
    InjectStatefulHyperparamsState, WrappedSchedule, apply_every, ApplyEvery)
from xform.optim._alias import (  # noqa: F401
    sgd, adam, nadam, adamw, nadamw, adamax, adamaxw, amsgrad, radam, rmsprop, adagrad,
    adadelta, adafactor, lamb, lars, lion, adabelief, novograd, yogi, sm3, sign_sgd, signum,
    noisy_sgd, fromage)
from xform.optim._more import (  # noqa: F401
    scale_by_adan, ScaleByAdanState, adan, scale_by_rprop, ScaleByRpropState, rprop,
    scale_by_optimistic_gradient, ScaleByOptimisticGradientState, optimistic_gradient_descent,
    scale_by_polyak, polyak_sgd, conditionally_transform, ConditionallyTransformState,
    conditionally_mask, ConditionallyMaskState)
from xform.optim._linesearch import (  # noqa: F401
    scale_by_backtracking_linesearch, ScaleByBacktrackingLinesearchState,
    scale_by_zoom_linesearch, ScaleByZoomLinesearchState, ZoomLinesearchInfo,
    value_and_grad_from_state)
from xform.optim._lbfgs import scale_by_lbfgs, ScaleByLBFGSState, lbfgs  # noqa: F401
from xform.optim import schedules, losses, tree_utils, loss_scale  # noqa: F401
from xform.optim.schedules import (  # noqa: F401
    constant_schedule, polynomial_schedule, linear_schedule, piecewise_constant_schedule,
    exponential_decay, cosine_decay_schedule, piecewise_interpolate_schedule,
    linear_onecycle_schedule, cosine_onecycle_schedule, warmup_constant_schedule,
    warmup_cosine_decay_schedule, warmup_exponential_decay_schedule, sgdr_schedule,
    join_schedules)
from xform.optim.losses import (  # noqa: F401
    softmax_cross_entropy, softmax_cross_entropy_with_integer_labels,
    sigmoid_binary_cross_entropy, l2_loss, squared_error, huber_loss, log_cosh,
    cosine_similarity, cosine_distance, kl_divergence, kl_divergence_with_log_targets,
    hinge_loss, ctc_loss)
from xform.optim.loss_scale import (  # noqa: F401
    all_finite, select_tree, NoOpLossScale, StaticLossScale, DynamicLossScale, Policy, get_policy)

from xform.optim import contrib  # noqa: F401,E402
# The rest of Optax 0.2.8's public surface (issue 25): its submodules and top-level names.
from xform.optim import (  # noqa: F401
    transforms, tree, projections, second_order, perturbations, assignment, microbatching,
    experimental)
from xform.optim._alias_more import (  # noqa: F401
    scale_by_distance_over_gradients, ScaleByDistanceOverGradientsState,
    normalize_by_update_norm, optimistic_adam, optimistic_adam_v2)
from xform.optim._protocols import (  # noqa: F401
    MaskOrFn, TransformUpdateExtraArgsFn, ShouldSkipUpdateFunction, AdaptiveGradClipState,
    ClipByGlobalNormState, ClipState, NonNegativeParamsState, ScaleState,
    ScaleByTrustRatioState)
from xform.optim._transforms_more import (  # noqa: F401
    adaptive_grad_clip, per_example_global_norm_clip, per_example_layer_norm_clip, flatten,
    freeze, selective_transform, snapshot, SnapshotState, monitor, MonitorState,
    measure_with_ema)
from xform.optim._linalg import (  # noqa: F401
    power_iteration, matrix_inverse_pth_root, nnls, lookahead, LookaheadParams, LookaheadState,
    multi_normal, scale_gradient)
from xform.optim.losses import (  # noqa: F401
    ctc_loss_with_forward_probs, convex_kl_divergence, generalized_kl_divergence, ntxent,
    smooth_labels, safe_softmax_cross_entropy, sigmoid_focal_loss)
from xform.optim.schedules import inject_stateful_hyperparams  # noqa: F401
from xform.optim.microbatching import microbatch  # noqa: F401
from xform.optim.tree_utils import (  # noqa: F401
    tree_map_params, tree_bias_correction as bias_correction,
    tree_update_moment as update_moment,
    tree_update_moment_per_elem_norm as update_moment_per_elem_norm,
    tree_update_infinity_moment as update_infinity_moment)

# Optax 0.2.8's deprecated top-level names: optax.contrib's DP-SGD under its old names
# (with a DeprecationWarning), and the removed monte_carlo module (an AttributeError).
import importlib as _importlib
import warnings as _warnings

_DEPRECATED = {
    "differentially_private_aggregate": "optax.differentially_private_aggregate is "
    "deprecated: use optax.contrib.differentially_private_aggregate (optax v0.1.8 or newer).",
    "DifferentiallyPrivateAggregateState": "optax.DifferentiallyPrivateAggregateState is "
    "deprecated: use optax.contrib.DifferentiallyPrivateAggregateState (optax v0.1.8 or "
    "newer).",
    "dpsgd": "optax.dpsgd is deprecated: use optax.contrib.dpsgd (optax v0.1.8 or newer).",
    "monte_carlo": "optax.monte_carlo is deprecated. (optax v0.2.7 or newer).",
}


def __getattr__(name):
    if name not in _DEPRECATED or name == "monte_carlo":
        raise AttributeError(_DEPRECATED.get(name,
                                             f"module 'xform.optim' has no attribute {name!r}"))
    try:    # imported on first use: contrib imports this package
        contrib = _importlib.import_module("xform.optim.contrib")
    except ModuleNotFoundError as e:
        raise AttributeError(f"{name} lives in xform.optim.contrib, which is missing") from e
    _warnings.warn(_DEPRECATED[name], DeprecationWarning, stacklevel=2)
    return getattr(contrib, name)
