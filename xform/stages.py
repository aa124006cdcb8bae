"""``jax.stages``: the types of jit's ahead-of-time stages (``jit(f).trace(...)``,
``.lower()``, ``.compile()``)."""
from xform.transforms.jit import JitWrapped as Wrapped  # noqa: F401
from xform.transforms.stages import Compiled, Lowered, Traced  # noqa: F401

import dataclasses

CompilerOptions = dict[str, str | bool]


@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """One argument of a staged computation: its abstract value and whether it is
    donated. NB xform's stages do not build ``args_info`` trees yet; the type is here for
    code that names it."""
    _aval: object
    donated: bool

    @property
    def shape(self):
        if not hasattr(self._aval, "shape"):
            raise TypeError(f"No shape attribute with aval of type {type(self._aval)}")
        return self._aval.shape

    @property
    def dtype(self):
        if not hasattr(self._aval, "dtype"):
            raise TypeError(f"No dtype attribute with aval of type {type(self._aval)}")
        return self._aval.dtype


__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]
