"""Lowering helpers for XLA FFI custom calls (jaxlib's LAPACK kernels on CPU).

A typed-FFI custom call (``api_version = 4``) takes its attributes as a dictionary
``backend_config``. LAPACK expects column-major matrices, which XLA
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


def u8(value):
    """An unsigned 8-bit attribute (LAPACK's character flags: ``ord("L")``...)."""
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), int(value))


def custom_call(target, operands, avals_in, avals_out, *, attributes=None, aliases=()):
    """Emit ``stablehlo.custom_call @target``; return its results as a list.

    Operands and results of the largest rank among the operands are passed
    column-major (LAPACK's convention); the rest row-major. ``aliases`` are
    (result index, operand index) pairs whose buffers may be shared.
    """
    matrix_rank = max(len(a.shape) for a in avals_in)

    def layouts(avals):
        return ir.ArrayAttr.get([_layout(len(a.shape), len(a.shape) == matrix_rank)
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


def lapack_call(fn_base, dtype, operands, avals_in, avals_out, **kwargs):
    """``custom_call`` of jaxlib's LAPACK kernel ``fn_base`` (e.g. "getrf_ffi")."""
    return custom_call(backend.lapack_target(fn_base, dtype), operands, avals_in,
                       avals_out, **kwargs)
