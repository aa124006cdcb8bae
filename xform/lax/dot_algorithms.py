"""Dot algorithms (``lax.DotAlgorithm``, ``lax.DotAlgorithmPreset``): a matmul's storage,
compute and accumulation types, given as ``precision=`` instead of a ``Precision``.

A dot with an algorithm converts its operands to the algorithm's input types, emits
StableHLO's ``algorithm`` attribute (the backend picks the kernel: bf16 passes, TF32,
...), accumulates in its accumulation type and converts the result to the output dtype,
as JAX's lowering does. XLA:CPU ignores the attribute, so on CPU only the presets JAX
lets through are accepted (other presets and any explicit ``DotAlgorithm`` raise JAX's
ValueError); the conversions still apply (``F16_F16_F16`` computes in float16)."""
import enum
from typing import NamedTuple

import ml_dtypes
import numpy as np

from xform.core import dtypes
from xform.interpreters import mlir

hlo, ir = mlir.hlo, mlir.ir


class DotAlgorithm(NamedTuple):
    """An explicit dot algorithm: the operands' precision types, the accumulation type,
    and the number of components/operations for algorithms that split an operand to
    emulate a higher precision (``num_primitive_operations=3`` for bf16 x3)."""
    lhs_precision_type: object
    rhs_precision_type: object
    accumulation_type: object
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False

    def compute_types(self, lhs_dtype, rhs_dtype, out_dtype):
        return (np.dtype(self.lhs_precision_type), np.dtype(self.rhs_precision_type),
                np.dtype(self.accumulation_type))

    def hlo_attr(self, lhs_dtype, rhs_dtype):
        t = lambda d: mlir.dtype_to_ir_type(np.dtype(d))  # noqa: E731
        return hlo.DotAlgorithm.get(
            t(self.lhs_precision_type), t(self.rhs_precision_type), t(self.accumulation_type),
            self.lhs_component_count, self.rhs_component_count,
            self.num_primitive_operations, self.allow_imprecise_accumulation)


_f8 = lambda *names: tuple(np.dtype(getattr(ml_dtypes, n)) for n in names)  # noqa: E731
_F8_INPUTS = frozenset(_f8("float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
                           "float8_e5m2", "float8_e5m2fnuz", "float8_e3m4", "float8_e4m3",
                           "float8_e8m0fnu"))
_F8_OUTPUTS = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(dtypes.bfloat16)) + _f8(
    "float8_e4m3fn", "float8_e5m2", "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e4m3b11fnuz")


class DotAlgorithmPreset(enum.Enum):
    """Named algorithms ``LHS_RHS_ACCUM`` (``ANY_F8``: any float8 input; ``_X3``/``_X6``/
    ``_X9``: that many bf16 operations emulating float32; ``FAST_ACCUM``: imprecise
    accumulation allowed). ``DEFAULT`` lets the backend choose from the dtypes."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self):
        return f"{type(self).__name__}.{self.name}"

    def __str__(self):
        return self.name

    @property
    def supported_lhs_types(self):
        """Input dtypes computed as they are; any other is converted to the first."""
        name = self.name
        if name == "DEFAULT" or name.startswith("ANY_F8"):
            return None
        if name.startswith("F16_"):
            return (np.dtype(np.float16),)
        if name in ("BF16_BF16_BF16", "BF16_BF16_F32"):
            return (np.dtype(dtypes.bfloat16), np.dtype(np.float32))
        if name == "F64_F64_F64":
            return (np.dtype(np.float64),)
        return (np.dtype(np.float32),)

    supported_rhs_types = supported_lhs_types

    @property
    def accumulation_type(self):
        name = self.name
        if name in ("DEFAULT", "ANY_F8_ANY_F8_ANY", "ANY_F8_ANY_F8_ANY_FAST_ACCUM"):
            return None
        return np.dtype({"F16_F16_F16": np.float16, "BF16_BF16_BF16": dtypes.bfloat16,
                         "F64_F64_F64": np.float64}.get(name, np.float32))

    def supported_output_types(self, lhs_dtype, rhs_dtype):
        name = self.name
        if name.startswith("ANY_F8_ANY_F8_F32"):
            return _F8_OUTPUTS
        if name in ("F16_F16_F32", "BF16_BF16_F32"):
            narrow = np.dtype(np.float16 if name.startswith("F16") else dtypes.bfloat16)
            both = dtypes.promote_types(lhs_dtype, rhs_dtype) == narrow
            return (np.dtype(np.float32), narrow) if both else (np.dtype(np.float32),)
        acc = self.accumulation_type
        return None if acc is None else (acc,)

    def compute_types(self, lhs_dtype, rhs_dtype, out_dtype):
        """(lhs, rhs, accumulation) dtypes the dot runs in (JAX's rule: a dtype the
        preset supports is kept, any other becomes the preset's first)."""
        def pick(d, allowed):
            return d if allowed is None or np.dtype(d) in allowed else allowed[0]
        lhs = pick(lhs_dtype, self.supported_lhs_types)
        rhs = pick(rhs_dtype, self.supported_rhs_types)
        return lhs, rhs, pick(out_dtype, self.supported_output_types(lhs, rhs))

    def hlo_attr(self, lhs_dtype, rhs_dtype):
        name = self.name
        t = lambda d: mlir.dtype_to_ir_type(np.dtype(d))  # noqa: E731
        if name.startswith("ANY_F8"):
            if np.dtype(lhs_dtype) not in _F8_INPUTS or np.dtype(rhs_dtype) not in _F8_INPUTS:
                raise ValueError(f"The dot algorithm '{self}' requires both inputs to have "
                                 f"float8 dtypes. Got {lhs_dtype} and {rhs_dtype} instead.")
            return hlo.DotAlgorithm.get(t(lhs_dtype), t(rhs_dtype), ir.F32Type.get(), 1, 1,
                                        1, name.endswith("FAST_ACCUM"))
        lhs, _, acc = name.split("_")[:3]
        ops = int(name.split("_X")[1]) if "_X" in name else 1
        ty = {"F16": ir.F16Type.get, "BF16": ir.BF16Type.get, "F32": ir.F32Type.get,
              "F64": ir.F64Type.get, "TF32": ir.FloatTF32Type.get}
        return hlo.DotAlgorithm.get(ty[lhs](), ty[lhs](), ty[acc](), 1, 1, ops, False)


# What XLA:CPU runs (it ignores the attribute): JAX refuses the other presets there.
CPU_PRESETS = frozenset(DotAlgorithmPreset[n] for n in (
    "DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32",
    "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"))


def is_algorithm(precision):
    return isinstance(precision, (DotAlgorithm, DotAlgorithmPreset))


def lower_dot(ctx, x, y, precision, emit):
    """Lower a dot whose ``precision`` is an algorithm: ``emit(result type, x, y,
    algorithm attribute or None)`` on the operands converted to its compute types,
    the result converted to the output dtype."""
    if ctx.module_ctx.platform == "cpu" and precision not in CPU_PRESETS:
        raise ValueError(f"The precision '{precision}' is not supported by dot_general "
                         "on CPU")
    (xa, ya), (out,) = ctx.avals_in[:2], ctx.avals_out
    lhs_t, rhs_t, acc_t = precision.compute_types(xa.dtype, ya.dtype, out.dtype)
    x = _convert(x, xa, lhs_t)
    y = _convert(y, ya, rhs_t)
    acc = out if acc_t is None else out.update(dtype=np.dtype(acc_t))
    attr = None if precision is DotAlgorithmPreset.DEFAULT else precision.hlo_attr(lhs_t,
                                                                                    rhs_t)
    result = emit(mlir.aval_to_ir_type(acc), x, y, attr)
    if acc.dtype != out.dtype:
        result = hlo.convert(mlir.aval_to_ir_type(out), result)
    return result


def _convert(v, aval, dtype):
    if dtype is None or np.dtype(dtype) == aval.dtype:
        return v
    return hlo.convert(mlir.aval_to_ir_type(aval.update(dtype=np.dtype(dtype))), v)
