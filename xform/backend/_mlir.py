"""jaxlib's MLIR bindings: the context xform emits into, and StableHLO's portable
artifacts (jax.export's serialized modules)."""
from jaxlib import _jax
from jaxlib.mlir import ir  # noqa: F401  (re-exported for xform.interpreters.mlir)
from jaxlib.mlir.dialects import chlo  # noqa: F401  (special functions; XLA legalizes)
from jaxlib.mlir.dialects import func as func_dialect  # noqa: F401
from jaxlib.mlir.dialects import stablehlo as hlo  # noqa: F401

from ._client import client


class _IrContext(ir.Context):
    def __init__(self):
        # Skip ir.Context.__init__, which loads every dialect linked into jaxlib.
        super(ir.Context, self).__init__()


def make_ir_context():
    """An MLIR context with the dialects xform emits (func, chlo, stablehlo, mhlo, sdy).
    NB: not JAX's ``make_ir_context``, which imports mhlo's Python op classes (~45 ms
    of a warm process's first jitted call when the compilation cache serves it)."""
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext, _mlirHlo, _sdy
    ctx = _IrContext()
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    ctx.enable_multithreading(False)
    _sdy.register_dialect(ctx)
    _mlirHlo.register_mhlo_dialect(ctx)
    chlo.register_dialect(ctx)
    hlo.register_dialect(ctx)
    return ctx


def serialize_portable_artifact(module) -> bytes:
    """``module`` (an ir.Module) as a StableHLO portable artifact of the version at
    least 4 weeks old (JAX's export target: consumers a month older can load it)."""
    target = hlo.get_version_from_compatibility_requirement(
        hlo.StablehloCompatibilityRequirement.WEEK_4)
    return _jax.mlir.serialize_portable_artifact(module, target,
                                                 client().serialize_with_sdy)


def deserialize_portable_artifact(data: bytes, context):
    """The ir.Module of a portable artifact, in MLIR ``context``."""
    return _jax.mlir.deserialize_portable_artifact(bytes(data), context)


def refine_polymorphic_shapes(module_bytecode: bytes) -> bytes:
    """Static shapes from a module whose ``@main`` has static argument types: shape
    assertions fail here with their error messages (XLA cannot compile ``?`` dims)."""
    return _jax.mlir.refine_polymorphic_shapes(module_bytecode, True, True)
