"""``optax.transforms``: the gradient transformations and wrappers, grouped as Optax
groups them (accumulation, adding, clipping, combining, conditionality, constraining,
freezing, layouts, masking, monitoring)."""
from xform.optim._base import chain, named_chain  # noqa: F401
from xform.optim._basic import (  # noqa: F401
    trace, TraceState, ema, EmaState, add_decayed_weights, add_noise, AddNoiseState, clip,
    clip_by_block_rms, clip_by_global_norm, zero_nans, ZeroNansState, keep_params_nonnegative)
from xform.optim._more import (  # noqa: F401
    conditionally_mask, conditionally_transform, ConditionallyMaskState,
    ConditionallyTransformState)
from xform.optim._protocols import (  # noqa: F401
    ConditionFn, NonNegativeParamsState, ShouldSkipUpdateFunction)
from xform.optim._transforms_more import (  # noqa: F401
    adaptive_grad_clip, per_example_global_norm_clip, per_example_layer_norm_clip,
    unitwise_clip, unitwise_norm, freeze, selective_transform, flatten, snapshot,
    SnapshotState, monitor, MonitorState, measure_with_ema)
from xform.optim._wrappers import (  # noqa: F401
    masked, MaskedNode, MaskedState, partition, PartitionState, apply_if_finite,
    ApplyIfFiniteState, MultiSteps, MultiStepsState, skip_large_updates, skip_not_finite)

__all__ = [n for n in dir() if not n.startswith("_")]
