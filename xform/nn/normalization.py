"""``xform.nn.normalization``: flax.linen.normalization's names (normalization layers
(``WeightNorm`` and ``SpectralNorm`` included)), re-exported from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    BatchNorm, GroupNorm, InstanceNorm, LayerNorm, Module, RMSNorm, SpectralNorm,
    WeightNorm, compact, map_variables, merge_param)

__all__ = ["BatchNorm", "GroupNorm", "InstanceNorm", "LayerNorm", "Module", "RMSNorm",
    "SpectralNorm", "WeightNorm", "compact", "map_variables", "merge_param"]
