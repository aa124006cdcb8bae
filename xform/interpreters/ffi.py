"""Lowering helpers for XLA FFI custom calls (jaxlib's LAPACK kernels on CPU, cuSOLVER's
on GPU).

A typed-FFI custom call (``api_version = 4``) takes its attributes as a dictionary
``backend_config``. LAPACK and cuSOLVER expect column-major matrices, which XLA
provides when the call declares column-major operand and result layouts.
"""
import numpy as np

from xform import backend
from xform.interpreters import mlir

hlo, ir = mlir.hlo, mlir.ir


def _layout(rank, column_major):
    """Minor-to-major dimension order: row-major, or column-major in the last two."""
    if column_major and rank >= 2:
        order = (rank - 2, rank - 1) + tuple(range(rank - 3, -1, -1))
    else:
        order = tuple(range(rank - 1, -1, -1))
    return ir.DenseIntElementsAttr.get(np.asarray(order, np.int64), type=ir.IndexType.get())


def row_major_layouts(ranks):
    """Row-major layouts for values of ``ranks``: a custom call that reads or writes
    host memory as NumPy does must pin them (XLA on GPU may pick others otherwise)."""
    return ir.ArrayAttr.get([_layout(r, False) for r in ranks])


def u8(value):
    """An unsigned 8-bit attribute (LAPACK's character flags: ``ord("L")``...)."""
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), int(value))


def i32(value):
    """A signed 32-bit attribute (LAPACK's integer arguments: gehrd's ``low``/``high``)."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(value))


def flag(value):
    """A boolean attribute (cuSOLVER kernels' ``lower``, ``compute_uv``...)."""
    return ir.BoolAttr.get(bool(value))


def custom_call(target, operands, avals_in, avals_out, *, attributes=None, aliases=(),
                column_major=True):
    """Emit ``stablehlo.custom_call @target``; return its results as a list.

    Operands and results of the largest rank among the operands are passed
    column-major (LAPACK's convention) unless ``column_major=False``; the rest
    row-major. ``aliases`` are (result index, operand index) pairs whose buffers may
    be shared.
    """
    matrix_rank = max(len(a.shape) for a in avals_in)

    def layouts(avals):
        return ir.ArrayAttr.get([
            _layout(len(a.shape), column_major and len(a.shape) == matrix_rank)
            for a in avals])
    op = hlo.CustomCallOp(
        [mlir.aval_to_ir_type(a) for a in avals_out], list(operands), target,
        has_side_effect=False,
        backend_config=ir.DictAttr.get(attributes or {}),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        called_computations=ir.ArrayAttr.get([]),
        operand_layouts=layouts(avals_in), result_layouts=layouts(avals_out),
        output_operand_aliases=ir.ArrayAttr.get([
            hlo.OutputOperandAlias.get(output_tuple_indices=[r] if len(avals_out) > 1
                                       else [], operand_index=o, operand_tuple_indices=[])
            for r, o in aliases]))
    return list(op.results)


GPU_PLATFORMS = ("cuda", "rocm")


def solver_call(ctx, lapack, gpu, operands, avals_in, avals_out, *, aliases=(),
                column_major=True):
    """``custom_call`` of the kernel computing ``ctx.primitive`` where the program runs,
    as JAX picks it: ``lapack = (fn, attributes)`` names jaxlib's LAPACK kernel on CPU
    (``("getrf_ffi", {})``; its dtype is the first operand's), ``gpu = (fn, attributes)``
    cuSOLVER's on CUDA (hipSOLVER's on ROCm). Elsewhere NotImplementedError names the
    primitive."""
    platform = ctx.module_ctx.platform
    if platform == "cpu":
        fn, attributes = lapack
        target = backend.lapack_target(fn, avals_in[0].dtype)
    elif platform in GPU_PLATFORMS:
        fn, attributes = gpu
        target = backend.gpu_solver_target(("cu" if platform == "cuda" else "hip")
                                           + "solver_" + fn)
    else:
        raise NotImplementedError(
            f"{ctx.primitive.name} is not implemented on {platform}: xform lowers it to "
            "LAPACK (CPU) or cuSOLVER (GPU) kernels")
    return custom_call(target, operands, avals_in, avals_out, attributes=attributes,
                       aliases=aliases, column_major=column_major)
