"""``xform.nn``: the neural-network functions of ``jax.nn`` (activations, softmax,
normalisation, one-hot, attention), ``jax.nn.initializers``, and Flax linen's module
system and layers (``import xform.nn as nn`` runs linen model code)."""
from xform.numpy import tanh   # jax.nn.tanh is jnp.tanh
from xform.nn._activations import (
    celu, elu, gelu, glu, hard_sigmoid, hard_silu, hard_swish, hard_tanh, identity,
    leaky_relu, log1mexp, log_sigmoid, mish, relu, relu6, selu, sigmoid, silu, soft_sign,
    softplus, sparse_plus, sparse_sigmoid, squareplus, swish)
from xform.nn._functions import (
    dot_product_attention, log_softmax, logmeanexp, logsumexp, one_hot, softmax,
    standardize)

__all__ = [
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu",
    "hard_swish", "hard_tanh", "identity", "leaky_relu", "log1mexp", "log_sigmoid",
    "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot", "relu", "relu6", "selu",
    "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus", "sparse_sigmoid",
    "squareplus", "standardize", "swish", "tanh"]

# ---- Flax linen: module system and basic layers (``import xform.nn as nn``) ----
from xform.nn import errors, initializers  # noqa: E402
from xform.nn._scope import DenyList  # noqa: E402
from xform.nn._module import Module, Variable, compact, nowrap, share_scope  # noqa: E402
from xform.nn._linear import Dense, promote_dtype  # noqa: E402

__all__ += ["errors", "initializers", "DenyList", "Module", "Variable", "compact",
            "nowrap", "share_scope", "Dense", "promote_dtype"]
