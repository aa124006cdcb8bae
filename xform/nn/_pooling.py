"""Pooling functions of ``flax.linen`` (pool, max_pool, avg_pool, min_pool): windowed
reductions over the spatial axes of channels-last inputs, built on ``lax.reduce_window``."""
import numpy as np

from xform import lax
from xform import numpy as jnp


def pool(inputs, init, reduce_fn, window_shape, strides, padding):
    """Reduce every window of the spatial axes of ``inputs`` with ``reduce_fn``.

    Inputs are channels-last: ``(*batch, *spatial, features)`` with one spatial axis per
    entry of ``window_shape``; an input with no batch axis is pooled as a batch of one.

    Args:
      inputs: array ``(*batch, *window_dims, features)``.
      init: the reduction's initial value (its identity: 0 for ``lax.add``, ``-inf`` for
        ``lax.max``, ``inf`` for ``lax.min``).
      reduce_fn: ``lax.add``, ``lax.max`` or ``lax.min``.
      window_shape: the window size per spatial axis.
      strides: the step per spatial axis (None: all 1).
      padding: ``'SAME'``, ``'VALID'`` or one ``(low, high)`` pair per spatial axis.

    Returns:
      The reduction of each window, channels-last.

    Raises:
      ValueError: if ``strides`` or ``padding`` do not match ``window_shape``, or the
        input has too few axes.

    >>> import xform.numpy as jnp, xform.nn as nn, xform.lax as lax
    >>> nn.pool(jnp.ones((1, 4, 1)), 0., lax.add, (2,), (2,), 'VALID')[0, :, 0]
    Array([2., 2.], dtype=float32)
    """
    window_shape = tuple(window_shape)
    strides = tuple(strides) if strides else (1,) * len(window_shape)
    ndim = jnp.ndim(inputs)
    if len(strides) != len(window_shape):
        raise ValueError(f"pool: len(strides)={len(strides)} must equal "
                         f"len(window_shape)={len(window_shape)} ({strides} vs "
                         f"{window_shape})")
    num_batch = ndim - (len(window_shape) + 1)
    if num_batch < 0:
        raise ValueError(f"pool: inputs of shape {jnp.shape(inputs)} have too few axes "
                         f"for window_shape {window_shape} (need *batch, "
                         f"{len(window_shape)} spatial axes, features)")
    single = num_batch == 0
    if single:
        inputs, num_batch = inputs[None], 1
    dims = (1,) * num_batch + window_shape + (1,)
    steps = (1,) * num_batch + strides + (1,)
    if not isinstance(padding, str):
        padding = tuple(tuple(p) for p in padding)
        if len(padding) != len(window_shape) or any(len(p) != 2 for p in padding):
            raise ValueError(f"pool: padding {padding} must be one (low, high) pair per "
                             f"spatial axis of window_shape {window_shape}")
        padding = ((0, 0),) * num_batch + padding + ((0, 0),)
    y = lax.reduce_window(inputs, init, reduce_fn, dims, steps, padding)
    return y[0] if single else y


def avg_pool(inputs, window_shape, strides=None, padding="VALID", count_include_pad=True):
    """Average over each window of the spatial axes (see :func:`pool` for the layout).

    Args:
      inputs: array ``(*batch, *window_dims, features)``.
      window_shape: the window size per spatial axis.
      strides: the step per spatial axis (default 1).
      padding: ``'SAME'``, ``'VALID'`` (default) or ``(low, high)`` pairs.
      count_include_pad: divide by the full window size (True, the default) or by the
        number of non-padding elements in each window.

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> nn.avg_pool(jnp.arange(4.).reshape(1, 4, 1), (2,), (2,))[0, :, 0]
    Array([0.5, 2.5], dtype=float32)
    """
    y = pool(inputs, 0.0, lax.add, window_shape, strides, padding)
    if count_include_pad:   # NumPy's int64 product, as Flax: integer inputs give float64 under x64
        return y / np.prod(window_shape)
    # Count the real elements per window by pooling ones of the input's spatial shape.
    shape = jnp.shape(inputs)[:-1] + (1,)
    if len(shape) - 2 == len(window_shape):
        shape = (1,) + shape[1:]
    return y / pool(jnp.ones(shape), 0.0, lax.add, window_shape, strides, padding)


def max_pool(inputs, window_shape, strides=None, padding="VALID"):
    """Maximum over each window of the spatial axes (see :func:`pool`).

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> nn.max_pool(jnp.arange(4.).reshape(1, 4, 1), (2,), (2,))[0, :, 0]
    Array([1., 3.], dtype=float32)
    """
    return pool(inputs, -np.inf, lax.max, window_shape, strides, padding)


def min_pool(inputs, window_shape, strides=None, padding="VALID"):
    """Minimum over each window of the spatial axes (see :func:`pool`).

    >>> import xform.numpy as jnp, xform.nn as nn
    >>> nn.min_pool(jnp.arange(4.).reshape(1, 4, 1), (2,), (2,))[0, :, 0]
    Array([0., 2.], dtype=float32)
    """
    return pool(inputs, np.inf, lax.min, window_shape, strides, padding)

