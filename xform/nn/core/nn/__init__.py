"""``xform.nn.core.nn`` (``flax.core.nn``): layers as scope functions
``layer(scope, inputs, ...)`` that declare their params on the scope given (use
``scope.child(dense)`` for a named sub-layer), plus linen's activations and pooling."""
from xform.nn import activation, initializers  # noqa: F401
from xform.nn.activation import (  # noqa: F401
    celu, elu, gelu, glu, leaky_relu, log_sigmoid, log_softmax, relu, sigmoid, silu,
    soft_sign, softmax, softplus, swish, tanh)
from xform.nn._pooling import avg_pool, max_pool  # noqa: F401
from xform.nn.core.nn.attention import (  # noqa: F401
    dot_product_attention, multi_head_dot_product_attention)
from xform.nn.core.nn.linear import (  # noqa: F401
    Embedding, conv, conv_transpose, dense, dense_general, embedding)
from xform.nn.core.nn.normalization import batch_norm, group_norm, layer_norm  # noqa: F401
from xform.nn.core.nn.stochastic import dropout  # noqa: F401

__all__ = ["Embedding", "activation", "avg_pool", "batch_norm", "celu", "conv",
           "conv_transpose", "dense", "dense_general", "dot_product_attention", "dropout",
           "elu", "embedding", "gelu", "glu", "group_norm", "initializers", "layer_norm",
           "leaky_relu", "log_sigmoid", "log_softmax", "max_pool",
           "multi_head_dot_product_attention", "relu", "sigmoid", "silu", "soft_sign",
           "softmax", "softplus", "swish", "tanh"]
