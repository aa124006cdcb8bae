"""``xform.nn.normalization``: flax.linen.normalization's names (normalization layers
(``WeightNorm`` and ``SpectralNorm`` included)), re-exported from ``xform.nn``."""
from xform.nn._lifted_ad import map_variables  # noqa: F401
from xform.nn._linear import canonicalize_dtype  # noqa: F401
from xform.nn._module import compact, merge_param, Module  # noqa: F401
from xform.nn._normalization import BatchNorm, GroupNorm, InstanceNorm, LayerNorm, RMSNorm  # noqa: F401
from xform.nn._weight_norm import SpectralNorm, WeightNorm  # noqa: F401

__all__ = ["BatchNorm", "GroupNorm", "InstanceNorm", "LayerNorm", "Module", "RMSNorm",
    "SpectralNorm", "WeightNorm", "canonicalize_dtype", "compact", "map_variables", "merge_param"]
