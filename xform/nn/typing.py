"""``flax.typing``: the type aliases of Flax's signatures (for annotations only), the
lift markers ``In``/``Out``, and the small helpers linen code imports from here.
(Flax's NNX-only helpers, ``HashableMapping``, ``PytreeDeque`` and
``BaseConfigContext``, are left out: xform has no NNX.)"""
import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Optional, Protocol, TypeGuard, TypeVar, Union

import numpy as np

from xform.core.array import Array as _Array
from xform.core.tree_util import tree_leaves
from xform.lax import Precision
from xform.nn._transforms import In, Out
from xform.nn.core.frozen_dict import FrozenDict

__all__ = [
    "Array", "ArrayPytree", "Axes", "Axis", "AxisName", "Collection",
    "ConvGeneralDilatedT", "DotGeneralT", "Dtype", "EinsumT", "FrozenVariableDict", "In",
    "InOutAxis", "InOutScanAxis", "Initializer", "Key", "LaxPadding", "Leaf",
    "LogicalNames", "LogicalPartitionSpec", "LogicalPartitionSpecPytree", "LogicalRules",
    "MISSING", "Missing", "MutableCollection", "MutableVariableDict", "Out",
    "PRNGFoldable", "PRNGKey", "PaddingLike", "PartitionSpecPytree", "Path", "PathParts",
    "PrecisionLike", "PromoteDtypeFn", "RNGSequences", "ScanAxis", "Shape", "ShapeDtype",
    "Sharding", "SizeBytes", "VariableDict", "has_shape_dtype", "is_key_like"]

Array = Union[_Array, Any]
PRNGKey = _Array
RNGSequences = dict[str, PRNGKey]
Dtype = Union[str, type, np.dtype, Any]
Shape = Sequence[int]


class Key(Hashable, Protocol):
    """A pytree path key: hashable and ordered."""
    def __lt__(self, value, /) -> bool: ...


def is_key_like(x: Any) -> TypeGuard[Key]:
    return hasattr(x, "__hash__") and hasattr(x, "__lt__")


Path = str
PathParts = tuple[Key, ...]
Leaf = Any
PrecisionLike = Union[None, str, Precision, tuple[str, str], tuple[Precision, Precision]]
DotGeneralT = Callable[..., Array]
ConvGeneralDilatedT = Callable[..., Array]
EinsumT = Callable[..., Array]
PaddingLike = Union[str, int, Sequence[Union[int, tuple[int, int]]]]
LaxPadding = Union[str, Sequence[tuple[int, int]]]
Initializer = Callable[..., Any]
Collection = Mapping[str, Any]
MutableCollection = dict[str, Any]
VariableDict = Mapping[str, Collection]
FrozenVariableDict = FrozenDict
MutableVariableDict = dict[str, MutableCollection]
PRNGFoldable = Union[int, str]
Axis = Optional[int]
InOutAxis = Union[Axis, In, Out]
ScanAxis = int
InOutScanAxis = Union[ScanAxis, In, Out]
Axes = Union[int, Sequence[int]]
LogicalNames = tuple[Union[str, None], ...]
AxisName = Union[str, tuple[str, ...], None]
LogicalRules = Sequence[tuple[str, AxisName]]
ArrayPytree = Any
LogicalPartitionSpec = Any
LogicalPartitionSpecPytree = Any
PartitionSpecPytree = Any
Sharding = tuple[AxisName, ...]
TupleArg = TypeVar("TupleArg", bound=tuple)


class Missing:
    """The type of ``MISSING``: "no value given" where ``None`` is a value."""


MISSING = Missing()


class ShapeDtype(Protocol):
    shape: Shape
    dtype: Dtype


def has_shape_dtype(x: Any) -> TypeGuard[ShapeDtype]:
    return hasattr(x, "shape") and hasattr(x, "dtype")


class PromoteDtypeFn(Protocol):
    def __call__(self, args: TupleArg, /, *, dtype: Any = None,
                 inexact: bool = True) -> TupleArg: ...


def _bytes_repr(n):
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if n > scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,} B"


@dataclasses.dataclass(frozen=True, slots=True)
class SizeBytes:
    """Element count and bytes of arrays (``SizeBytes.from_any(params)``), printed as
    ``1,024 (4.1 KB)``."""
    size: int
    bytes: int

    @classmethod
    def from_array(cls, x):
        size = int(np.prod(x.shape))
        return cls(size, size * np.dtype(x.dtype).itemsize)

    @classmethod
    def from_any(cls, x):
        total = cls(0, 0)
        for leaf in tree_leaves(x):
            if has_shape_dtype(leaf):
                total += cls.from_array(leaf)
        return total

    def __add__(self, other):
        return type(self)(self.size + other.size, self.bytes + other.bytes)

    def __bool__(self):
        return bool(self.size)

    def __repr__(self):
        return f"{self.size:,} ({_bytes_repr(self.bytes)})"
