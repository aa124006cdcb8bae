"""dot_general: contraction with batch dimensions (matmul, einsum-like products);
the ``Precision`` enum shared with convolutions."""
import enum
from collections.abc import Sequence
from typing import Union


from xform.core import dtypes, sharding_types
from xform.core.config import config
from xform.core.sharding import PartitionSpec as P
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import check_dtype, numeric_or_bool, standard_primitive
from xform.lax import shapes
from xform.lax.dot_algorithms import DotAlgorithm, DotAlgorithmPreset, is_algorithm, lower_dot
from xform.lax.elementwise import convert_element_type

hlo, ir = mlir.hlo, mlir.ir


class Precision(enum.Enum):
    """Precision of matmuls and convolutions on accelerators (CPU always computes at
    full precision). Strings accepted: 'default'/'fastest'/'bfloat16',
    'high'/'tensorfloat32'/'bfloat16_3x', 'highest'/'float32'."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        return _PRECISION_NAMES.get(value)

    def __repr__(self):
        return f"Precision.{self.name}"

    __str__ = __repr__


_PRECISION_NAMES = {
    "default": Precision.DEFAULT, "fastest": Precision.DEFAULT, "bfloat16": Precision.DEFAULT,
    "high": Precision.HIGH, "tensorfloat32": Precision.HIGH, "bfloat16_3x": Precision.HIGH,
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST}


# Type aliases of the public signatures, as JAX's.
PrecisionLike = Union[None, str, Precision, tuple[str, str], tuple[Precision, Precision],
                      DotAlgorithm, DotAlgorithmPreset]
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]


def canonicalize_precision(precision):
    """``None``, a pair of ``Precision`` (lhs, rhs), or a dot algorithm, from the API's
    forms; ``None`` means ``jax_default_matmul_precision`` (read when the op is bound,
    as JAX does; its value is a precision name or a preset's)."""
    if precision is None:
        default = config.jax_default_matmul_precision
        return None if default is None else canonicalize_precision(default)
    if isinstance(precision, str):
        if precision in _PRECISION_NAMES:
            return (Precision(precision),) * 2
        if precision in DotAlgorithmPreset.__members__:
            return DotAlgorithmPreset[precision]
    elif isinstance(precision, Precision):
        return (precision,) * 2
    elif is_algorithm(precision):
        return precision
    elif isinstance(precision, (tuple, list)) and len(precision) == 2:
        try:
            return tuple(p if isinstance(p, Precision) else Precision(p) for p in precision)
        except ValueError:
            pass
    raise ValueError(f"precision must be None, a lax.Precision, one of "
                     f"{sorted(_PRECISION_NAMES)}, a pair of those, a lax.DotAlgorithmPreset "
                     f"or its name, or a lax.DotAlgorithm; got {precision!r}")


# jax_default_matmul_precision's values, as JAX's option takes them: the legacy
# precision names and the dot algorithm presets' names.
_DEFAULT_VALUES = ("default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
                   *(n for n in DotAlgorithmPreset.__members__ if n != "DEFAULT"))


def _check_default(value):
    if value is not None and value not in _DEFAULT_VALUES:
        raise ValueError(f"new enum value must be None or in {list(_DEFAULT_VALUES)}, "
                         f"got {value} of type {type(value)}.")


config._add_validator("jax_default_matmul_precision", _check_default)


def precision_attr(precision):
    """The ``precision_config`` attribute of stablehlo dot_general/convolution (an
    algorithm's is DEFAULT: the ``algorithm`` attribute says it, ``dot_algorithms.py``)."""
    if precision is None:
        return None
    if is_algorithm(precision):
        precision = (Precision.DEFAULT,) * 2
    return ir.ArrayAttr.get([hlo.PrecisionAttr.get(p.name) for p in precision])


def preferred_dtype(preferred_element_type):
    return None if preferred_element_type is None else dtypes.canonicalize_dtype(
        preferred_element_type)


def accumulate_lowering(ctx, emit, in_dtype=None):
    """Emit ``emit(result ir type)`` accumulating directly in the preferred element type
    (int8 -> int32, bf16 -> f32, int8 -> f32), except float -> int, which computes in
    the input dtype (default: the lhs's) and converts (as JAX)."""
    out_aval, in_dtype = ctx.avals_out[0], in_dtype or ctx.avals_in[0].dtype
    if not (dtypes.is_inexact(in_dtype) and not dtypes.is_inexact(out_aval.dtype)):
        return emit(mlir.aval_to_ir_type(out_aval))
    result = emit(mlir.aval_to_ir_type(out_aval.update(dtype=in_dtype)))
    return hlo.convert(mlir.aval_to_ir_type(out_aval), result)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                out_sharding=None):
    """General tensor contraction.

    Args:
      lhs, rhs: arrays; of different dtypes (float8_e4m3fn x float8_e5m2), the product
        is in the more precise one (see ``dot_result_dtype``).
      dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
      precision: ``None``, a ``lax.Precision`` (or its string name), or a pair of them.
      preferred_element_type: the result (accumulation) dtype, e.g. ``jnp.int32`` for
        int8 operands or ``jnp.float32`` for bfloat16 ones.
      out_sharding: explicit sharding mode: the result's sharding (a NamedSharding, or a
        PartitionSpec under a mesh), e.g. where split contracting dimensions leave it
        ambiguous.

    Returns:
      The batch dimensions, then lhs's free dimensions, then rhs's free dimensions.

    >>> x = jnp.ones((2, 3, 4)); y = jnp.ones((2, 4, 5))
    >>> dot_general(x, y, (((2,), (1,)), ((0,), (0,)))).shape
    (2, 3, 5)
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(int(i) for i in lc), tuple(int(i) for i in rc)),
          (tuple(int(i) for i in lb), tuple(int(i) for i in rb)))
    params = dict(dimension_numbers=dn, precision=canonicalize_precision(precision),
                  preferred_element_type=preferred_dtype(preferred_element_type))
    if out_sharding is not None:  # (a param only when given: other dots print as before)
        params["out_sharding"] = sharding_types.abstract_sharding(out_sharding, "dot_general")
    return dot_general_p.bind(lhs, rhs, **params)


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """Vector/matrix products: contracts lhs's last and rhs's first dimension (or as
    ``dimension_numbers`` say: then ``dot_general``).

    >>> dot(jnp.ones((2, 3)), jnp.ones(3), precision=Precision.HIGHEST)
    Array([3., 3.], dtype=float32)
    """
    l, r = get_aval(lhs), get_aval(rhs)
    if dimension_numbers is None:
        if not (l.ndim in (1, 2) and r.ndim in (1, 2) and l.shape[-1] == r.shape[0]):
            raise ValueError("jax.lax.dot: dimension_numbers must be specified when not "
                             "performing simple un-batched matrix-matrix, matrix-vector, or "
                             f"vector-vector products; got lhs_shape={l.shape} "
                             f"rhs_shape={r.shape}")
        dimension_numbers = (((l.ndim - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type,
                       out_sharding=out_sharding)


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over leading batch dimensions (both operands of one rank >= 2).

    >>> batch_matmul(jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5))).shape
    (2, 3, 5)
    """
    l, r = get_aval(lhs).ndim, get_aval(rhs).ndim
    if min(l, r) < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D, got {l}, {r}")
    if l != r:
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got {l}, {r}")
    batch = tuple(range(l - 2))
    return dot_general(lhs, rhs, (((l - 1,), (r - 2,)), (batch, batch)), precision=precision)


def _free(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _precision_rank(dt):
    # XLA's HigherPrecisionType order (as JAX): complex, then exponent, then mantissa,
    # then bits, then signed over unsigned.
    real = dtypes.finfo(dt).dtype if dtypes.is_complex(dt) else dt
    fl = dtypes.is_floating(real)
    return (dtypes.is_complex(dt), dtypes.finfo(real).maxexp if fl else -1,
            dtypes.finfo(real).nmant if fl else -1,
            1 if dt == dtypes.bool_ else dtypes.itemsize_bits(real), not dtypes.is_unsigned(dt))


def dot_result_dtype(lhs_dtype, rhs_dtype):
    """The dtype a dot of mixed operand dtypes computes in (float8_e4m3fn x float8_e5m2
    is float8_e5m2; int8 x float32 is float32): the more precise one, as XLA and JAX.
    Different dtypes that rank equal are an error."""
    if lhs_dtype == rhs_dtype:
        return lhs_dtype
    lr, rr = _precision_rank(lhs_dtype), _precision_rank(rhs_dtype)
    if lr == rr:
        raise TypeError(f"dot_general argument type error: {lhs_dtype.name}, "
                        f"{rhs_dtype.name}")
    return lhs_dtype if lr > rr else rhs_dtype


def _bits(dtype):   # JAX's _bit_width: a complex type counts its parts' width
    return dtypes.itemsize_bits(dtype) // (2 if dtypes.is_complex(dtype) else 1)


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision,
                               preferred_element_type, out_sharding=None):
    (lc, rc), (lb, rb) = dimension_numbers
    check_dtype("dot_general", lhs.dtype, numeric_or_bool)
    check_dtype("dot_general", rhs.dtype, numeric_or_bool)
    result_dtype = dot_result_dtype(lhs.dtype, rhs.dtype)
    for dims, x, what in ((lc, lhs, "lhs contracting"), (rc, rhs, "rhs contracting"),
                          (lb, lhs, "lhs batch"), (rb, rhs, "rhs batch")):
        if any(not 0 <= d < x.ndim for d in dims) or len(set(dims)) != len(dims):
            raise TypeError(f"dot_general {what} dimensions {dims} are invalid for shape "
                            f"{x.shape}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError("dot_general requires equal numbers of lhs and rhs contracting and "
                        f"batch dimensions, got {dimension_numbers}")
    lc_shape, rc_shape = [lhs.shape[i] for i in lc], [rhs.shape[i] for i in rc]
    if lc_shape != rc_shape:
        raise TypeError(f"dot_general requires contracting dimensions to have the same "
                        f"shape, got {lc_shape} and {rc_shape} (operand shapes {lhs.shape} "
                        f"and {rhs.shape}).")
    lb_shape, rb_shape = [lhs.shape[i] for i in lb], [rhs.shape[i] for i in rb]
    if lb_shape != rb_shape:
        raise TypeError(f"dot_general requires lhs batch dimensions and rhs batch "
                        f"dimensions to have the same shape, got {lb_shape} and {rb_shape}.")
    shape = (tuple(lb_shape) + tuple(lhs.shape[i] for i in _free(lhs.ndim, lc, lb))
             + tuple(rhs.shape[i] for i in _free(rhs.ndim, rc, rb)))
    dt = result_dtype if preferred_element_type is None else preferred_element_type
    if (dt != result_dtype and not dtypes.is_floating(result_dtype) and not
            is_algorithm(precision)  # (as JAX: an algorithm says its own types)
            and _bits(dt) < _bits(result_dtype)):
        raise TypeError("`preferred_element_type` must not be narrower than the original "
                        f"type, got preferred_element_type of {dt} for result type of "
                        f"{result_dtype}.")
    return ShapedArray(shape, dt, lhs.weak_type and rhs.weak_type, sharding=None if
                       out_sharding is None else
                       sharding_types.type_sharding(out_sharding, len(shape)))


def _transpose_lhs(ct, x_aval, y, dimension_numbers, precision, swap_ans=False):
    """Cotangent of the lhs ``x``: contract ct with y, then permute into x's layout."""
    (xc, yc), (xb, yb) = dimension_numbers
    y_aval = get_aval(y)
    x_kept = _free(x_aval.ndim, xc, xb)
    y_kept = _free(y_aval.ndim, yc, yb)
    nb = len(xb)
    if swap_ans:
        ans_y = range(nb, nb + len(y_kept))
    else:
        ans_y = range(nb + len(x_kept), nb + len(x_kept) + len(y_kept))
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(range(nb)), tuple(yb)))
    if get_aval(y).dtype != get_aval(ct).dtype:   # preferred_element_type != inputs'
        y = convert_element_type(y, get_aval(ct).dtype)
    # out dims: batch (in xb order), x's free dims, then y's contracting dims in sorted order.
    y_rest = sorted(yc)
    order = list(xb) + list(x_kept) + [xc[yc.index(d)] for d in y_rest]
    s = x_aval._sharding   # explicit mode: the cotangent is typed as x (as JAX)
    out = dot_general(ct, y, dims, precision, out_sharding=None if s is None else
                      s.with_spec(P(*[s.spec[d] for d in order])))
    if get_aval(out).dtype != x_aval.dtype:
        out = convert_element_type(out, x_aval.dtype)
    pos = {d: i for i, d in enumerate(xb)}
    pos.update({d: nb + i for i, d in enumerate(x_kept)})
    pos.update({cx: nb + len(x_kept) + y_rest.index(cy) for cx, cy in zip(xc, yc)})
    return shapes.transpose(out, tuple(pos[d] for d in range(x_aval.ndim)))


def _dot_general_transpose_lhs(ct, x, y, *, dimension_numbers, precision, **_):
    return _transpose_lhs(ct, x.aval, y, dimension_numbers, precision)


def _dot_general_transpose_rhs(ct, x, y, *, dimension_numbers, precision, **_):
    (xc, yc), (xb, yb) = dimension_numbers
    swapped = precision[::-1] if isinstance(precision, tuple) else precision
    return _transpose_lhs(ct, y.aval, x, ((yc, xc), (yb, xb)), swapped, swap_ans=True)


def _dot_general_batch(vals, dims, *, dimension_numbers, precision, preferred_element_type,
                       out_sharding=None):
    (x, y), (dx, dy) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    shift = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731  (after moving bdim to 0)
    params = dict(precision=precision, preferred_element_type=preferred_element_type)

    def bind(x, y, dn, out_dim):
        if out_sharding is not None:  # the batch dimension split as the operand's (JAX's)
            spec = list(out_sharding.spec) + [None] * (out_dim - len(out_sharding.spec))
            mapped = sharding_types.spec_of(get_aval(x if dx is not None else y))[0]
            params["out_sharding"] = out_sharding.with_spec(
                P(*spec[:out_dim], mapped, *spec[out_dim:]))
        return dot_general_p.bind(x, y, dimension_numbers=dn, **params), out_dim
    if dx is not None and dy is not None:
        x, y = batching.moveaxis(x, dx, 0), batching.moveaxis(y, dy, 0)
        return bind(x, y, ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb))), 0)
    if dx is not None:
        x = batching.moveaxis(x, dx, 0)
        return bind(x, y, ((shift(lc), rc), (shift(lb), rb)), len(lb))
    y = batching.moveaxis(y, dy, 0)
    n_lhs_free = get_aval(x).ndim - len(lc) - len(lb)
    return bind(x, y, ((lc, shift(rc)), (lb, shift(rb))), len(lb) + n_lhs_free)


def _dot_general_lowering(ctx, x, y, *, dimension_numbers, precision, preferred_element_type,
                          out_sharding=None):  # (the result's type is lowered generically)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
        lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
    if is_algorithm(precision):
        return lower_dot(ctx, x, y, precision, lambda ty, x, y, algorithm: hlo.dot_general(
            ty, x, y, dn, precision_config=precision_attr(precision), algorithm=algorithm))
    return accumulate_lowering(ctx, lambda ty: hlo.dot_general(
        ty, x, y, dn, precision_config=precision_attr(precision)),
        dot_result_dtype(*(a.dtype for a in ctx.avals_in)))


dot_general_p = standard_primitive("dot_general", _dot_general_abstract_eval)
ad.defbilinear(dot_general_p, _dot_general_transpose_lhs, _dot_general_transpose_rhs)
batching.primitive_batchers[dot_general_p] = _dot_general_batch
mlir.register_lowering(dot_general_p, _dot_general_lowering)
