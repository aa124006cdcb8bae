"""``xform.nn.activation``: flax.linen.activation's names (activation functions and
``PReLU``), re-exported from ``xform.nn``."""
from xform.nn._activations import (  # noqa: F401
    celu, elu, gelu, glu, hard_sigmoid, hard_silu, hard_swish, hard_tanh, leaky_relu,
    log_sigmoid, relu, relu6, selu, sigmoid, silu, soft_sign, softplus, swish)
from xform.nn._functions import (  # noqa: F401
    log_softmax, logsumexp, standardize as normalize, one_hot, softmax, standardize)
from xform.nn._linear import Dense  # noqa: F401
from xform.nn._module import compact, Module  # noqa: F401
from xform.nn._weight_norm import PReLU  # noqa: F401
from xform.numpy import tanh  # noqa: F401

__all__ = ["Dense", "Module", "PReLU", "celu", "compact", "elu", "gelu", "glu",
    "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "leaky_relu", "log_sigmoid",
    "log_softmax", "logsumexp", "normalize", "one_hot", "relu", "relu6", "selu",
    "sigmoid", "silu", "soft_sign", "softmax", "softplus", "standardize", "swish",
    "tanh"]
