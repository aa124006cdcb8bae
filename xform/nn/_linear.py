"""Linear layers (Flax linen's ``Dense``, ``DenseGeneral``, ``Einsum``, ``Embed``) and
``promote_dtype``, the mixed-precision rule they share."""
import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.nn import initializers
from xform.nn._module import Module, compact

default_kernel_init = initializers.lecun_normal()


def canonicalize_dtype(*args, dtype=None, inexact=True):
    """The dtype computations run in: ``dtype`` or the promoted dtype of ``args``."""
    if dtype is None:
        dtype = jnp.result_type(*[jnp.asarray(x) for x in args if x is not None])
        if inexact and not jnp.issubdtype(dtype, jnp.inexact):
            dtype = jnp.promote_types(jnp.float32, dtype)
    if inexact and not jnp.issubdtype(dtype, jnp.inexact):
        raise ValueError(f"Dtype must be inexact: {dtype}")
    return dtype


def promote_dtype(*args, dtype=None, inexact=True):
    """Casts ``args`` (``None`` kept) to one dtype: ``dtype`` or their promotion."""
    dtype = canonicalize_dtype(*args, dtype=dtype, inexact=inexact)
    return [None if x is None else jnp.asarray(x, dtype) for x in args]


class Dense(Module):
    """A linear map over the last axis: ``y = x @ kernel + bias``.

    Attributes: features (output size), use_bias, dtype (computation dtype; None:
    promoted from inputs and params), param_dtype, precision, kernel_init (LeCun
    normal), bias_init (zeros), dot_general.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.Dense(3).init(xform.random.PRNGKey(0), jnp.ones((2, 4)))
    >>> v['params']['kernel'].shape, v['params']['bias'].shape
    ((4, 3), (3,))
    """
    features: int
    use_bias: bool = True
    dtype: object = None
    param_dtype: object = jnp.float32
    precision: object = None
    kernel_init: object = default_kernel_init
    bias_init: object = initializers.zeros
    promote_dtype: object = promote_dtype
    dot_general: object = None
    dot_general_cls: object = None

    @compact
    def __call__(self, inputs):
        kernel = self.param("kernel", self.kernel_init,
                            (jnp.shape(inputs)[-1], self.features), self.param_dtype)
        bias = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
                if self.use_bias else None)
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        dot_general = (self.dot_general_cls() if self.dot_general_cls is not None
                       else self.dot_general or lax.dot_general)
        y = dot_general(inputs, kernel, (((inputs.ndim - 1,), (0,)), ((), ())),
                        precision=self.precision)
        if bias is not None:
            y += jnp.reshape(bias, (1,) * (y.ndim - 1) + (-1,))
        return y
