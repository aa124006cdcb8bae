"""``xform.nn.module``: flax.linen.module's names (the ``Module`` system and method
interception), re-exported from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    DenyList, FrozenDict, InterceptorContext, Module, Variable, apply, compact,
    compact_name_scope, disable_named_call, enable_named_call, init, init_with_output,
    intercept_methods, merge_param, nowrap, override_named_call, share_scope)

__all__ = ["DenyList", "FrozenDict", "InterceptorContext", "Module", "Variable",
    "apply", "compact", "compact_name_scope", "disable_named_call", "enable_named_call",
    "init", "init_with_output", "intercept_methods", "merge_param", "nowrap",
    "override_named_call", "share_scope"]
