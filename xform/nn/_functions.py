"""The reductions and array functions of ``jax.nn``: logsumexp, softmax, log_softmax,
logmeanexp, standardize, one_hot and dot_product_attention (XLA implementation),
composed from xform.numpy.

``softmax`` is a ``custom_jvp`` function (as in JAX): its JVP ``y * (t - sum(y * t))``
uses only the output, so the max-shift needs no stop_gradient and derivatives of every
order are those of the exact function.
"""
import functools
import math
import warnings

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes, shape_poly
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.transforms.custom_derivatives import custom_jvp
from xform.transforms.jit import jit


def _reduction_axes(x, axis):
    """The canonical tuple of reduced axes and the Python count of reduced elements."""
    axes = _util.canonicalize_axes(axis, len(x.aval.shape))
    return axes, math.prod(x.aval.shape[a] for a in axes)


def _static_axis(axis):
    """``axis`` hashable, for a static argument of jit (lists become tuples)."""
    return tuple(axis) if isinstance(axis, list) else axis


@composite(static=("axis", "keepdims", "return_sign"))
def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    r"""Log-sum-exp reduction :math:`\log \sum_i b_i e^{a_i}`, computed stably.

    The largest finite element is subtracted before exponentiating (and added back), so
    large inputs do not overflow and ``logsumexp([inf, 1]) == inf``.

    Args:
      a: input array (integers are promoted to floats).
      axis: int, tuple of ints or None (all axes): the axes to reduce.
      b: optional scale factors, broadcastable to ``a``'s shape; may be negative.
      keepdims: keep the reduced axes as size-1 dimensions.
      return_sign: if True, return ``(log|sum|, sign(sum))``.
      where: optional boolean mask of the elements to include.

    Returns:
      The reduction; with ``return_sign`` a pair. Without it, a negative sum gives NaN.

    >>> import xform.nn
    >>> xform.nn.logsumexp(xform.numpy.array([1000., 1000.]))
    Array(1000.6932, dtype=float32)
    """
    return _logsumexp(a, b, where, _static_axis(axis), keepdims, return_sign)


@functools.partial(jit, static_argnums=(3, 4, 5))
def _logsumexp(a, b, where, axis, keepdims, return_sign):
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a, b = _util.promote_dtypes("logsumexp", a, b, to="inexact")
        a = jnp.where(b != 0, a, -np.inf)
    else:
        a, = _util.promote_dtypes("logsumexp", a, to="inexact")
    a = _util.asarray(a)
    axes, _ = _reduction_axes(a, axis)
    is_complex = dtypes.issubdtype(a.aval.dtype, np.complexfloating)
    amax = jnp.max(jnp.real(a), axis=axes, keepdims=keepdims, where=where, initial=-np.inf)
    # Shift by the max where it is finite (an all -inf or an inf row shifts by 0); the
    # shift is a constant for differentiation: the result does not depend on it.
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0))
    amax_dims = amax if keepdims else lax.expand_dims(amax, axes)
    exp_a = jnp.exp(a - amax_dims.astype(a.aval.dtype))
    if b is not None:
        exp_a = exp_a * b
    sumexp = jnp.sum(exp_a, axis=axes, keepdims=keepdims, where=where)
    sign = jnp.sign(sumexp)
    if return_sign or not is_complex:
        sumexp = jnp.abs(sumexp)
    out = jnp.log(sumexp) + amax.astype(sumexp.dtype)
    if return_sign:
        return out, sign
    if b is not None and not is_complex:
        out = jnp.where(sign < 0, jnp.array(np.nan, dtype=out.dtype), out)
    return out


@composite(static=("axis", "keepdims"))
def logmeanexp(x, axis=None, where=None, keepdims=False):
    r"""Log-mean-exp: :math:`\log \frac{1}{n} \sum_i e^{x_i}` = logsumexp(x) - log(n).

    Args:
      x: input array.
      axis: int, tuple of ints or None (all axes).
      where: optional boolean mask of the elements to include (n counts only them).
      keepdims: keep the reduced axes as size-1 dimensions.

    >>> import xform.nn
    >>> xform.nn.logmeanexp(xform.numpy.array([0., 0.]))
    Array(0., dtype=float32)
    """
    return _logmeanexp(x, _static_axis(axis), where, keepdims)


@functools.partial(jit, static_argnums=(1, 3))
def _logmeanexp(x, axis, where, keepdims):
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    axes, n = _reduction_axes(_util.asarray(x), axis)
    if where is None:
        return lse - jnp.log(jnp.array(n, dtype=lse.dtype))
    mask = _util.broadcast_to(_util.asarray(where), jnp.shape(x))
    count = jnp.sum(mask, axis=axes, keepdims=keepdims, dtype=lse.dtype)
    return lse - jnp.log(count)


def _no_bool(x):
    """JAX's softmax subtracts the max in ``x``'s own dtype, so a bool input fails there."""
    if jnp.result_type(x) == np.bool_:
        raise TypeError("sub does not accept dtype bool at position 0. Accepted dtypes at "
                        "position 0 are subtypes of integer, floating, complexfloating.")
    return x


@composite(static=("axis",))
def log_softmax(x, axis=-1, where=None):
    r"""Log-softmax: :math:`x_i - \log \sum_j e^{x_j}` along ``axis``.

    Args:
      x: input array.
      axis: int, tuple of ints or None (all axes).
      where: optional boolean mask of the elements to include; the output is ``-inf``
        at masked-out elements.

    Returns:
      An array of ``x``'s shape; all NaN along an axis containing ``+inf``.

    >>> import xform.nn
    >>> xform.nn.log_softmax(xform.numpy.array([0., 0.]))
    Array([-0.6931472, -0.6931472], dtype=float32)
    """
    x, = _util.promote_dtypes("log_softmax", _no_bool(x), to="inexact")
    return _log_softmax(x, _static_axis(axis), where)


@functools.partial(jit, static_argnums=1)
def _log_softmax(x, axis, where):
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_lse = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    out = shifted - shifted_lse
    return out if where is None else jnp.where(where, out, -np.inf)


@composite(static=("axis",))
def softmax(x, axis=-1, where=None):
    r"""Softmax: :math:`e^{x_i} / \sum_j e^{x_j}` along ``axis``; sums to 1 along it.

    Stable for large inputs (the max is subtracted first); the derivative is a custom JVP
    as in JAX.

    Args:
      x: input array.
      axis: int, tuple of ints or None (all axes).
      where: optional boolean mask of the elements to include; the output is 0 at
        masked-out elements.

    Returns:
      An array of ``x``'s shape; all NaN along an axis containing ``+inf``.

    >>> import xform.nn
    >>> xform.nn.softmax(xform.numpy.array([1000., 1000.]))
    Array([0.5, 0.5], dtype=float32)
    """
    x, = _util.promote_dtypes("softmax", _no_bool(x), to="inexact")
    return _softmax(x, _static_axis(axis), where)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _softmax(x, axis, where):
    return _softmax_value(x, axis, where)


@functools.partial(jit, static_argnums=1)
def _softmax_value(x, axis, where):
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    unnormalized = jnp.exp(x_safe - x_max)
    out = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    return out if where is None else jnp.where(where, out, 0)


@_softmax.defjvp
def _softmax_jvp(axis, primals, tangents):
    # d softmax = y * (t - <y, t>) along axis.
    (x, where), (t, _) = primals, tangents
    y = _softmax(x, axis, where)
    return y, y * (t - jnp.sum(y * t, axis, where=where, keepdims=True))


@composite(static=("axis", "algorithm"))
def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm="fast"):
    r"""Standardize to zero mean and unit variance along ``axis``:
    :math:`(x - \mu) / \sqrt{\sigma^2 + \epsilon}`.

    Args:
      x: input array.
      axis: int, tuple of ints or None (all axes).
      mean: optional mean to use instead of ``x.mean(axis, where=where)``.
      variance: optional variance to use instead of computing it.
      epsilon: added to the variance (default 1e-5).
      where: optional boolean mask of the elements used for the mean and variance.
      algorithm: ``"fast"`` (``E[x^2] - E[x]^2``, clipped at 0; JAX's default) or
        ``"stable"`` (``E[(x - E[x])^2]``).

    Raises:
      ValueError: for an unknown ``algorithm``.

    >>> import xform.nn
    >>> xform.nn.standardize(xform.numpy.array([1., 3.]), epsilon=0.)
    Array([-1.,  1.], dtype=float32)
    """
    _util.check_arraylike("standardize", x)
    for name, v in (("mean", mean), ("variance", variance), ("where", where)):
        if v is not None and not _util.is_arraylike(v):
            raise TypeError(f"standardize: {name} must be None or an array, got {type(v)}")
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return _standardize(x, _static_axis(axis), mean, variance, epsilon, where, algorithm)


@functools.partial(jit, static_argnums=(1, 6))
def _standardize(x, axis, mean, variance, epsilon, where, algorithm):
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(x - mean), axis, keepdims=True, where=where)
        else:
            variance = jnp.mean(jnp.square(x), axis, keepdims=True, where=where)
            variance = jnp.clip(variance - jnp.square(mean), 0)
    return (x - mean) * lax.rsqrt(variance + epsilon)


@composite(static=("num_classes", "dtype", "axis"))
def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """One-hot encode integer indices: a new axis of size ``num_classes`` (at ``axis``)
    holding 1 at the index and 0 elsewhere; indices outside ``[0, num_classes)`` give
    all zeros.

    Args:
      x: array of indices (integer; floats are accepted with a DeprecationWarning, as
        in JAX).
      num_classes: the number of classes, a concrete int.
      dtype: the output dtype (default: the default float dtype).
      axis: where the new axis goes in the output (an int; named axes are not supported).

    Raises:
      TypeError: if ``num_classes`` is not a concrete integer or ``axis`` not an int.

    >>> import xform.nn
    >>> xform.nn.one_hot(xform.numpy.array([0, 2, 3]), 3)
    Array([[1., 0., 0.],
           [0., 0., 1.],
           [0., 0., 0.]], dtype=float32)
    """
    if not shape_poly.is_symbolic_dim(num_classes):   # (a symbolic one stays, as JAX)
        num_classes = _util.concrete_or_error(num_classes, "num_classes", "one_hot")
        if num_classes.shape or not np.issubdtype(num_classes.dtype, np.integer):
            raise TypeError(f"jax.nn.one_hot: num_classes must be an integer, got "
                            f"{num_classes!r}")
        num_classes = int(num_classes)
    x = _util.asarray(x, "one_hot")
    if not dtypes.issubdtype(x.aval.dtype, np.integer):
        warnings.warn(f"jax.nn.one_hot input should be integer-typed; got "
                      f"dtype={x.aval.dtype}", DeprecationWarning, stacklevel=2)
    dtype = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    out_axis = _util.canonicalize_axis(axis, len(x.aval.shape) + 1, "one_hot: axis")
    return _one_hot(x, num_classes, dtype, out_axis)


@functools.partial(jit, static_argnums=(1, 2, 3))
def _one_hot(x, num_classes, dtype, axis):
    shape = list(x.aval.shape)
    shape.insert(axis, num_classes)
    classes = lax.broadcasted_iota(x.aval.dtype, tuple(shape), axis)
    return (lax.expand_dims(x, (axis,)) == classes).astype(dtype)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    r"""Scaled dot-product attention :math:`\mathrm{softmax}(QK^T \cdot scale + bias) V`
    per head (the XLA implementation of ``jax.nn.dot_product_attention``).

    Shapes use B batch, T query length, S key length, N query heads, K key/value heads
    (N a multiple of K: grouped-query attention when K < N), H head size.

    Args:
      query: ``(B, T, N, H)`` or ``(T, N, H)``.
      key: ``(B, S, K, H)`` or ``(S, K, H)``.
      value: same shape and dtype as ``key``.
      bias: optional additive bias, 4-D (after adding leading 1s), broadcastable to
        ``(B, N, T, S)``.
      mask: optional boolean mask (True = attend), shaped like ``bias``.
      scale: logits scale (default ``1 / sqrt(H)``).
      is_causal: apply a causal (lower-triangular) mask.
      query_seq_lengths: optional int32 ``(B,)``: query positions past it are padding
        (their outputs are zero).
      key_value_seq_lengths: optional int32 ``(B,)``: key positions past it are ignored.
      local_window_size: ``(left, right)`` or an int: each query attends only to keys
        within that window of its position.
      implementation: None or ``"xla"`` (``"cudnn"`` raises JAX's RuntimeError for a
        machine without cuDNN: xform has no cuDNN kernel).
      return_residual: also return the logsumexp of the logits, shape ``(B, T, N)``.

    Returns:
      An array of ``query``'s shape; with ``return_residual`` a pair.

    Raises:
      ValueError: for mismatched shapes or dtypes, naming the argument.

    >>> import xform.nn, xform.numpy as jnp
    >>> q = k = v = jnp.ones((1, 2, 1, 4))
    >>> xform.nn.dot_product_attention(q, k, v, is_causal=True).shape
    (1, 2, 1, 4)
    """
    if implementation == "cudnn":   # JAX's error where cuDNN is absent (code falls back)
        raise RuntimeError("cuDNN is not detected. (xform has only the 'xla' "
                           "implementation of dot_product_attention)")
    if implementation not in (None, "xla"):
        raise ValueError(f"Unsupported implementation option: {implementation!r} (xform "
                         "has only the 'xla' implementation)")
    out_shape = _util.shape(query)
    query, key, value = (_ensure_4d(t) for t in (query, key, value))
    bias = None if bias is None else _ensure_4d(bias)
    mask = None if mask is None else _ensure_4d(mask)
    q_len = None if query_seq_lengths is None else _util.asarray(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else _util.asarray(key_value_seq_lengths)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    B, S, K, H = key.aval.shape
    _check(value, (B, S, K, H), key.aval.dtype, "value")
    _check(query, (B, -1, -1, H), key.aval.dtype, "query")
    _check(mask, (-1,) * 4, np.dtype(bool), "mask")
    _check(bias, (-1,) * 4, None, "bias")
    _check(q_len, (B,), np.dtype(np.int32), "query_seq_lengths")
    _check(kv_len, (B,), np.dtype(np.int32), "key_value_seq_lengths")
    N = query.aval.shape[2]
    if N % K:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, "
                         f"but got {N} vs {K}")
    for name, t in (("bias", bias), ("mask", mask)):
        if t is not None and t.aval.shape[1] not in (1, N):
            raise ValueError(f"{name} must have 1 or {N} heads (axis 1), got shape "
                             f"{t.aval.shape}")
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    out = _attention(query, key, value, bias, mask, q_len, kv_len, scale, is_causal,
                     local_window_size, return_residual)
    if return_residual:
        return jnp.reshape(out[0], out_shape), jnp.reshape(out[1], out_shape[:-1])
    return jnp.reshape(out, out_shape)


def _ensure_4d(t):
    t = _util.asarray(t)
    nlead = 4 - len(t.aval.shape)
    return lax.expand_dims(t, tuple(range(nlead))) if nlead > 0 else t


def _check(t, shape, dtype, name):
    if t is None:
        return
    tshape = t.aval.shape
    if len(tshape) != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {len(tshape)}")
    if dtype is not None and t.aval.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {t.aval.dtype}")
    if any(want != -1 and got != want for got, want in zip(tshape, shape)):
        raise ValueError(f"{name} shape should be {tuple(shape)}: but got {tshape}")


@functools.partial(jit, static_argnums=(7, 8, 9, 10))
def _attention(query, key, value, bias, mask, q_len, kv_len, scale, is_causal, window,
               return_residual):
    # Heads are grouped as (K, G): query head n = k * G + g shares key/value head k.
    B, T, N, H = query.aval.shape
    S, K = key.aval.shape[1:3]
    G = N // K
    logits_dtype = jnp.promote_types(query.aval.dtype, np.float32)
    logits = jnp.einsum("btkgh,bskh->bkgts", jnp.reshape(query, (B, T, K, G, H)), key,
                        preferred_element_type=logits_dtype)
    logits = logits * jnp.asarray(scale, logits_dtype)
    if bias is not None:
        logits = (logits + _grouped(bias, K, G)).astype(logits_dtype)
    keep = _combined_mask(mask, K, G, T, S, is_causal, window, q_len, kv_len)
    if keep is not None:
        big = min(float(jnp.finfo(logits_dtype).max), float(jnp.finfo(np.float32).max))
        logits = jnp.where(keep, logits, jnp.asarray(-0.7 * big, logits_dtype))
    logits = logits.astype(np.float32)
    probs = softmax(logits, axis=-1).astype(key.aval.dtype)
    out = jnp.reshape(jnp.einsum("bkgts,bskh->btkgh", probs, value), (B, T, N, H))
    if q_len is not None:
        valid = jnp.arange(T)[None, :] < q_len[:, None]
        out = out * valid[:, :, None, None].astype(out.dtype)
    if not return_residual:
        return out
    lse = logsumexp(logits, axis=-1).astype(key.aval.dtype)          # (B, K, G, T)
    return out, lax.stop_gradient(jnp.reshape(jnp.moveaxis(lse, 3, 1), (B, T, N)))


def _grouped(t, K, G):
    """A (B', 1 or N, T', S') bias or mask in the (B, K, G, T, S) layout of the logits."""
    b, n, t_, s = t.aval.shape
    return t[:, :, None] if n == 1 else jnp.reshape(t, (b, K, G, t_, s))


def _combined_mask(mask, K, G, T, S, is_causal, window, q_len, kv_len):
    """The boolean keep-mask broadcastable to (B, K, G, T, S), or None."""
    keep = None if mask is None else _grouped(mask, K, G)

    def both(a, b):
        return b if a is None else jnp.logical_and(a, b)
    q_pos, k_pos = jnp.arange(T)[:, None], jnp.arange(S)[None, :]
    if is_causal:
        keep = both(keep, k_pos <= q_pos)
    if window is not None:
        left, right = window
        keep = both(keep, (q_pos <= k_pos + left) & (q_pos >= k_pos - right))
    if q_len is not None:
        keep = both(keep, (q_pos[None] < q_len[:, None, None])[:, None, None])
    if kv_len is not None:
        keep = both(keep, (k_pos[None] < kv_len[:, None, None])[:, None, None])
    return keep
