"""``xform.nn.transforms``: flax.linen.transforms's names (lifted transformations),
re-exported from ``xform.nn``."""
from xform.nn._control import cond, switch, while_loop  # noqa: F401
from xform.nn._lifted_ad import custom_vjp, grad, jvp, map_variables, value_and_grad, vjp  # noqa: F401
from xform.nn._lifted_extras import add_metadata_axis, fold_rngs, named_call, remat_scan  # noqa: F401
from xform.nn._lifted_jit import jit  # noqa: F401
from xform.nn._module import Module, Variable  # noqa: F401
from xform.nn._transforms import broadcast, checkpoint, remat, scan, vmap  # noqa: F401
from xform.nn.core import FrozenDict  # noqa: F401

__all__ = ["FrozenDict", "Module", "Variable", "add_metadata_axis", "broadcast",
    "checkpoint", "cond", "custom_vjp", "fold_rngs", "grad", "jit", "jvp",
    "map_variables", "named_call", "remat", "remat_scan", "scan", "switch",
    "value_and_grad", "vjp", "vmap", "while_loop"]
