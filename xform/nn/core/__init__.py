"""``xform.nn.core`` (``flax.core``): Flax's functional core. ``Scope``, ``init``,
``apply``, ``bind`` (``scope``), the lifted transformations (``lift``), ``FrozenDict``
and its helpers, axis metadata, ``DenyList`` and the scan ``broadcast`` marker.

linen's ``Module`` is bound to this same ``Scope`` and its lifted transformations
(``nn.vmap``, ``nn.scan``, ...) run on the same core transformations as ``lift``."""
from xform.core.array import Array  # noqa: F401
from xform.nn._scope import broadcast  # noqa: F401
from xform.nn.core import frozen_dict, meta, scope, spmd, tracers  # noqa: F401
from xform.nn.core.frozen_dict import (  # noqa: F401
    FrozenDict, copy, freeze, pop, pretty_repr, unfreeze)
from xform.nn.core.meta import AxisMetadata, map_axis_meta, unbox  # noqa: F401
from xform.nn.core.scope import (  # noqa: F401
    DenyList, Scope, apply, bind, init, lazy_init)
from xform.nn.core.tracers import check_trace_level, current_trace  # noqa: F401

__all__ = ["Array", "AxisMetadata", "DenyList", "FrozenDict", "Scope", "apply", "bind",
           "broadcast", "check_trace_level", "copy", "current_trace", "custom_vjp",
           "freeze", "frozen_dict", "init", "jit", "jvp", "lazy_init", "lift",
           "map_axis_meta", "meta", "pop", "pretty_repr", "remat", "remat_scan", "scan",
           "scope", "spmd", "tracers", "unbox", "unfreeze", "vjp", "vmap", "while_loop"]

_LIFTED = ("custom_vjp", "jit", "jvp", "remat", "remat_scan", "scan", "vjp", "vmap",
           "while_loop")


def __getattr__(name):
    """``lift`` and its names, loaded on first use: ``lift`` imports linen's
    transformations, whose ``_module`` imports ``xform.nn.core.frozen_dict`` (and so
    this package) while it loads."""
    if name == "lift" or name in _LIFTED:
        import importlib   # noqa: PLC0415 (the cycle above)
        lift = importlib.import_module("xform.nn.core.lift")
        return lift if name == "lift" else getattr(lift, name)
    raise AttributeError(f"module 'xform.nn.core' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"lift", *_LIFTED})
