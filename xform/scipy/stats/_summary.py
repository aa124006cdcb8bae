"""Summary statistics of ``jax.scipy.stats``: ``mode``, ``rankdata``, ``sem``.

JIT-friendly as JAX's: fixed-size ``unique``/``nonzero`` and no data-dependent shapes, so
``nan_policy`` is ``"propagate"`` (``sem`` also takes ``"omit"``)."""
import functools
import math
from typing import NamedTuple

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.numpy import _util
from xform.transforms.jit import jit
from xform.transforms.vmap import vmap

_NAN_POLICIES = ("propagate", "omit", "raise")


class ModeResult(NamedTuple):
    mode: jnp.ndarray
    count: jnp.ndarray


def _check_nan_policy(name, nan_policy):
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                         "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise NotImplementedError(f"Logic for `nan_policy` of {nan_policy} is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError(
            f"In order to best JIT compile `{name}`, we cannot know whether `x` contains "
            f"nans. Please check if nans exist in `x` outside of the `{name}` function.")


@functools.partial(jit, static_argnames=("axis", "nan_policy", "keepdims"))
def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most common value along ``axis`` (the smallest on ties) and its count.

    Args:
      a: array-like.
      axis: the axis to reduce, or ``None`` for the flattened array.
      nan_policy: only ``"propagate"`` (``"omit"``/``"raise"`` raise NotImplementedError).
      keepdims: keep the reduced axis with size 1.

    Returns:
      ``ModeResult(mode, count)``.

    >>> import xform.numpy as jnp
    >>> mode(jnp.array([2, 4, 1, 1, 3, 4, 4]))
    ModeResult(mode=Array(4, dtype=int32), count=Array(3, dtype=int32))
    """
    _util.check_arraylike("mode", a)
    x = jnp.atleast_1d(a)
    _check_nan_policy("mode", nan_policy)
    if axis is not None:
        axis = _util.canonicalize_axis(axis, x.ndim)
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x, axis = x.ravel(), 0
    else:
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape)
                          if keepdims or i != axis)

    def one(col):
        if col.size == 0:
            nan = jnp.array(np.nan, dtype=dtypes.default_float_dtype())
            return nan, jnp.array(0, dtype=nan.dtype)
        vals, counts = jnp.unique(col, return_counts=True, size=col.size)
        return vals[jnp.argmax(counts)], counts.max()

    x = jnp.moveaxis(x, axis, 0)
    x = x.reshape(x.shape[0], math.prod(x.shape[1:]))
    vals, counts = vmap(one, in_axes=1)(x)
    return ModeResult(vals.reshape(out_shape), counts.reshape(out_shape))


@functools.partial(jit, static_argnames=("method", "axis", "nan_policy"))
def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """Ranks of the data, from 1; ``method`` settles ties.

    Args:
      a: array-like.
      method: ``"average"``, ``"min"``, ``"max"``, ``"dense"`` or ``"ordinal"``.
      axis: rank along this axis; ``None`` ranks the flattened array.
      nan_policy: only ``"propagate"``: any NaN makes every rank NaN.

    Returns:
      The ranks in the default float dtype.

    >>> import xform.numpy as jnp
    >>> rankdata(jnp.array([1, 3, 2, 3]))
    Array([1. , 3.5, 2. , 3.5], dtype=float32)
    """
    _util.check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    if axis is not None:
        return jnp.apply_along_axis(rankdata, axis, a, method)
    a = jnp.ravel(a)
    out_dtype = dtypes.default_float_dtype()

    def ranks(a):
        arr, sorter = lax.sort_key_val(a, jnp.arange(a.size))
        inv = jnp.empty_like(sorter).at[sorter].set(jnp.arange(a.size, dtype=sorter.dtype))
        if method == "ordinal":
            return (inv + 1).astype(out_dtype)
        first = jnp.concatenate([jnp.array([True]), arr[1:] != arr[:-1]])
        dense = first.cumsum()[inv]
        if method == "dense":
            return dense.astype(out_dtype)
        # count[k]: how many values are below the k-th distinct one
        count = jnp.nonzero(first, size=arr.size + 1,
                            fill_value=first.size)[0].astype(out_dtype)
        if method == "max":
            return count[dense]
        if method == "min":
            return count[dense - 1] + 1
        return .5 * (count[dense] + count[dense - 1] + 1)

    return lax.cond(jnp.any(jnp.isnan(a)), lambda a: jnp.full_like(a, np.nan, out_dtype),
                    ranks, a)


# NB ddof is static here (JAX traces it): xform's jnp.std takes only a static ddof
@functools.partial(jit, static_argnames=("axis", "ddof", "nan_policy", "keepdims"))
def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """Standard error of the mean: ``std(a, ddof) / sqrt(n)`` along ``axis``.

    Args:
      a: array-like.
      axis: the axis to reduce, or ``None`` for all.
      ddof: delta degrees of freedom of the standard deviation.
      nan_policy: ``"propagate"`` or ``"omit"`` (NaNs left out of ``std`` and ``n``).
      keepdims: keep the reduced axis with size 1.

    >>> import xform.numpy as jnp
    >>> sem(jnp.array([1., 2., 3., 4.]))
    Array(0.64549726, dtype=float32)
    """
    b, = _util.promote_args("sem", a, to="inexact")
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return b.std(axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(size).astype(b.dtype)
    if nan_policy == "omit":
        count = (~jnp.isnan(b)).sum(axis, keepdims=keepdims)
        return (jnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims)
                / jnp.sqrt(count).astype(b.dtype))
    raise ValueError(f"{nan_policy} is not supported")
