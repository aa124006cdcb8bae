"""The reductions and array functions of ``jax.nn``: logsumexp, softmax, log_softmax,
logmeanexp, standardize, one_hot and dot_product_attention, composed from xform.numpy.

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
from xform.core import dtypes
from xform.numpy import _util
from xform.transforms.custom_derivatives import custom_jvp
from xform.transforms.jit import jit
from xform.transforms.vmap import vmap


def _reduction_axes(x, axis):
    """The canonical tuple of reduced axes and the Python count of reduced elements."""
    axes = _util.canonicalize_axes(axis, len(x.aval.shape))
    return axes, math.prod(x.aval.shape[a] for a in axes)


def _static_axis(axis):
    """``axis`` hashable, for a static argument of jit (lists become tuples)."""
    return tuple(axis) if isinstance(axis, list) else axis


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
    x, = _util.promote_dtypes("log_softmax", x, to="inexact")
    return _log_softmax(x, _static_axis(axis), where)


@functools.partial(jit, static_argnums=1)
def _log_softmax(x, axis, where):
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_lse = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    out = shifted - shifted_lse
    return out if where is None else jnp.where(where, out, -np.inf)


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
    x, = _util.promote_dtypes("softmax", x, to="inexact")
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
