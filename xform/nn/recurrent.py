"""``xform.nn.recurrent``: flax.linen.recurrent's names (recurrent cells and ``RNN``),
re-exported from ``xform.nn``."""
from xform.nn._activations import sigmoid  # noqa: F401
from xform.nn._conv import Conv  # noqa: F401
from xform.nn._linear import Dense, promote_dtype  # noqa: F401
from xform.nn._module import compact, Module, nowrap  # noqa: F401
from xform.nn._recurrent import (  # noqa: F401
    Bidirectional, ConvLSTMCell, GRUCell, LSTMCell, MGUCell, OptimizedLSTMCell, RNN,
    RNNCellBase, SimpleCell, flip_sequences)
from xform.nn.core import FrozenDict  # noqa: F401
from xform.numpy import tanh  # noqa: F401

__all__ = ["Bidirectional", "Conv", "ConvLSTMCell", "Dense", "FrozenDict", "GRUCell",
    "LSTMCell", "MGUCell", "Module", "OptimizedLSTMCell", "RNN", "RNNCellBase",
    "SimpleCell", "compact", "flip_sequences", "nowrap", "promote_dtype", "sigmoid", "tanh"]
