"""``xform.nn.attention``: flax.linen.attention's names (attention layers and
functions), re-exported from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    DenseGeneral, LayerNorm, Module, MultiHeadAttention, MultiHeadDotProductAttention,
    SelfAttention, combine_masks, compact, dot_product_attention,
    dot_product_attention_weights, make_attention_mask, make_causal_mask, merge_param)

__all__ = ["DenseGeneral", "LayerNorm", "Module", "MultiHeadAttention",
    "MultiHeadDotProductAttention", "SelfAttention", "combine_masks", "compact",
    "dot_product_attention", "dot_product_attention_weights", "make_attention_mask",
    "make_causal_mask", "merge_param"]
