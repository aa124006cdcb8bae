"""``jax.custom_derivatives``: the custom-rule API (a face over the transforms)."""
from xform.transforms.custom_derivatives import custom_jvp, custom_vjp, closure_convert  # noqa: F401
from xform.transforms.ad_extras import custom_gradient  # noqa: F401
from xform.interpreters.custom import custom_jvp_call_p, custom_vjp_call_p  # noqa: F401
