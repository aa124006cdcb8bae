"""``xform.nn.attention``: flax.linen.attention's names (attention layers and
functions), re-exported from ``xform.nn``."""
from xform.nn._attention import (  # noqa: F401
    MultiHeadAttention, MultiHeadDotProductAttention, SelfAttention)
from xform.nn._attention_fns import (  # noqa: F401
    combine_masks, dot_product_attention, dot_product_attention_weights,
    make_attention_mask, make_causal_mask)
from xform.nn._linear import DenseGeneral, promote_dtype  # noqa: F401
from xform.nn._module import compact, merge_param, Module  # noqa: F401
from xform.nn._normalization import LayerNorm  # noqa: F401

__all__ = ["DenseGeneral", "LayerNorm", "Module", "MultiHeadAttention",
    "MultiHeadDotProductAttention", "SelfAttention", "combine_masks", "compact",
    "dot_product_attention", "dot_product_attention_weights", "make_attention_mask",
    "make_causal_mask", "merge_param", "promote_dtype"]
