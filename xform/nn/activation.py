"""``xform.nn.activation``: flax.linen.activation's names (activation functions and
``PReLU``), re-exported from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    Dense, Module, PReLU, celu, compact, elu, gelu, glu, hard_sigmoid, hard_silu,
    hard_swish, hard_tanh, leaky_relu, log_sigmoid, log_softmax, logsumexp, normalize,
    one_hot, relu, relu6, selu, sigmoid, silu, soft_sign, softmax, softplus,
    standardize, swish, tanh)

__all__ = ["Dense", "Module", "PReLU", "celu", "compact", "elu", "gelu", "glu",
    "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "leaky_relu", "log_sigmoid",
    "log_softmax", "logsumexp", "normalize", "one_hot", "relu", "relu6", "selu",
    "sigmoid", "silu", "soft_sign", "softmax", "softplus", "standardize", "swish",
    "tanh"]
