"""Training utilities (``flax.training``): :class:`~xform.training.train_state.TrainState`
and the pytree dataclasses (:mod:`xform.training.struct`) it is built from."""
from xform.training import struct, train_state  # noqa: F401
from xform.training.train_state import TrainState  # noqa: F401
