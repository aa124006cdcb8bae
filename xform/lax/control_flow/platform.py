"""``platform_dependent``: code chosen by the platform the program is lowered for.

As in JAX, the choice is a ``platform_index`` primitive (the branch index for the
lowering platform) feeding ``switch``: lowered for one platform the index is a
constant (XLA folds the ``case``); lowered for several (``export(platforms=...)``) it
is a ``case`` on ``@main``'s platform index argument, so one module holds every
branch and picks at run time.
"""
import numpy as np

from xform.core.array import Array
from xform.core.avals import ShapedArray
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import standard_primitive
from xform.lax.control_flow.conditionals import switch

hlo, ir = mlir.hlo, mlir.ir

_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def platform_dependent(*args, default=None, **per_platform):
    """``per_platform[p](*args)`` for the platform ``p`` the computation is lowered for
    (``cpu``, ``cuda``, ``rocm``, ``tpu``; ``gpu`` means cuda or rocm), else
    ``default(*args)``. Under ``export(platforms=(...))`` every branch is kept.

    >>> from xform import lax
    >>> lax.platform_dependent(2.0, cpu=lambda x: x + 1, default=lambda x: x)
    3.0
    """
    groups = []   # (platforms, branch); identical branches share an index, as in JAX
    for name, fun in per_platform.items():
        if name not in _PLATFORMS + ("gpu",):
            raise ValueError(f"Unsupported platform: {name}")
        if not callable(fun):
            raise TypeError(f"lax.platform_dependent: the '{name}' branch must be a "
                            "callable.")
        names = ("cuda", "rocm") if name == "gpu" else (name,)
        names = tuple(n for n in names if name != "gpu" or n not in per_platform)
        for ps, b in groups:
            if b is fun:
                ps.extend(names)
                break
        else:
            groups.append((list(names), fun))
    if default is not None:
        if not callable(default):
            raise TypeError("lax.platform_dependent: the 'default' branch must be a "
                            "callable.")
        groups.append((None, default))
    branches = tuple(b for _, b in groups)
    index = platform_index_p.bind(
        platforms=tuple(None if ps is None else tuple(ps) for ps, _ in groups))
    if isinstance(index, Array):  # eager: run the one branch
        return branches[int(index)](*args)
    return switch(index, branches, *args)


def _index_for(platforms, platform):
    for i, ps in enumerate(platforms):
        if ps is not None and platform in ps:
            return i
    for i, ps in enumerate(platforms):
        if ps is None:
            return i
    raise NotImplementedError(f"platform_dependent: no branch for platform {platform!r} "
                              "and no default")


def _platform_index_lowering(ctx, *, platforms):
    mctx = ctx.module_ctx
    if mctx.platform_index is None:
        return mlir.ir_constant(np.int32(_index_for(platforms, mctx.platform)))
    i32 = mlir.aval_to_ir_type(ShapedArray((), np.int32))
    case = hlo.CaseOp([i32], mctx.platform_index, len(mctx.platforms))
    for region, p in zip(case.regions, mctx.platforms):
        with ir.InsertionPoint(region.blocks.append()):
            hlo.return_([mlir.ir_constant(np.int32(_index_for(platforms, p)))])
    return case.result


platform_index_p = standard_primitive("platform_index",
                                      lambda **_: ShapedArray((), np.int32))
ad.defnondiff(platform_index_p)
batching.primitive_batchers[platform_index_p] = None  # no operands: never batched
mlir.register_lowering(platform_index_p, _platform_index_lowering)
