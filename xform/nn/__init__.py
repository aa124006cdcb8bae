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
from xform.nn._module import (  # noqa: E402
    Module, Variable, apply, compact, init, init_with_output, merge_param, nowrap,
    share_scope)
from xform.nn._linear import (  # noqa: E402
    Dense, DenseGeneral, Einsum, Embed, canonicalize_dtype, promote_dtype)
from xform.nn._normalization import BatchNorm, GroupNorm, LayerNorm, RMSNorm  # noqa: E402
from xform.nn._stochastic import Dropout, Sequential  # noqa: E402
from xform.nn._transforms import (  # noqa: E402
    broadcast, checkpoint, remat, scan, vmap)
from xform.nn._summary import tabulate  # noqa: E402
from xform.nn._control import cond, switch, while_loop  # noqa: E402
from xform.nn._normalization import InstanceNorm  # noqa: E402
from xform.nn._meta import (  # noqa: E402
    PARTITION_NAME, AxisMetadata, Partitioned, get_partition_spec, get_sharding, unbox,
    with_partitioning)
from xform.nn._spmd import (  # noqa: E402
    LogicallyPartitioned, get_logical_axis_rules, logical_axis_rules, logical_to_mesh,
    logical_to_mesh_axes, logical_to_mesh_sharding, set_logical_axis_rules,
    with_logical_constraint, with_logical_partitioning)

__all__ += [
    "PARTITION_NAME", "AxisMetadata", "Partitioned", "get_partition_spec", "get_sharding",
    "unbox", "with_partitioning", "LogicallyPartitioned", "get_logical_axis_rules",
    "logical_axis_rules", "logical_to_mesh", "logical_to_mesh_axes",
    "logical_to_mesh_sharding", "set_logical_axis_rules", "with_logical_constraint",
    "with_logical_partitioning", "cond", "switch", "while_loop", "InstanceNorm",
    "errors", "initializers", "DenyList", "Module", "Variable", "apply", "compact", "init",
    "init_with_output", "merge_param", "nowrap", "share_scope", "Dense", "DenseGeneral",
    "Einsum", "Embed", "canonicalize_dtype", "promote_dtype", "BatchNorm", "GroupNorm",
    "LayerNorm", "RMSNorm", "Dropout", "Sequential", "broadcast", "checkpoint", "jit",
    "remat", "scan", "vmap", "tabulate"]

# conv, pooling, attention, recurrent
# (flax.linen's dot_product_attention replaces jax.nn's under the shared name, as in
# flax.linen; it still runs jax.nn's for jax.nn's options: see _attention_fns.)
from xform.nn._attention_fns import (  # noqa: E402
    combine_masks, dot_product_attention, dot_product_attention_weights,
    make_attention_mask, make_causal_mask)
from xform.nn._attention import (  # noqa: E402
    MultiHeadAttention, MultiHeadDotProductAttention, SelfAttention)
from xform.nn._conv import Conv, ConvLocal, ConvTranspose  # noqa: E402
from xform.nn._pooling import avg_pool, max_pool, min_pool, pool  # noqa: E402
from xform.nn._recurrent import (  # noqa: E402
    RNN, Bidirectional, ConvLSTMCell, GRUCell, LSTMCell, MGUCell, OptimizedLSTMCell,
    RNNCellBase, SimpleCell)

__all__ += [
    "MultiHeadAttention", "MultiHeadDotProductAttention", "SelfAttention",
    "Conv", "ConvLocal", "ConvTranspose", "avg_pool", "combine_masks",
    "dot_product_attention_weights", "make_attention_mask", "make_causal_mask", "max_pool",
    "min_pool", "pool", "RNN", "Bidirectional", "ConvLSTMCell", "GRUCell", "LSTMCell",
    "MGUCell", "OptimizedLSTMCell", "RNNCellBase", "SimpleCell"]

# Flax beyond linen (``from flax import X`` -> ``from xform.nn import X``; see
# docs/migration.md): core (FrozenDict), traverse_util, serialization, config, struct.
from xform.nn import core, jax_utils, serialization, traverse_util  # noqa: E402
from xform.nn.configurations import config  # noqa: E402
from xform.training import struct  # noqa: E402
import sys as _sys  # noqa: E402
_sys.modules[__name__ + ".struct"] = struct   # ``import flax.struct`` works as well

# Lifted map_variables and differentiation (issue 25's remaining linen names)
from xform.nn._lifted_ad import (  # noqa: E402
    custom_vjp, grad, jvp, map_variables, value_and_grad, vjp)
from xform.nn._weight_norm import PReLU, SpectralNorm, WeightNorm  # noqa: E402
from xform.nn._lifted_jit import jit  # noqa: E402
from xform.nn._intercept import InterceptorContext, intercept_methods  # noqa: E402
from xform.nn._lifted_extras import (  # noqa: E402
    add_metadata_axis, compact_name_scope, disable_named_call, enable_named_call,
    fold_rngs, named_call, override_named_call, remat_scan)
from xform.nn.batch_apply import BatchApply  # noqa: E402
from xform.nn.core import FrozenDict, meta  # noqa: E402
from xform.nn.initializers import ones, ones_init, zeros, zeros_init  # noqa: E402
normalize = standardize   # flax.linen's deprecated alias

__all__ += [
    "custom_vjp", "grad", "jvp", "map_variables", "value_and_grad", "vjp", "PReLU",
    "SpectralNorm", "WeightNorm", "InterceptorContext", "intercept_methods",
    "disable_named_call", "enable_named_call", "named_call", "override_named_call",
    "remat_scan", "BatchApply", "FrozenDict", "ones", "ones_init", "zeros", "zeros_init",
    "normalize", "add_metadata_axis", "compact_name_scope", "fold_rngs"]

# FP8 training (flax.linen's fp8_ops) and jax.nn's block-scaled matmul
from xform.nn import fp8_ops  # noqa: E402
from xform.nn.fp8_ops import (  # noqa: E402
    Fp8DirectDotGeneralOp, Fp8DotGeneral, Fp8DotGeneralOp, Fp8Einsum, NANOOFp8DotGeneralOp)

from xform.nn._scaled_matmul import (  # noqa: E402
    get_scaled_dot_general_config, scaled_dot_general, scaled_matmul)

__all__ += ["get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul",
            "fp8_ops", "Fp8DirectDotGeneralOp", "Fp8DotGeneral", "Fp8DotGeneralOp",
            "Fp8Einsum", "NANOOFp8DotGeneralOp"]

# flax.linen's submodules, under the same names (``from xform.nn.linear import Dense``)
from xform.nn import (  # noqa: E402
    activation, attention, batch_apply, combinators, dtypes, kw_only_dataclasses,
    linear, module, normalization, pooling, recurrent, spmd, stochastic, summary,
    transforms)
from xform.nn import cursor, typing  # noqa: E402  (flax.cursor, flax.typing)
