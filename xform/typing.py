"""``xform.typing``: JAX's ``jax.typing`` annotations ``ArrayLike`` (anything safely
convertible to an array) and ``DTypeLike`` (anything convertible to a dtype).

>>> import numpy as np, xform.numpy as jnp
>>> isinstance(jnp.ones(2), ArrayLike), isinstance(np.float32(1), ArrayLike)
(True, True)
>>> isinstance('x', ArrayLike)
False
"""
from typing import Any, Protocol, Union

import numpy as np

from xform.core.array import Array
from xform.core.trace import Tracer

__all__ = ["ArrayLike", "DTypeLike"]


class SupportsDType(Protocol):
    """Anything with a ``dtype`` (e.g. ``jnp.float32``)."""

    @property
    def dtype(self, /) -> np.dtype: ...


# (Tracer is listed for type checkers: ``isinstance`` holds for it at run time.)
ArrayLike = Union[Array, Tracer, np.ndarray, np.bool_, np.number, bool, int, float, complex]

DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]
