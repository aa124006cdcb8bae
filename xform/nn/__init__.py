"""``xform.nn``: the neural-network functions of ``jax.nn`` (activations, softmax,
normalisation, one-hot, attention)."""
from xform.numpy import tanh  # noqa: F401  (jax.nn.tanh is jnp.tanh)
from xform.nn._activations import (  # noqa: F401
    celu, elu, gelu, glu, hard_sigmoid, hard_silu, hard_swish, hard_tanh, identity,
    leaky_relu, log1mexp, log_sigmoid, mish, relu, relu6, selu, sigmoid, silu, soft_sign,
    softplus, sparse_plus, sparse_sigmoid, squareplus, swish)
from xform.nn._functions import (  # noqa: F401
    log_softmax, logmeanexp, logsumexp, one_hot, softmax, standardize)
