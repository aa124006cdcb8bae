"""``jax.nn``'s block-scaled (microscaling) matmul: ``scaled_matmul`` on quantized
operands with per-block scales, and ``scaled_dot_general``, which quantizes its
high-precision operands (MXFP8: float8_e4m3fn data, float8_e8m0fnu power-of-two scales,
blocks of 32; NVFP4: float4_e2m1fn data, float8_e4m3fn scales, blocks of 16, and a
float32 global scale) and has JAX's custom backward pass.

NB: JAX runs ``scaled_matmul`` only as a cuDNN (CUDA) or ``scaled_dot`` (ROCm) kernel
and has no CPU lowering. xform computes what those kernels do, on every backend, as a
composition: operands dequantized to float32 (data times the block's scale), a float32
``dot_general``, the result cast to ``preferred_element_type``.
"""
import dataclasses
import functools
import warnings

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import dtypes
from xform.transforms.custom_derivatives import custom_vjp

_RESULT_TYPES = (np.dtype("float32"), np.dtype("bfloat16"), np.dtype("float16"))


@dataclasses.dataclass(slots=True)
class BlockScaleConfig:
    """How ``scaled_dot_general`` quantizes one operand (see
    ``get_scaled_dot_general_config``)."""
    mode: str
    block_size: int
    data_type: object
    scale_type: object
    global_scale: object
    infer_only: bool


def get_scaled_dot_general_config(mode, global_scale=None):
    """The quantization config for ``scaled_dot_general``: ``'mxfp8'`` or ``'nvfp4'``
    (with ``global_scale``, a float32 array of shape ``(1,)``; default ones).

    >>> import xform.nn as nn
    >>> nn.get_scaled_dot_general_config('mxfp8').block_size
    32
    """
    if mode == "nvfp4":
        return BlockScaleConfig(
            mode="nvfp4", block_size=16, data_type=dtypes.float4_e2m1fn,
            scale_type=dtypes.float8_e4m3fn, infer_only=False,
            global_scale=jnp.ones((1,), jnp.float32) if global_scale is None
            else global_scale)
    if mode == "mxfp8":
        return BlockScaleConfig(mode="mxfp8", block_size=32, data_type=dtypes.float8_e4m3fn,
                                scale_type=dtypes.float8_e8m0fnu, global_scale=None,
                                infer_only=False)
    raise ValueError(f"Unsupported mode: {mode}")


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """Block-scaled batched matmul ``(B, M, K) x (B, N, K) -> (B, M, N)``: each operand
    is multiplied by its scales repeated over blocks of ``K // scales.shape[-1]`` along
    the contracting (last) axis, then contracted (in float32).

    Args:
      lhs, rhs: shapes ``(B, M, K)`` and ``(B, N, K)`` (typically fp8/fp4).
      lhs_scales, rhs_scales: shapes ``(B, M, K_s)`` and ``(B, N, K_s)``, ``K % K_s == 0``.
      preferred_element_type: the result dtype (default float32).

    Returns:
      The ``(B, M, N)`` product.

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> a = jnp.array([1., 2, 3]).reshape((1, 1, 3))
    >>> s = jnp.array([0.5]).reshape((1, 1, 1))
    >>> nn.scaled_matmul(a, a, s, s)
    Array([[[3.5]]], dtype=float32)
    """
    arrays = (lhs, rhs, lhs_scales, rhs_scales)
    if not all(jnp.ndim(x) == 3 for x in arrays):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    (b_a, m_a, k_a), (b_b, n_b, k_b) = jnp.shape(lhs), jnp.shape(rhs)
    if k_a != k_b or b_a != b_b:
        raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) "
                         f"and contract (K) dimensions, but got shapes {jnp.shape(lhs)} "
                         f"and {jnp.shape(rhs)}")
    (b_as, m_as, k_as), (b_bs, n_bs, k_bs) = jnp.shape(lhs_scales), jnp.shape(rhs_scales)
    if k_as != k_bs or b_as != b_bs:
        raise ValueError("scaled_matmul requires scales to have matching batch (B) and "
                         f"contract (K) dimensions, but got shapes {jnp.shape(lhs_scales)} "
                         f"and {jnp.shape(rhs_scales)}")
    if m_as != m_a or n_bs != n_b:
        raise ValueError("scaled_matmul requires scales to match non-contract dimensions "
                         f"of inputs, but got shapes a: {jnp.shape(lhs)}, b: "
                         f"{jnp.shape(rhs)}, a_scales: {jnp.shape(lhs_scales)}, b_scales: "
                         f"{jnp.shape(rhs_scales)}")
    if k_as == 0 or k_a % k_as:
        raise ValueError(f"scaled_matmul requires the contract dimension K={k_a} to be a "
                         f"multiple of the scales' K={k_as}")
    out_type = dtypes.canonicalize_dtype(preferred_element_type)
    a, b = (_dequantize(x, s, k_a // k_as) for x, s in ((lhs, lhs_scales), (rhs, rhs_scales)))
    out = lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,))),
                          preferred_element_type=jnp.float32)
    return out.astype(out_type)


def _dequantize(x, scales, block):
    f32 = jnp.float32
    return jnp.asarray(x).astype(f32) * jnp.repeat(jnp.asarray(scales).astype(f32), block,
                                                   axis=-1)


# ---- quantization (JAX's recipe: per-block amax / dtype max, rounded to the scale type) ----

def _to_e8m0_rounding_up(x):
    # float32 bits -> biased exponent, +1 unless the mantissa is zero (an exact power of
    # two), the exponent is the largest finite, or x is a small subnormal
    bits = lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    exp, mant = bits >> 23, bits & 0x7FFFFF
    round_up = (mant > 0) & (exp != 0xFE) & ~((exp == 0) & (mant <= 0x400000))
    return jnp.where(round_up, exp + 1, exp).astype(jnp.uint8)


def _e8m0_to(x, dtype):
    f = lax.bitcast_convert_type(x.astype(jnp.uint32) << 23, jnp.float32)
    near_zero = 2.0 ** -15 if np.dtype(dtype) == np.float16 else 2.0 ** -127
    return jnp.where(f == 0, jnp.float32(near_zero), f).astype(dtype)


def _quantize(x, config):
    """``(x_q, scales)`` for a ``(B, M, K)`` operand: blocks of ``block_size`` along K."""
    shape, block = x.shape, config.block_size
    if shape[-1] < block or shape[-1] % block:
        raise ValueError(f"scaled_dot_general: the contracting size {shape[-1]} must be a "
                         f"multiple of the {config.mode} block size {block}")
    x = x.reshape(shape[:-1] + (shape[-1] // block, block))
    dmax = jnp.finfo(config.data_type).max.astype(x.dtype)
    amax = lambda v: jnp.max(jnp.abs(v), axis=-1, keepdims=True) / dmax
    if config.mode == "mxfp8":
        scales = _to_e8m0_rounding_up(amax(x))
        scaled = x / _e8m0_to(scales, x.dtype)
        scales = lax.bitcast_convert_type(scales, config.scale_type)
    elif config.mode == "nvfp4":
        x = x / config.global_scale
        smax = jnp.finfo(config.scale_type).max.astype(x.dtype)
        scales = jnp.clip(amax(x), 0, smax).astype(config.scale_type)
        scaled = x / scales.astype(jnp.float32)
    else:
        raise ValueError(f"Unrecognized mode: {config.mode}.")
    x_q = jnp.clip(scaled, -dmax, dmax).astype(config.data_type).reshape(shape)
    return x_q, scales.reshape(scales.shape[:-1])


def _to_3d(x, contract, batch):
    """``x`` transposed to (batch, free, contracting) axes and reshaped ``(B, M, K)``."""
    order = ([d for d in range(x.ndim) if d in batch]
             + [d for d in range(x.ndim) if d not in contract and d not in batch]
             + [d for d in range(x.ndim) if d in contract])
    size = lambda axes: int(np.prod([x.shape[d] for d in axes], dtype=int))
    nb, nc = len(batch), len(contract)
    sizes = (size(order[:nb]), size(order[nb:x.ndim - nc]), size(order[x.ndim - nc:]))
    return jnp.transpose(x, order).reshape(sizes)


def _out_shape(x_shape, y_shape, x_dn, y_dn):
    (x_contract, x_batch), (y_contract, y_batch) = x_dn, y_dn
    return (tuple(d for i, d in enumerate(x_shape) if i in x_batch)
            + tuple(d for i, d in enumerate(x_shape) if i not in x_contract + x_batch)
            + tuple(d for i, d in enumerate(y_shape) if i not in y_contract + y_batch))


def _scaled_dot(lhs, rhs, dimension_numbers, preferred_element_type, configs):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs_q, lhs_s = _quantize(_to_3d(lhs, lc, lb), configs[0])
    rhs_q, rhs_s = _quantize(_to_3d(rhs, rc, rb), configs[1])
    nvfp4 = configs[0].mode == "nvfp4"
    out = scaled_matmul(lhs_q, rhs_q, lhs_s, rhs_s,
                        jnp.float32 if nvfp4 else preferred_element_type)
    if nvfp4:
        out = (out * (configs[0].global_scale * configs[1].global_scale)).astype(
            preferred_element_type)
    return out.reshape(_out_shape(lhs.shape, rhs.shape, (lc, lb), (rc, rb)))


def _transpose_lhs(g, x, y, dimension_numbers, preferred_element_type, configs,
                   swap_ans=False):
    """``x``'s cotangent: ``g`` contracted with ``y``, both block-quantized by
    ``configs`` (plainly, for nvfp4), then laid out as ``x``."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_kept = [i for i in range(x.ndim) if i not in x_contract + x_batch]
    y_kept = [i for i in range(y.ndim) if i not in y_contract + y_batch]
    nb = len(x_batch)
    ans_batch = tuple(range(nb))
    if swap_ans:
        ans_y = tuple(range(nb, nb + len(y_kept)))
    else:
        ans_y = tuple(range(nb + len(x_kept), nb + len(x_kept) + len(y_kept)))
    g_dn, y_dn = (ans_y, ans_batch), (tuple(y_kept), tuple(y_batch))
    g3, y3 = _to_3d(g, *g_dn), _to_3d(y, *y_dn)
    if configs[0].mode != "nvfp4":
        (g_q, g_s), (y_q, y_s) = _quantize(g3, configs[0]), _quantize(y3, configs[1])
        out = scaled_matmul(g_q, y_q, g_s, y_s, preferred_element_type)
    else:
        out = jnp.matmul(g3, jnp.transpose(y3, (0, 2, 1)),
                         preferred_element_type=preferred_element_type)
    out = out.reshape(_out_shape(g.shape, y.shape, g_dn, y_dn))
    x_contract_by_y = list(np.take(x_contract, np.argsort(y_contract)))
    perm = np.argsort(list(x_batch) + x_kept + x_contract_by_y)
    return lax.transpose(out, tuple(int(p) for p in perm))


@functools.partial(custom_vjp, nondiff_argnums=(2, 3, 4))
def _scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type, configs):
    return _scaled_dot(lhs, rhs, dimension_numbers, preferred_element_type, configs)


def _scaled_dot_general_fwd(lhs, rhs, dimension_numbers, preferred_element_type, configs):
    return (_scaled_dot(lhs, rhs, dimension_numbers, preferred_element_type, configs),
            (lhs, rhs))


def _scaled_dot_general_bwd(dimension_numbers, preferred_element_type, configs, res, g):
    lhs, rhs = res
    (lc, rc), (lb, rb) = dimension_numbers
    grad_lhs = _transpose_lhs(g, lhs, rhs, dimension_numbers, preferred_element_type,
                              [configs[2], configs[1]])
    grad_rhs = _transpose_lhs(g, rhs, lhs, ((rc, lc), (rb, lb)), preferred_element_type,
                              [configs[2], configs[0]], swap_ans=True)
    if configs[2].mode == "nvfp4":
        # straight-through estimator, zero where the forward quantization clipped
        dmax = jnp.finfo(configs[0].data_type).max.astype(lhs.dtype)
        smax = jnp.finfo(configs[0].scale_type).max.astype(lhs.dtype)
        grad_lhs = jnp.where(jnp.abs(lhs) <= configs[0].global_scale * dmax * smax,
                             grad_lhs, 0)
        grad_rhs = jnp.where(jnp.abs(rhs) <= configs[1].global_scale * dmax * smax,
                             grad_rhs, 0)
    return grad_lhs, grad_rhs


_scaled_dot_general.defvjp(_scaled_dot_general_fwd, _scaled_dot_general_bwd)


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
    """``lax.dot_general`` with both operands block-quantized per ``configs`` (for lhs,
    rhs and the gradient; see ``get_scaled_dot_general_config``) along their contracting
    axes, and JAX's backward pass (the output gradient quantized by ``configs[2]``).

    Args:
      lhs, rhs: high-precision operands.
      dimension_numbers: ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.
      preferred_element_type: float32 (default), bfloat16 or float16.
      configs: three ``BlockScaleConfig``; None: a plain ``lax.dot_general``.
      implementation: deprecated and ignored (as in JAX).

    Returns:
      Batch axes, then lhs's free axes, then rhs's.

    >>> import xform, xform.nn as nn
    >>> c = [nn.get_scaled_dot_general_config('mxfp8')] * 3
    >>> x = xform.random.normal(xform.random.PRNGKey(0), (4, 64))
    >>> nn.scaled_dot_general(x, x, (((1,), (1,)), ((), ())), configs=c).shape
    (4, 4)
    """
    if implementation is not None:
        warnings.warn("Backend selector, now ignored. The system chooses the backend "
                      "automatically.", DeprecationWarning)
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    out_type = dtypes.canonicalize_dtype(preferred_element_type)
    if out_type not in _RESULT_TYPES:
        raise TypeError("Only support preferred_element_type in (f32, bf16, f16), but got "
                        f"{preferred_element_type}")
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) for d in dims) for dims in (lc, rc, lb, rb))
    lhs, rhs = jnp.asarray(lhs), jnp.asarray(rhs)
    expanded = not lb or not rb
    if not lb:  # a trailing size-1 batch axis, squeezed from the result's front after
        lhs, lb = jnp.expand_dims(lhs, lhs.ndim), (lhs.ndim,)
    if not rb:
        rhs, rb = jnp.expand_dims(rhs, rhs.ndim), (rhs.ndim,)
    out = _scaled_dot_general(lhs, rhs, ((lc, rc), (lb, rb)), out_type, list(configs))
    return jnp.squeeze(out, axis=0) if expanded else out
