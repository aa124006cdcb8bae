"""xform: composable function transformations (jit, grad, vmap) compiled with XLA.

``import xform as jax; import xform.numpy as jnp`` runs JAX-style code.
"""
from xform import dtypes, errors, lax, tree, tree_util
from xform.core.array import Array
from xform.core.config import config
from xform.interpreters import pjit as _pjit  # noqa: F401  (registers the call primitive)
from xform.transforms.jit import (jit, make_jaxpr, eval_shape, ShapeDtypeStruct)
from xform.transforms.ad import (grad, value_and_grad, jvp, vjp, linearize, jacfwd,
                                 jacrev, hessian)
from xform.transforms.vmap import vmap
from xform.transforms.custom_derivatives import custom_jvp, custom_vjp, closure_convert
from xform.transforms.checkpoint import checkpoint, remat, checkpoint_policies
from xform import ad_checkpoint  # noqa: E402
from xform.transforms.devices import (device_put, devices, device_count, local_devices,
                                      default_backend, block_until_ready, disable_jit)
from xform import debug  # noqa: E402  (xform.debug.print / callback)
from xform.interpreters.callback import pure_callback

from xform import numpy  # noqa: E402,F401  (also installs the Array/Tracer operators)
from xform import nn, scipy  # noqa: E402,F401

__version__ = "0.1.0"
