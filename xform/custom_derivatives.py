"""``jax.custom_derivatives``: the custom-rule API (a face over the transforms)."""
from xform.interpreters.custom import (
    CustomVJPPrimal, SymbolicZero, custom_jvp_call_p, custom_vjp_call_p, linear_call_p,
    zero_from_primal)
from xform.transforms.ad_extras import custom_gradient
from xform.transforms.custom_derivatives import (
    closure_convert, custom_jvp, custom_vjp, custom_vjp_primal_tree_values)
from xform.transforms.custom_linear import linear_call

__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient",
           "custom_jvp", "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p",
           "custom_vjp_primal_tree_values", "linear_call", "linear_call_p",
           "zero_from_primal"]
