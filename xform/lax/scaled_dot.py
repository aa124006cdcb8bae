"""``lax.scaled_dot``: ``(lhs * lhs_scale) @ (rhs * rhs_scale)`` with block scales
(MX formats: float8/float4 operands, ``float8_e8m0fnu`` scales, one scale per
subchannel of the contracting dimension), as JAX's.

The primitive lowers to the composite ``xla.scaled_dot`` (a backend with a native
kernel matches the name; elsewhere XLA inlines the decomposition: scales broadcast over
their subchannels, both sides converted to bfloat16 and multiplied, then one
``dot_general`` accumulating in ``preferred_element_type``). Batching adds a batch
dimension; like JAX's it has no JVP or transpose rule.
"""
import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import standard_primitive
from xform.lax.composite_op import composite
from xform.lax.dot import dot_general
from xform.lax.elementwise import convert_element_type, mul
from xform.lax.shapes import broadcast_in_dim, full, reshape


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None,
               preferred_element_type=None):
    """Block-scaled ``dot_general`` (JAX's ``lax.scaled_dot``): a scale's contracting
    dimension divides its operand's (subchannels of at least 2), its other dimensions
    equal the operand's. Without ``dimension_numbers`` the last two dimensions are a
    matrix product batched over the rest. The result (and accumulation) dtype is
    ``preferred_element_type``, bfloat16 by default. Not differentiable, as JAX's."""
    if dimension_numbers is None:
        if np.ndim(lhs) in (0, 1):
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        n = np.ndim(lhs)
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)),) * 2)
    dimension_numbers = tuple(tuple(tuple(int(d) for d in dims) for dims in pair)
                              for pair in dimension_numbers)
    (lhs_contracting, rhs_contracting), _ = dimension_numbers
    if lhs_scale is None:
        lhs_scale = _unit_scale(lhs, lhs_contracting)
    if rhs_scale is None:
        rhs_scale = _unit_scale(rhs, rhs_contracting)
    element_type = dtypes.canonicalize_dtype(
        dtypes.bfloat16 if preferred_element_type is None else preferred_element_type)
    return scaled_dot_p.bind(lhs, rhs, lhs_scale, rhs_scale,
                             dimension_numbers=dimension_numbers,
                             preferred_element_type=element_type)


def _unit_scale(operand, contracting):
    shape = [1 if d in contracting else n for d, n in enumerate(np.shape(operand))]
    return convert_element_type(full(shape, 1.0, dtypes.bfloat16), dtypes.float8_e8m0fnu)


def _check_scale(side, shape, scale_shape, contracting):
    for i, size in enumerate(shape):
        if i in contracting:
            if size % scale_shape[i]:
                raise TypeError(f"{side} contracting dim {i} of size {size} must be "
                                f"divisible by its scale's dim size {scale_shape[i]}.")
            if size // scale_shape[i] < 2:
                raise TypeError(f"The ratio of {side} contracting dim {i} to its scale's "
                                f"dim size ({size // scale_shape[i]}) must be at least 2.")
        elif scale_shape[i] != size:
            raise TypeError(f"{side} dim {i} of size {size} does not match scale dim "
                            f"size {scale_shape[i]}.")


def _abstract_eval(lhs, rhs, lhs_scale, rhs_scale, *, dimension_numbers,
                   preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    ranks = (lhs.ndim, rhs.ndim, lhs_scale.ndim, rhs_scale.ndim)
    if len(set(ranks)) != 1:
        raise TypeError(f"All input tensors must have the same rank. Got lhs rank: "
                        f"{lhs.ndim} rhs rank: {rhs.ndim} lhs_scale rank: "
                        f"{lhs_scale.ndim} rhs_scale rank: {rhs_scale.ndim}.")
    if len(lb) != len(rb):
        raise TypeError("LHS and RHS must have the same number of batch dimensions, got "
                        f"{len(lb)} and {len(rb)}.")
    if len(lc) != len(rc):
        raise TypeError("LHS and RHS must have the same number of contracting "
                        f"dimensions, got {len(lc)} and {len(rc)}.")
    for i, j in zip(lb, rb):
        if len({lhs.shape[i], rhs.shape[j], lhs_scale.shape[i], rhs_scale.shape[j]}) != 1:
            raise TypeError("All input tensors must have the same batch dimension size "
                            f"for batch dims ({i}, {j}).")
    for i, j in zip(lc, rc):
        if lhs.shape[i] != rhs.shape[j]:
            raise TypeError(f"LHS contracting dim {i} of size {lhs.shape[i]} does not "
                            f"match RHS contracting dim {j} of size {rhs.shape[j]}.")
    _check_scale("LHS", lhs.shape, lhs_scale.shape, lc)
    _check_scale("RHS", rhs.shape, rhs_scale.shape, rc)
    kept_l = [lhs.shape[i] for i in range(lhs.ndim) if i not in lc and i not in lb]
    kept_r = [rhs.shape[i] for i in range(rhs.ndim) if i not in rc and i not in rb]
    return ShapedArray(tuple(lhs.shape[i] for i in lb) + tuple(kept_l) + tuple(kept_r),
                       preferred_element_type)


def _spread(scale, shape, contracting):
    # each scale repeated over its subchannel of the contracting dimension
    for i in contracting:
        if scale.shape[i] != shape[i]:
            wide = scale.shape[:i + 1] + (shape[i] // scale.shape[i],) + scale.shape[i + 1:]
            dims = tuple(d for d in range(len(wide)) if d != i + 1)
            scale = reshape(broadcast_in_dim(scale, wide, dims),
                            scale.shape[:i] + (shape[i],) + scale.shape[i + 1:])
    return scale


def _scaled(x, scale, contracting):
    scale = _spread(scale, x.shape, contracting)
    return mul(convert_element_type(x, dtypes.bfloat16),
               convert_element_type(scale, dtypes.bfloat16))


def _decomposition(lhs, rhs, lhs_scale, rhs_scale, *, dimension_numbers,
                   preferred_element_type):
    (lc, rc), _ = dimension_numbers
    return dot_general(_scaled(lhs, lhs_scale, lc), _scaled(rhs, rhs_scale, rc),
                       dimension_numbers, preferred_element_type=preferred_element_type)


def _batch(vals, dims, *, dimension_numbers, preferred_element_type):
    size = next(np.shape(x)[d] for x, d in zip(vals, dims) if d is not None)
    vals = [batching.bdim_at_front(x, d, size) for x, d in zip(vals, dims)]
    (lc, rc), (lb, rb) = dimension_numbers

    def shift(ds):
        return tuple(d + 1 for d in ds)
    numbers = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
    return scaled_dot_p.bind(*vals, dimension_numbers=numbers,
                             preferred_element_type=preferred_element_type), 0


def _jvp(*_, **__):
    raise NotImplementedError("Differentiation rule for 'scaled_dot' not implemented")


scaled_dot_p = standard_primitive("scaled_dot", _abstract_eval)
batching.primitive_batchers[scaled_dot_p] = _batch
ad.primitive_jvps[scaled_dot_p] = _jvp   # (JAX's error, said explicitly)
mlir.register_lowering(scaled_dot_p, mlir.lower_fun(
    composite(_decomposition, name="xla.scaled_dot"), multiple_results=False))
