"""FP8 training, as Flax linen's ``fp8_ops``: per-tensor delayed scaling.

Each quantized tensor (input, kernel, output gradient) has a ``scale`` and an
``amax_history`` in the ``'_overwrite_with_gradient'`` collection. The custom VJPs below
return, as the "cotangent" of those variables, their *updated values* (new scale from
the history's max, history rolled with this step's ``max|x|``); the training loop
overwrites the collection with its gradient instead of taking an optimizer step
(``TrainState.apply_gradients`` does so). Inputs and kernels are cast to
``float8_e4m3fn``, output gradients to ``float8_e5m2`` (the NANOO variant: the ``fnuz``
types).

NB: Flax's ``fm32`` extended dtype (scale gradients that accumulate by ``max`` when a
module is used twice) is not provided: the modules create ``float32`` variables, whose
gradients add, exactly as Flax's do.
"""
import functools
import itertools
import warnings

import numpy as np

import xform.numpy as jnp
from xform import lax, random
from xform.nn import initializers
from xform.nn._module import Module
from xform.transforms.custom_derivatives import custom_jvp, custom_vjp

OVERWRITE_WITH_GRADIENT = "_overwrite_with_gradient"
_FP8_TYPES = (jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.float8_e4m3fnuz, jnp.float8_e5m2fnuz)


def get_fp8_max(fp8_dtype, out_dtype):
    """The largest finite value of ``fp8_dtype``, as a scalar of ``out_dtype``."""
    if np.dtype(fp8_dtype) not in [np.dtype(t) for t in _FP8_TYPES]:
        raise ValueError(f"get_fp8_max: fp8_dtype must be one of float8_e4m3fn, "
                         f"float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz; got {fp8_dtype}")
    return jnp.finfo(fp8_dtype).max.astype(out_dtype)


def quantize(x, q_dtype, scale, compute_dtype):
    """``x / scale``, clipped to ``q_dtype``'s range (no inf/nan from overflow), cast."""
    dtype_max = get_fp8_max(q_dtype, compute_dtype)
    scaled_x = x / jnp.broadcast_to(scale.astype(compute_dtype), x.shape)
    return jnp.clip(scaled_x, -dtype_max, dtype_max).astype(q_dtype)


def dequantize(x, dq_dtype, scale):
    """``x * scale`` in ``dq_dtype``."""
    return x.astype(dq_dtype) * jnp.broadcast_to(scale.astype(dq_dtype), x.shape)


def qdq(x, q_dtype, scale, compute_dtype):
    """Quantize then dequantize: ``x`` rounded to what ``q_dtype`` at ``scale`` holds."""
    return dequantize(quantize(x, q_dtype, scale, compute_dtype), x.dtype, scale)


def compute_scale(amax, scale, fp8_max, margin=0):
    """The next scale, ``amax / fp8_max * 2**margin`` (Transformer Engine's rule); the
    old ``scale`` where ``amax`` is zero or not finite."""
    sf = (fp8_max / amax) / (2 ** margin)
    sf = jnp.where(amax > 0.0, sf, 1.0 / scale)
    sf = jnp.where(jnp.isfinite(amax), sf, 1.0 / scale)
    return 1.0 / sf


def compute_amax_history(x, amax_history):
    """``amax_history`` rolled one step towards the front, ``max|x|`` at index 0."""
    amax_update = jnp.max(jnp.abs(x)).astype(amax_history.dtype)
    return jnp.roll(amax_history, shift=-1, axis=0).at[0].set(amax_update)


def update_fp8_meta(x, q_dtype, scale, amax_history):
    """``(new_scale, new_history)``: the scale from the history as it was, the history
    with ``x``'s amax (so the scale lags one step: delayed scaling)."""
    amax_from_history = jnp.max(amax_history, axis=0)
    new_scale = compute_scale(amax_from_history, scale, get_fp8_max(q_dtype, jnp.float32))
    return new_scale, compute_amax_history(x, amax_history)


def quantize_dequantize_update(x, q_dtype, scale, amax_history, compute_dtype):
    """``(qdq(x) at the new scale, new_scale, new_history)``."""
    new_scale, new_history = update_fp8_meta(x, q_dtype, scale, amax_history)
    return qdq(x, q_dtype, new_scale, compute_dtype), new_scale, new_history


def _remaining(original, *removed):
    removed = set(itertools.chain(*removed))
    return [i for i in original if i not in removed]


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield range(start, start + len(x))
        start += len(x)


def dot_general_transpose_lhs(g, x, y, *, dimension_numbers, precision,
                              preferred_element_type=None, swap_ans=False):
    """The cotangent of ``dot_general(x, y)``'s lhs for output cotangent ``g`` (as
    ``lax``'s transpose rule, but with the given precision and result type)."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_kept = _remaining(range(np.ndim(x)), x_contract, x_batch)
    y_kept = _remaining(range(np.ndim(y)), y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(y_batch)))
    x_contract_sorted_by_y = list(np.take(x_contract, np.argsort(y_contract)))
    out_axes = np.argsort(list(x_batch) + x_kept + x_contract_sorted_by_y)
    return lax.transpose(lax.dot_general(g, y, dims, precision=precision,
                                         preferred_element_type=preferred_element_type),
                         tuple(int(a) for a in out_axes))


def dot_general_transpose_rhs(g, x, y, *, dimension_numbers, precision,
                              preferred_element_type=None):
    """The cotangent of ``dot_general(x, y)``'s rhs (see ``dot_general_transpose_lhs``)."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    return dot_general_transpose_lhs(
        g, y, x, dimension_numbers=((y_contract, x_contract), (y_batch, x_batch)),
        precision=precision, preferred_element_type=preferred_element_type, swap_ans=True)


# ---- the custom-gradient pieces: cotangents of scale/history are their new values ----

@functools.partial(custom_vjp, nondiff_argnums=(0, 1))
def in_qdq(compute_dtype, q_dtype, inp, scale, amax_history):
    """``inp`` quantized-dequantized at its updated scale; the gradient passes ``inp``'s
    cotangent straight through and gives the new scale and history as theirs."""
    return quantize_dequantize_update(inp, q_dtype, scale, amax_history, compute_dtype)[0]


def _in_qdq_fwd(compute_dtype, q_dtype, inp, scale, amax_history):
    qin, new_scale, new_history = quantize_dequantize_update(
        inp, q_dtype, scale, amax_history, compute_dtype)
    return qin, (new_scale, new_history)


def _in_qdq_bwd(compute_dtype, q_dtype, res, g):
    return (g, *res)


in_qdq.defvjp(_in_qdq_fwd, _in_qdq_bwd)


@functools.partial(custom_vjp, nondiff_argnums=(0, 1))
def out_qdq(compute_dtype, q_dtype, out, scale, amax_history):
    """Identity forward; backward quantizes-dequantizes the output's cotangent and gives
    the new scale and history as the cotangents of ``scale``/``amax_history``."""
    return out


def _out_qdq_fwd(compute_dtype, q_dtype, out, scale, amax_history):
    return out, (scale, amax_history)


def _out_qdq_bwd(compute_dtype, q_dtype, res, g):
    return quantize_dequantize_update(g, q_dtype, *res, compute_dtype)


out_qdq.defvjp(_out_qdq_fwd, _out_qdq_bwd)


@functools.partial(custom_vjp, nondiff_argnums=(0, 1))
def in_q(compute_dtype, q_dtype, inp, scale, amax_history):
    """``(quantize(inp) at the updated scale, that scale)``; no gradient for ``inp``
    (``quantized_dot`` supplies it), the new scale and history for the others."""
    new_scale, _ = update_fp8_meta(inp, q_dtype, scale, amax_history)
    return quantize(inp, q_dtype, new_scale, compute_dtype), new_scale


def _in_q_fwd(compute_dtype, q_dtype, inp, scale, amax_history):
    new_scale, new_history = update_fp8_meta(inp, q_dtype, scale, amax_history)
    qin = quantize(inp, q_dtype, new_scale, compute_dtype)
    return (qin, new_scale), (new_scale, new_history)


def _in_q_bwd(compute_dtype, q_dtype, res, _):
    return (None, *res)


in_q.defvjp(_in_q_fwd, _in_q_bwd)


@functools.partial(custom_vjp, nondiff_argnums=(0,))
def out_dq(dq_type, lhs_scale, rhs_scale, out):
    """``out * lhs_scale * rhs_scale``; the gradient passes ``out``'s straight through."""
    return dequantize(out, dq_type, lhs_scale * rhs_scale)


def _out_dq_fwd(dq_type, lhs_scale, rhs_scale, out):
    return out_dq(dq_type, lhs_scale, rhs_scale, out), None


def _out_dq_bwd(dq_type, _, g):
    return None, None, g


out_dq.defvjp(_out_dq_fwd, _out_dq_bwd)


@functools.partial(custom_vjp, nondiff_argnums=(8, 9))
def quantized_dot(lhs, q_lhs, lhs_scale, rhs, q_rhs, rhs_scale, out_grad_scale,
                  out_grad_amax_history, dimension_numbers, preferred_element_type=None):
    """``dot_general`` of the fp8 operands. Its backward quantizes the output gradient
    to e5m2 (with delayed scaling), contracts it with the *quantized* other operand,
    dequantizes, and gives the lhs/rhs (not their fp8 copies) those gradients."""
    return lax.dot_general(q_lhs, q_rhs, dimension_numbers, precision=lax.Precision.DEFAULT,
                           preferred_element_type=preferred_element_type)


def _quantized_dot_fwd(lhs, q_lhs, lhs_scale, rhs, q_rhs, rhs_scale, out_grad_scale,
                       out_grad_amax_history, dimension_numbers, preferred_element_type):
    out = lax.dot_general(q_lhs, q_rhs, dimension_numbers, precision=lax.Precision.DEFAULT,
                          preferred_element_type=preferred_element_type)
    return out, (lhs, q_lhs, lhs_scale, rhs, q_rhs, rhs_scale, out_grad_scale,
                 out_grad_amax_history)


def _quantized_dot_bwd(dimension_numbers, preferred_element_type, res, g):
    lhs, q_lhs, lhs_scale, rhs, q_rhs, rhs_scale, g_scale, g_history = res
    new_g_scale, new_g_history = update_fp8_meta(g, jnp.float8_e5m2, g_scale, g_history)
    q_g = quantize(g, jnp.float8_e5m2, new_g_scale, preferred_element_type)
    kw = dict(dimension_numbers=dimension_numbers, precision=lax.Precision.HIGHEST,
              preferred_element_type=preferred_element_type)
    grad_lhs = dequantize(dot_general_transpose_lhs(q_g, lhs, q_rhs, **kw),
                          preferred_element_type, rhs_scale * new_g_scale)
    grad_rhs = dequantize(dot_general_transpose_rhs(q_g, q_lhs, rhs, **kw),
                          preferred_element_type, lhs_scale * new_g_scale)
    return grad_lhs, None, None, grad_rhs, None, None, new_g_scale, new_g_history


quantized_dot.defvjp(_quantized_dot_fwd, _quantized_dot_bwd)


def fp8_scaled_dot_general(lhs, rhs, dimension_numbers, precision=None,
                           preferred_element_type=None, *, lhs_scale=None, rhs_scale=None,
                           grad_scale=None, lhs_amax_history=None, rhs_amax_history=None,
                           grad_amax_history=None, quantize_compute_type=jnp.float32):
    """A ``dot_general`` that really runs in fp8: both operands quantized to e4m3fn,
    contracted, the result dequantized by the product of their scales (``precision`` is
    ignored, with a warning, as in Flax)."""
    if precision is not None:
        warnings.warn('The function fp8_scaled_dot_general will set the "precision" and '
                      'disregard any provided "precision" argument.')
    q_lhs, new_lhs_scale = in_q(quantize_compute_type, jnp.float8_e4m3fn, lhs, lhs_scale,
                                lhs_amax_history)
    q_rhs, new_rhs_scale = in_q(quantize_compute_type, jnp.float8_e4m3fn, rhs, rhs_scale,
                                rhs_amax_history)
    y = quantized_dot(lhs, q_lhs, new_lhs_scale, rhs, q_rhs, new_rhs_scale, grad_scale,
                      grad_amax_history, dimension_numbers, preferred_element_type)
    return out_dq(preferred_element_type, new_lhs_scale, new_rhs_scale, y)


@functools.partial(custom_jvp, nondiff_argnums=(2, 3, 4))
def dot_general_with_precision(lhs, rhs, dimension_numbers, precision=None,
                               preferred_element_type=None):
    """``dot_general`` at DEFAULT precision forward and HIGHEST for the tangents (the
    given precision and result type are ignored, with a warning, as in Flax)."""
    if precision is not None or preferred_element_type is not None:
        warnings.warn('The function dot_general_with_precision will set the '
                      'precision/preferred_element_type and disregard any provided values.')
    return lax.dot_general(lhs, rhs, dimension_numbers, precision=lax.Precision.DEFAULT)


@dot_general_with_precision.defjvp
def _dot_general_with_precision_jvp(dimension_numbers, precision, preferred_element_type,
                                    primals, tangents):
    (lhs, rhs), (lhs_dot, rhs_dot) = primals, tangents
    out = lax.dot_general(lhs, rhs, dimension_numbers, precision=lax.Precision.DEFAULT)
    high = functools.partial(lax.dot_general, dimension_numbers=dimension_numbers,
                             precision=lax.Precision.HIGHEST)
    return out, high(lhs_dot, rhs) + high(lhs, rhs_dot)


def _parse_dot_inputs(*args):
    # The kernel's dtype is the layer's computation dtype (after promote_dtype).
    if len(args) != 3:
        raise TypeError(f"Fp8 dot_general ops take (inputs, kernel, dimension_numbers); "
                        f"got {len(args)} positional arguments")
    x, k, dimension_numbers = args
    return jnp.asarray(x, k.dtype), k, dimension_numbers, k.dtype


class Fp8DotGeneralBase(Module):
    """The six fp8 meta variables (``{input,kernel,output_grad}_{scale,amax_history}``,
    scales ones of shape ``(1,)``, histories zeros of ``(amax_history_length,)``) in the
    ``'_overwrite_with_gradient'`` collection."""
    amax_history_length: int = 1024
    e4m3_dtype: object = jnp.float8_e4m3fn
    e5m2_dtype: object = jnp.float8_e5m2

    def setup(self):
        key = random.PRNGKey(0)
        history = (initializers.zeros_init(), key, (self.amax_history_length,), jnp.float32)
        scale = (initializers.ones_init(), key, (1,), jnp.float32)
        for name in ("input", "kernel", "output_grad"):
            setattr(self, f"{name}_amax_history",
                    self.variable(OVERWRITE_WITH_GRADIENT, f"{name}_amax_history", *history))
        for name in ("input", "kernel", "output_grad"):
            setattr(self, f"{name}_scale",
                    self.variable(OVERWRITE_WITH_GRADIENT, f"{name}_scale", *scale))


class Fp8DotGeneralOp(Fp8DotGeneralBase):
    """A ``dot_general`` (pass as ``dot_general_cls``) simulating fp8: inputs and kernel
    quantized-dequantized (e4m3), output gradient too (e5m2); the product runs in the
    computation dtype. Deprecated in Flax for ``Fp8DirectDotGeneralOp``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> m = nn.Dense(3, dot_general_cls=nn.Fp8DirectDotGeneralOp)
    >>> v = m.init(xform.random.PRNGKey(0), jnp.ones((2, 4)))
    >>> sorted(v['_overwrite_with_gradient']['Fp8DirectDotGeneralOp_0'])[:2]
    ['input_amax_history', 'input_scale']
    """

    def __post_init__(self):
        super().__post_init__()
        if type(self) is Fp8DotGeneralOp:
            warnings.warn("The Fp8DotGeneralOp is deprecated. Use Fp8DirectDotGeneralOp or "
                          "Fp8Einsum instead.", DeprecationWarning)

    def __call__(self, *args, **kwargs):
        x, k, dimension_numbers, comp_dtype = _parse_dot_inputs(*args)
        x_qdq = in_qdq(comp_dtype, self.e4m3_dtype, x, self.input_scale.value,
                       self.input_amax_history.value)
        k_qdq = in_qdq(comp_dtype, self.e4m3_dtype, k, self.kernel_scale.value,
                       self.kernel_amax_history.value)
        y_qdq = dot_general_with_precision(x_qdq, k_qdq, dimension_numbers)
        return out_qdq(comp_dtype, self.e5m2_dtype, y_qdq, self.output_grad_scale.value,
                       self.output_grad_amax_history.value)


class Fp8DirectDotGeneralOp(Fp8DotGeneralBase):
    """A ``dot_general`` (pass as ``dot_general_cls``) whose product runs on fp8 operands
    (``fp8_scaled_dot_general``)."""

    def __call__(self, *args, **kwargs):
        x, k, dimension_numbers, comp_dtype = _parse_dot_inputs(*args)
        return fp8_scaled_dot_general(
            x, k, dimension_numbers, preferred_element_type=x.dtype,
            lhs_scale=self.input_scale.value, rhs_scale=self.kernel_scale.value,
            grad_scale=self.output_grad_scale.value,
            lhs_amax_history=self.input_amax_history.value,
            rhs_amax_history=self.kernel_amax_history.value,
            grad_amax_history=self.output_grad_amax_history.value,
            quantize_compute_type=comp_dtype)


class NANOOFp8DotGeneralOp(Fp8DotGeneralOp):
    """``Fp8DotGeneralOp`` with the ``fnuz`` fp8 types (AMD's)."""
    e4m3_dtype: object = jnp.float8_e4m3fnuz
    e5m2_dtype: object = jnp.float8_e5m2fnuz


class Fp8Einsum(Fp8DotGeneralBase):
    """``einsum(eqn, lhs, rhs)`` whose contraction is ``fp8_scaled_dot_general``; ``rhs``
    (the weight) fixes the computation dtype."""

    def __call__(self, eqn, lhs, rhs, precision=None, preferred_element_type=None):
        compute_dtype = rhs.dtype
        lhs = lhs.astype(compute_dtype)
        dot_general_fn = functools.partial(
            fp8_scaled_dot_general, lhs_scale=self.input_scale.value,
            rhs_scale=self.kernel_scale.value, grad_scale=self.output_grad_scale.value,
            lhs_amax_history=self.input_amax_history.value,
            rhs_amax_history=self.kernel_amax_history.value,
            grad_amax_history=self.output_grad_amax_history.value,
            quantize_compute_type=compute_dtype)
        return jnp.einsum(eqn, lhs, rhs, precision=precision,
                          preferred_element_type=preferred_element_type,
                          _dot_general=dot_general_fn)


Fp8DotGeneral = Fp8DirectDotGeneralOp  # Flax's alias
