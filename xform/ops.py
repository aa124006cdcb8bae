"""``jax.ops``: segment reductions (``segment_sum``, ``segment_prod``, ``segment_max``,
``segment_min``), composed from ``x.at[ids]``'s scatters, so jit, vmap and the gradients
come from the scatter primitives' rules."""
import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import dtypes
from xform.core.trace import concrete_or_raise
from xform.lax.slicing import GatherScatterMode
from xform.numpy import _util
from xform.numpy._indexing import _scatter_update

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _identity(scatter_op, dtype):
    """The value an empty segment holds: the reduction's identity in ``dtype``."""
    if scatter_op is lax.scatter_add:
        return 0
    if scatter_op is lax.scatter_mul:
        return 1
    is_max = scatter_op is lax.scatter_max
    if dtype == np.bool_:
        return not is_max
    if dtypes.is_integer(dtype):
        info = np.iinfo(dtype)
        return info.min if is_max else info.max
    return -np.inf if is_max else np.inf


def _num_segments(name, num_segments, segment_ids):
    if num_segments is None:
        num_segments = jnp.max(segment_ids) + 1
    num_segments = int(np.asarray(concrete_or_raise(
        num_segments, f"{name}() `num_segments` argument.\nIt decides the output shape: "
        "pass it as a static value (e.g. with `static_argnums`) under jit.\n")))
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    return num_segments


def _segment_update(name, data, segment_ids, scatter_op, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, reducer, mode):
    _util.check_arraylike(name, data, segment_ids)
    mode = GatherScatterMode.FILL_OR_DROP if mode is None else mode
    data, segment_ids = jnp.asarray(data), jnp.asarray(segment_ids)
    dtype = data.dtype
    num_segments = _num_segments(name, num_segments, segment_ids)
    if bucket_size is None:
        out = jnp.full((num_segments,) + data.shape[1:], _identity(scatter_op, dtype), dtype)
        return _scatter_update(out, segment_ids, data, scatter_op, indices_are_sorted,
                               unique_indices, mode, False)
    # One row of partial results per bucket of `bucket_size` consecutive entries, reduced
    # at the end: shorter accumulation chains for sums and products.
    num_buckets = -(-segment_ids.size // bucket_size)
    out = jnp.full((num_buckets, num_segments) + data.shape[1:],
                   _identity(scatter_op, dtype), dtype)
    idx = (jnp.arange(segment_ids.shape[0]) // bucket_size, segment_ids[None, :])
    out = _scatter_update(out, idx, data, scatter_op, indices_are_sorted, unique_indices,
                          mode, False)
    return reducer(out, axis=0).astype(dtype)


_DOC = """Computes the {what} within segments of an array (``jax.ops.segment_{op}``).

    Args:
      data: the values to reduce, segmented along their leading axis.
      segment_ids: integer array of ``data.shape[0]`` segment ids (repeats allowed,
        need not be sorted).
      num_segments: the number of segments (output length). Default
        ``max(segment_ids) + 1``, which needs concrete ``segment_ids``: under ``jit``
        pass it as a static value.
      indices_are_sorted: promise that ``segment_ids`` is sorted.
      unique_indices: promise that ``segment_ids`` has no duplicates.
      bucket_size: reduce buckets of this many consecutive entries separately, then
        combine the buckets (numerical stability). Default None: no bucketing.
      mode: a ``lax.GatherScatterMode`` or string for out-of-range ids; the default
        drops ids outside ``[0, num_segments)`` (negative ids included).

    Returns:
      An array of shape ``(num_segments,) + data.shape[1:]`` in ``data``'s dtype; an
      empty segment holds {identity}.

    Raises:
      ConcretizationTypeError: ``num_segments`` is missing or traced under ``jit``.
      ValueError: ``num_segments`` is negative.

    >>> import xform.numpy as jnp
    >>> from xform import ops
    >>> ops.segment_{op}(jnp.arange(6), jnp.array([0, 0, 1, 1, 2, 2]))
    {example}
    """


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    return _segment_update("segment_sum", data, segment_ids, lax.scatter_add, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, jnp.sum, mode)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None):
    return _segment_update("segment_prod", data, segment_ids, lax.scatter_mul, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, jnp.prod, mode)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    return _segment_update("segment_max", data, segment_ids, lax.scatter_max, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, jnp.max, mode)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    return _segment_update("segment_min", data, segment_ids, lax.scatter_min, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, jnp.min, mode)


for _f, _what, _identity_doc, _example in [
        (segment_sum, "sum", "0", "Array([1, 5, 9], dtype=int32)"),
        (segment_prod, "product", "1", "Array([ 0,  6, 20], dtype=int32)"),
        (segment_max, "maximum", "``-inf`` (the dtype's minimum for integers, False for "
                                 "bools)", "Array([1, 3, 5], dtype=int32)"),
        (segment_min, "minimum", "``inf`` (the dtype's maximum for integers, True for "
                                 "bools)", "Array([0, 2, 4], dtype=int32)")]:
    _f.__doc__ = _DOC.format(what=_what, op=_f.__name__[len("segment_"):],
                             identity=_identity_doc, example=_example)
del _f, _what, _identity_doc, _example
