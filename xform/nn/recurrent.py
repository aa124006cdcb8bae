"""``xform.nn.recurrent``: flax.linen.recurrent's names (recurrent cells and ``RNN``),
re-exported from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    Bidirectional, Conv, ConvLSTMCell, Dense, FrozenDict, GRUCell, LSTMCell, MGUCell,
    Module, OptimizedLSTMCell, RNN, RNNCellBase, SimpleCell, compact, nowrap, sigmoid,
    tanh)

__all__ = ["Bidirectional", "Conv", "ConvLSTMCell", "Dense", "FrozenDict", "GRUCell",
    "LSTMCell", "MGUCell", "Module", "OptimizedLSTMCell", "RNN", "RNNCellBase",
    "SimpleCell", "compact", "nowrap", "sigmoid", "tanh"]
