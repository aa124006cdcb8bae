"""``xform.nn.module``: flax.linen.module's names (the ``Module`` system and method
interception), re-exported from ``xform.nn``."""
from xform.nn._lifted_extras import (  # noqa: F401
    compact_name_scope, disable_named_call, enable_named_call, override_named_call)
from xform.nn._intercept import intercept_methods, InterceptorContext  # noqa: F401
from xform.nn._module import (  # noqa: F401
    apply, compact, init, init_with_output, merge_param, Module, nowrap, share_scope,
    Variable)
from xform.nn._scope import DenyList  # noqa: F401
from xform.nn.core import FrozenDict  # noqa: F401

__all__ = ["DenyList", "FrozenDict", "InterceptorContext", "Module", "Variable",
    "apply", "compact", "compact_name_scope", "disable_named_call", "enable_named_call",
    "init", "init_with_output", "intercept_methods", "merge_param", "nowrap",
    "override_named_call", "share_scope"]
