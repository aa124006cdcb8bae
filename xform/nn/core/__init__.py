"""``xform.nn.core`` (``flax.core``): ``FrozenDict`` and its helpers, axis metadata, the
``DenyList`` filter and the ``broadcast`` marker. Flax's functional ``Scope`` API
(``Scope``, ``bind``, ``lift``) is not exposed: xform's scope is internal to xform.nn."""
from xform.core.array import Array  # noqa: F401
from xform.nn._scope import DenyList, broadcast  # noqa: F401
from xform.nn.core import frozen_dict, meta, spmd  # noqa: F401
from xform.nn.core.frozen_dict import (  # noqa: F401
    FrozenDict, copy, freeze, pop, pretty_repr, unfreeze)
from xform.nn.core.meta import AxisMetadata, map_axis_meta, unbox  # noqa: F401

__all__ = ["Array", "AxisMetadata", "DenyList", "FrozenDict", "broadcast", "copy",
           "freeze", "frozen_dict", "map_axis_meta", "meta", "pop", "pretty_repr", "spmd",
           "unbox", "unfreeze"]
