"""Frozen dataclasses that are pytrees (``flax.struct``): fields are children unless
declared ``field(pytree_node=False)``, which puts them in the treedef (static under jit);
the children are also the class's state dict for :mod:`xform.nn.serialization`."""
import dataclasses
import functools

from xform.core import tree_util as tu
from xform.nn import serialization

__all__ = ["dataclass", "field", "PyTreeNode"]


def field(pytree_node=True, *, metadata=None, **kwargs):
    """A dataclass field; ``pytree_node=False`` makes it static (part of the treedef).

    Example:
        >>> from xform.training import struct
        >>> @struct.dataclass
        ... class Model:
        ...     w: float
        ...     name: str = struct.field(pytree_node=False, default='m')
        >>> import xform
        >>> xform.tree_util.tree_leaves(Model(1.0))
        [1.0]
    """
    return dataclasses.field(metadata={**(metadata or {}), "pytree_node": pytree_node},
                             **kwargs)


def dataclass(clz=None, **kwargs):
    """Make ``clz`` a frozen dataclass registered as a pytree, with a ``replace`` method.

    Example:
        >>> from xform.training import struct
        >>> @struct.dataclass
        ... class Point:
        ...     x: float
        ...     y: float
        >>> Point(1., 2.).replace(y=5.)
        Point(x=1.0, y=5.0)
    """
    if clz is None:
        return functools.partial(dataclass, **kwargs)
    if "_xform_struct" in clz.__dict__:
        return clz
    kwargs.setdefault("frozen", True)
    data_clz = dataclasses.dataclass(**kwargs)(clz)
    fields = [f for f in dataclasses.fields(data_clz) if f.init]
    data = [f.name for f in fields if f.metadata.get("pytree_node", True)]
    meta = [f.name for f in fields if not f.metadata.get("pytree_node", True)]

    def replace(self, **updates):
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **updates)

    data_clz.replace = replace
    tu.register_dataclass(data_clz, data, meta)

    def to_state_dict(x):
        return {name: serialization.to_state_dict(getattr(x, name)) for name in data}

    def from_state_dict(x, state):
        state = dict(state)
        updates = {}
        for name in data:
            if name not in state:
                raise ValueError(f"Missing field {name} in state dict while restoring an "
                                 f"instance of {clz.__name__}, at path "
                                 f"{serialization.current_path()}")
            updates[name] = serialization.from_state_dict(getattr(x, name),
                                                          state.pop(name), name=name)
        if state:
            raise ValueError(f'Unknown field(s) "{",".join(state)}" in state dict while '
                             f"restoring an instance of {clz.__name__} at path "
                             f"{serialization.current_path()}")
        return x.replace(**updates)

    serialization.register_serialization_state(data_clz, to_state_dict, from_state_dict)
    data_clz._xform_struct = True
    return data_clz


class PyTreeNode:
    """Base class: every subclass becomes a :func:`dataclass` (frozen, a pytree).

    Example:
        >>> from xform.training import struct
        >>> class Stats(struct.PyTreeNode):
        ...     count: int
        >>> Stats(3).replace(count=4).count
        4
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__()
        dataclass(cls, **kwargs)

    def __init__(self, *args, **kwargs):   # each subclass gets its dataclass __init__
        raise NotImplementedError(f"{type(self).__name__}: construct a PyTreeNode "
                                  f"subclass, not PyTreeNode itself")

    def replace(self, **overrides):   # replaced per subclass; here for type checkers
        return dataclasses.replace(self, **overrides)
