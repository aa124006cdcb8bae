"""Lowering helpers for XLA FFI custom calls: jaxlib's LAPACK kernels on CPU, cuSOLVER's
on GPU, and the user's targets (``xform.ffi``).

A typed-FFI custom call (``api_version = 4``) takes its attributes as a dictionary
``backend_config``. LAPACK and cuSOLVER expect column-major matrices, which XLA
provides when the call declares column-major operand and result layouts.
"""
import numpy as np

from xform import backend
from xform.core import dtypes
from xform.interpreters import mlir

hlo, ir = mlir.hlo, mlir.ir


def _order(rank, column_major):
    """Minor-to-major dimension order: row-major, or column-major in the last two."""
    if column_major and rank >= 2:
        return (rank - 2, rank - 1) + tuple(range(rank - 3, -1, -1))
    return tuple(range(rank - 1, -1, -1))


def _layout(order):
    return ir.DenseIntElementsAttr.get(np.asarray(order, np.int64).reshape(-1),
                                       type=ir.IndexType.get())


def row_major_layouts(ranks):
    """Row-major layouts for values of ``ranks``: a custom call that reads or writes
    host memory as NumPy does must pin them (XLA on GPU may pick others otherwise)."""
    return ir.ArrayAttr.get([_layout(_order(r, False)) for r in ranks])


def u8(value):
    """An unsigned 8-bit attribute (LAPACK's character flags: ``ord("L")``...)."""
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), int(value))


def i32(value):
    """A signed 32-bit attribute (LAPACK's integer arguments: gehrd's ``low``/``high``)."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(value))


def flag(value):
    """A boolean attribute (cuSOLVER kernels' ``lower``, ``compute_uv``...)."""
    return ir.BoolAttr.get(bool(value))


_PYTHON_SCALARS = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}


def ir_attribute(value):
    """``value`` as an MLIR attribute, typed as JAX's ``mlir.ir_attribute`` types it (an
    FFI handler decodes attributes by type): Python bool/int/float/complex as
    i1/i64/f64/complex128 (never narrowed: x64 off or not), NumPy scalars and arrays by
    their dtype (arrays dense), a dtype as a type, str/bytes as strings, dicts and
    sequences recursively; attributes and types pass through."""
    if isinstance(value, (ir.Attribute, ir.Type)):
        return value
    if not isinstance(value, np.generic):  # (np.float64 is a float: by its dtype)
        python_type = next((t for t in type(value).__mro__ if t in _PYTHON_SCALARS), None)
        if python_type is not None:
            value = np.array(value, _PYTHON_SCALARS[python_type])
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype == dtypes.float0:
            value = np.zeros(value.shape, np.bool_)
        if 0 in value.strides and value.size > 0:
            raise ValueError("NumPy arrays with zero strides are not supported as MLIR "
                             "attributes")
        element = mlir.dtype_to_ir_type(value.dtype)
        if value.ndim:
            return ir.DenseElementsAttr.get(np.ascontiguousarray(value), type=element,
                                            shape=value.shape)
        if isinstance(element, ir.IntegerType):
            return ir.IntegerAttr.get(element, int(value))
        if isinstance(element, ir.FloatType):
            return ir.FloatAttr.get(element, float(value))
        raise TypeError(f"Unsupported scalar attribute type: {type(value)}")
    if isinstance(value, np.dtype):
        return ir.TypeAttr.get(mlir.dtype_to_ir_type(value))
    if isinstance(value, (str, bytes)):
        return ir.StringAttr.get(value)
    if isinstance(value, dict):
        return ir.DictAttr.get({k: ir_attribute(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return ir.ArrayAttr.get([ir_attribute(v) for v in value])
    if hasattr(value, "__jax_array__"):
        return ir_attribute(value.__jax_array__())
    raise TypeError(f"No attribute handler defined for type: {type(value)}")


def _layouts(orders):
    return None if orders is None else ir.ArrayAttr.get([_layout(o) for o in orders])


def emit_custom_call(target, operands, result_types, *, backend_config=None, api_version=4,
                     has_side_effect=False, operand_layouts=None, result_layouts=None,
                     operand_output_aliases=None, called_computations=(),
                     extra_attributes=None):
    """``stablehlo.custom_call @target`` as JAX's ``mlir.custom_call`` builds it; returns
    the op. Layouts are minor-to-major sequences (None: XLA picks); aliases map operand
    index -> result index. ``backend_config``: a dict of attributes (the typed FFI,
    ``api_version`` 4) or an opaque string (older APIs); ``extra_attributes``: more
    attributes of the op (name -> attribute).

    NB: JAX puts a dict in an ``mhlo.backend_config`` attribute with ``api_version`` 1;
    xform writes it as the op's own ``backend_config`` with ``api_version = 4``, which
    XLA reads the same (the typed FFI)."""
    config = (ir.DictAttr.get(dict(backend_config)) if isinstance(backend_config, dict)
              else ir.StringAttr.get(backend_config or ""))
    single = len(result_types) == 1
    aliases = [hlo.OutputOperandAlias.get(output_tuple_indices=[] if single else [o],
                                          operand_index=i, operand_tuple_indices=[])
               for i, o in (operand_output_aliases or {}).items()]
    op = hlo.CustomCallOp(
        list(result_types), list(operands), target, has_side_effect=has_side_effect,
        backend_config=config,
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), api_version),
        called_computations=ir.ArrayAttr.get(
            [ir.FlatSymbolRefAttr.get(c) for c in called_computations]),
        output_operand_aliases=ir.ArrayAttr.get(aliases),
        operand_layouts=_layouts(operand_layouts), result_layouts=_layouts(result_layouts))
    for name, attribute in (extra_attributes or {}).items():
        op.attributes[name] = attribute
    return op


def custom_call(target, operands, avals_in, avals_out, *, attributes=None, aliases=(),
                column_major=True):
    """Emit a LAPACK/cuSOLVER ``stablehlo.custom_call @target``; return its results as a
    list.

    Operands and results of the largest rank among the operands are passed
    column-major (LAPACK's convention) unless ``column_major=False``; the rest
    row-major. ``aliases`` are (result index, operand index) pairs whose buffers may
    be shared.
    """
    matrix_rank = max(len(a.shape) for a in avals_in)

    def layouts(avals):
        return [_order(len(a.shape), column_major and len(a.shape) == matrix_rank)
                for a in avals]
    op = emit_custom_call(
        target, operands, [mlir.aval_to_ir_type(a) for a in avals_out],
        backend_config=attributes or {}, operand_layouts=layouts(avals_in),
        result_layouts=layouts(avals_out), operand_output_aliases={o: r for r, o in aliases})
    return list(op.results)


GPU_PLATFORMS = ("cuda", "rocm")


def solver_call(ctx, lapack, gpu, operands, avals_in, avals_out, *, aliases=(),
                column_major=True):
    """``custom_call`` of the kernel computing ``ctx.primitive`` where the program runs,
    as JAX picks it: ``lapack = (fn, attributes)`` names jaxlib's LAPACK kernel on CPU
    (``("getrf_ffi", {})``; its dtype is the first operand's), ``gpu = (fn, attributes)``
    cuSOLVER's on CUDA (hipSOLVER's on ROCm), or jaxlib's host/MAGMA kernel where ``fn``
    is ``hybrid_...``. Elsewhere NotImplementedError names the primitive."""
    platform = ctx.module_ctx.platform
    if platform == "cpu":
        fn, attributes = lapack
        target = backend.lapack_target(fn, avals_in[0].dtype)
    elif platform in GPU_PLATFORMS:
        fn, attributes = gpu
        prefix = "cu" if platform == "cuda" else "hip"
        target = backend.gpu_solver_target(
            prefix + (fn if fn.startswith("hybrid_") else "solver_" + fn))
    else:
        raise NotImplementedError(
            f"{ctx.primitive.name} is not implemented on {platform}: xform lowers it to "
            "LAPACK (CPU) or cuSOLVER (GPU) kernels")
    return custom_call(target, operands, avals_in, avals_out, attributes=attributes,
                       aliases=aliases, column_major=column_major)
