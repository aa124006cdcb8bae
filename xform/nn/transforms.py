"""``xform.nn.transforms``: flax.linen.transforms's names (lifted transformations),
re-exported from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    FrozenDict, Module, Variable, add_metadata_axis, broadcast, checkpoint, cond,
    custom_vjp, fold_rngs, grad, jit, jvp, map_variables, named_call, remat, remat_scan,
    scan, switch, value_and_grad, vjp, vmap, while_loop)

__all__ = ["FrozenDict", "Module", "Variable", "add_metadata_axis", "broadcast",
    "checkpoint", "cond", "custom_vjp", "fold_rngs", "grad", "jit", "jvp",
    "map_variables", "named_call", "remat", "remat_scan", "scan", "switch",
    "value_and_grad", "vjp", "vmap", "while_loop"]
