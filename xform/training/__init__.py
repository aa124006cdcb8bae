"""Training utilities (``flax.training``): :class:`~xform.training.train_state.TrainState`,
the pytree dataclasses (:mod:`xform.training.struct`) it is built from, and Flax's
``common_utils``, ``dynamic_scale``, ``early_stopping``, ``lr_schedule`` and
``prefetch_iterator`` (checkpoints: :mod:`xform.checkpoint`)."""
from xform.training import struct, train_state  # noqa: F401
from xform.training.train_state import TrainState  # noqa: F401
from xform.training import (  # noqa: F401
    common_utils, dynamic_scale, early_stopping, lr_schedule, prefetch_iterator)
