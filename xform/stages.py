"""``jax.stages``: the types of jit's ahead-of-time stages (``jit(f).trace(...)``,
``.lower()``, ``.compile()``)."""
from xform.transforms.jit import JitWrapped as Wrapped  # noqa: F401
from xform.transforms.stages import ArgInfo, Compiled, Lowered, Traced  # noqa: F401

CompilerOptions = dict[str, str | bool]


__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]
