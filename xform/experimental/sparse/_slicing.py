"""BCOO slicing and layout: ``bcoo_slice``, ``bcoo_dynamic_slice``, ``bcoo_squeeze``,
``bcoo_rev``, ``bcoo_gather`` (a vmap of dynamic slices, as JAX's) and
``bcoo_update_layout``. Batch and dense axes slice the buffers; sparse axes keep the
stored elements whose indices fall in the window (shifted, the others become padding),
then duplicates are summed when ``nse`` exceeds the window's size, as JAX does."""
import math
import warnings
from functools import partial

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.experimental.sparse._bcoo import BCOO
from xform.experimental.sparse._ops import bcoo_sum_duplicates, bcoo_transpose
from xform.experimental.sparse._ops2 import bcoo_reshape
from xform.experimental.sparse._util import (SparseEfficiencyError, SparseEfficiencyWarning,
                                             nfold_vmap, validate_bcoo)
from xform.transforms.jit import ShapeDtypeStruct, eval_shape, jit
from xform.transforms.vmap import vmap


def _split(seq, n_batch, n_sparse):
    seq = tuple(seq)
    return seq[:n_batch], seq[n_batch:n_batch + n_sparse], seq[n_batch + n_sparse:]


def _window(data, indices, starts, sizes, strides, new_shape):
    """Keep the stored elements whose sparse indices lie in the window ``starts +
    strides * range(sizes)``: shift them into it, make the others padding; sum
    duplicates down to the window's size if ``nse`` exceeds it."""
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    if not n_sparse:
        return data, indices
    col = lambda v: lax.expand_dims(jnp.asarray(v, indices.dtype), tuple(range(n_batch + 1)))
    starts, strides, sizes = col(starts), col(strides), col(sizes)
    keep = jnp.all((indices >= starts) & (indices < starts + strides * (sizes - 1) + 1)
                   & ((indices - starts) % strides == 0), -1, keepdims=True)
    indices = jnp.where(keep, (indices - starts) // strides, sizes)
    keep = lax.expand_dims(keep[..., 0], tuple(range(n_batch + 1, data.ndim)))
    data = jnp.where(keep, data, jnp.zeros((), data.dtype))
    new_nse = math.prod(_split(new_shape, n_batch, n_sparse)[1])
    if indices.shape[-2] > new_nse:
        out = bcoo_sum_duplicates(BCOO((data, indices), shape=new_shape), nse=new_nse)
        data, indices = out.data, out.indices
    return data, indices


def bcoo_slice(mat, *, start_indices, limit_indices, strides=None):
    """Sparse ``lax.slice``.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCOO.fromdense(jnp.array([[0., 1., 2.], [3., 0., 4.]]))
    >>> sparse.bcoo_slice(M, start_indices=(0, 1), limit_indices=(2, 3)).todense().tolist()
    [[1.0, 2.0], [0.0, 4.0]]
    """
    if not isinstance(mat, BCOO):
        raise TypeError(f"bcoo_slice: input should be BCOO array, got type(mat)={type(mat)}")
    start_indices = [int(i) for i in start_indices]
    limit_indices = [int(i) for i in limit_indices]
    strides = [1] * mat.ndim if strides is None else [int(i) for i in strides]
    if not len(start_indices) == len(limit_indices) == mat.ndim:
        raise ValueError(f"bcoo_slice: indices must have size mat.ndim={mat.ndim}")
    if len(strides) != mat.ndim:
        raise ValueError(f"len(strides) = {len(strides)}; expected {mat.ndim}")
    if any(s <= 0 for s in strides):
        raise ValueError(f"strides must be a sequence of positive integers; got {strides}")
    if not all(0 <= s <= e <= n for s, e, n in zip(start_indices, limit_indices, mat.shape)):
        raise ValueError(f"bcoo_slice: invalid indices. Got start_indices={start_indices}, "
                         f"limit_indices={limit_indices} and shape={mat.shape}")
    new_shape = tuple((e - s + st - 1) // st
                      for s, e, st in zip(start_indices, limit_indices, strides))
    data, indices = _slice_impl(mat.data, mat.indices, mat.shape, tuple(start_indices),
                                tuple(limit_indices), tuple(strides), new_shape)
    return BCOO((data, indices), shape=new_shape)


@partial(jit, static_argnums=(2, 3, 4, 5, 6))
def _slice_impl(data, indices, shape, starts, limits, strides, new_shape):
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    sl = lambda buf, i: (slice(None) if buf.shape[i] != shape[i]   # broadcast batch dim
                         else slice(starts[i], limits[i], strides[i]))
    dense = [slice(s, e, st) for s, e, st in zip(*(_split(v, n_batch, n_sparse)[2]
                                                   for v in (starts, limits, strides)))]
    data = data[(*(sl(data, i) for i in range(n_batch)), slice(None), *dense)]
    indices = indices[tuple(sl(indices, i) for i in range(n_batch))]
    sparse = lambda v: _split(v, n_batch, n_sparse)[1]
    return _window(data, indices, sparse(starts), sparse(new_shape), sparse(strides),
                   new_shape)


def bcoo_dynamic_slice(mat, start_indices, slice_sizes):
    """Sparse ``lax.dynamic_slice``: ``start_indices`` may be traced (clamped into
    bounds, as in ``lax.dynamic_slice``), ``slice_sizes`` are static."""
    slice_sizes = tuple(int(i) for i in slice_sizes)
    eval_shape(lambda x, *i: lax.dynamic_slice(x, i, slice_sizes),   # lax's checks
               ShapeDtypeStruct(mat.shape, mat.dtype), *start_indices)
    if not isinstance(mat, BCOO):
        raise TypeError(f"bcoo_slice: input should be BCOO array, got type(mat)={type(mat)}")
    start_indices = [jnp.asarray(i) for i in start_indices]
    validate_bcoo(mat.data, mat.indices, mat.shape)
    data, indices = _dynamic_slice_impl(mat.data, mat.indices, *start_indices,
                                        shape=mat.shape, slice_sizes=slice_sizes)
    return BCOO((data, indices), shape=slice_sizes)


@partial(jit, static_argnames=("shape", "slice_sizes"))
def _dynamic_slice_impl(data, indices, *starts, shape, slice_sizes):
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    zero = jnp.zeros((), starts[0].dtype if starts else np.int32)
    starts = [s.astype(zero.dtype) for s in starts]
    s_batch, s_sparse, s_dense = _split(starts, n_batch, n_sparse)
    z_batch, z_sparse, z_dense = _split(slice_sizes, n_batch, n_sparse)

    def batch_window(buf):   # broadcast (size-1) batch dims stay whole
        b = [buf.shape[i] != shape[i] for i in range(n_batch)]
        return ([zero if bi else s for bi, s in zip(b, s_batch)],
                [1 if bi else z for bi, z in zip(b, z_batch)])
    (db, dz), (ib, iz) = batch_window(data), batch_window(indices)
    data = lax.dynamic_slice(data, [*db, zero, *s_dense], [*dz, data.shape[n_batch], *z_dense])
    indices = lax.dynamic_slice(indices, [*ib, zero, zero], [*iz, *indices.shape[-2:]])
    if not n_sparse:
        return data, indices
    sparse_shape = jnp.array(_split(shape, n_batch, n_sparse)[1], indices.dtype)
    sizes = jnp.array(z_sparse, indices.dtype)
    s = jnp.stack(s_sparse).astype(indices.dtype)
    s = jnp.clip(jnp.where(s < 0, s + sparse_shape, s), 0, sparse_shape - sizes)
    return _window(data, indices, s, z_sparse, (1,) * n_sparse, slice_sizes)


def bcoo_squeeze(arr, *, dimensions):
    """Sparse ``lax.squeeze`` of size-1 ``dimensions`` (a sparse one drops its index
    column)."""
    dimensions = tuple(int(d) % arr.ndim if -arr.ndim <= d < arr.ndim else int(d)
                       for d in dimensions)
    if any(not 0 <= d < arr.ndim for d in dimensions):
        raise ValueError(f"squeeze dimensions {dimensions} out of range for shape {arr.shape}")
    if any(arr.shape[d] != 1 for d in dimensions):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to "
                         f"one, got shape={arr.shape} and dimensions={dimensions}")
    nb, ns = arr.n_batch, arr.n_sparse
    batch_dims = tuple(d for d in dimensions if d < nb)
    keep = np.array([i for i in range(ns) if i + nb not in dimensions], int)
    dense_dims = tuple(d - ns + 1 for d in dimensions if d >= nb + ns)
    indices = arr.indices[..., keep] if len(keep) < ns else arr.indices
    return BCOO((lax.squeeze(arr.data, batch_dims + dense_dims),
                 lax.squeeze(indices, batch_dims)),
                shape=tuple(s for i, s in enumerate(arr.shape) if i not in dimensions),
                indices_sorted=arr.indices_sorted, unique_indices=arr.unique_indices)


def bcoo_rev(operand, dimensions):
    """Sparse ``lax.rev``: batch and dense axes reverse the buffers, sparse axes map
    index ``i`` to ``n - 1 - i`` (padding stays out of bounds)."""
    dimensions = tuple(int(d) for d in dimensions)
    eval_shape(lambda x: lax.rev(x, dimensions), ShapeDtypeStruct(operand.shape, operand.dtype))
    nb, ns = operand.n_batch, operand.n_sparse
    batch = [d for d in dimensions if d < nb]
    sparse = [d - nb for d in dimensions if nb <= d < nb + ns]
    dense = [d + 1 - ns for d in dimensions if d >= nb + ns]
    data, indices = operand.data, operand.indices
    if batch:
        indices = lax.rev(indices, batch)
    if batch or dense:
        data = lax.rev(data, batch + dense)
    if sparse:
        indices = _rev_indices(indices, operand.shape[nb:nb + ns], tuple(sparse))
    return BCOO((data, indices), shape=operand.shape)


@partial(jit, static_argnums=(1, 2))
def _rev_indices(indices, sparse_shape, dims):
    n = jnp.array(sparse_shape, indices.dtype)
    flip = np.isin(np.arange(len(sparse_shape)), dims)
    new = jnp.where(flip, n - 1 - indices, indices)
    return jnp.where(new < 0, n, new)


def bcoo_gather(operand, start_indices, dimension_numbers, slice_sizes, *,
                unique_indices=False, indices_are_sorted=False, mode=None, fill_value=None):
    """Sparse ``lax.gather`` (``mode`` 'promise_in_bounds' only, as JAX's): a vmap of
    ``bcoo_dynamic_slice`` over the start indices, then squeeze, reshape, transpose."""
    validate_bcoo(operand.data, operand.indices, operand.shape)
    parsed = lax.GatherScatterMode.from_any(mode)
    if parsed != lax.GatherScatterMode.PROMISE_IN_BOUNDS:
        raise NotImplementedError(f"bcoo_gather: mode={mode} not yet supported.")
    start_indices = jnp.asarray(start_indices)
    out = eval_shape(lambda x, i: lax.gather(
        x, i, dimension_numbers, tuple(slice_sizes), unique_indices=unique_indices,
        indices_are_sorted=indices_are_sorted, mode=mode, fill_value=fill_value),
        ShapeDtypeStruct(operand.shape, operand.dtype),
        ShapeDtypeStruct(start_indices.shape, start_indices.dtype))
    offset_dims = tuple(dimension_numbers.offset_dims)
    full_starts = [jnp.zeros((), start_indices.dtype)] * operand.ndim
    in_axes = [None] * operand.ndim
    full_sizes = list(operand.shape)
    for i, j in enumerate(dimension_numbers.start_index_map):
        full_starts[j] = start_indices[..., i].ravel()
        full_sizes[j] = slice_sizes[j]
        in_axes[j] = 0

    def slice_one(*starts):
        s = bcoo_dynamic_slice(operand, starts, slice_sizes=full_sizes)
        return bcoo_squeeze(s, dimensions=dimension_numbers.collapsed_slice_dims)
    result = vmap(slice_one, in_axes=tuple(in_axes))(*full_starts)
    result = bcoo_reshape(result, new_sizes=(*start_indices.shape[:-1], *result.shape[1:]))
    if result.shape:   # offset dims into place
        batch_dims = tuple(d for d in range(len(out.shape)) if d not in offset_dims)
        perm = np.zeros(result.ndim, int)
        perm[np.array(batch_dims + offset_dims, int)] = np.arange(result.ndim)
        if set(perm[:len(batch_dims)]) != set(range(len(batch_dims))):
            result = bcoo_update_layout(result, n_batch=0)
        result = bcoo_transpose(result, permutation=tuple(int(p) for p in perm))
    return result.reshape(out.shape).astype(out.dtype)


def bcoo_update_layout(mat, *, n_batch=None, n_dense=None, on_inefficient="error"):
    """``mat`` stored with ``n_batch`` batch and ``n_dense`` dense dimensions.

    Args:
      mat: a BCOO.
      n_batch, n_dense: the new layout (None keeps ``mat``'s).
      on_inefficient: 'error' (raise :class:`SparseEfficiencyError`), 'warn' or None,
        for a change that turns sparse dims of size > 1 into batch or dense ones (which
        stores zeros explicitly).

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCOO.fromdense(jnp.eye(3), n_batch=1)
    >>> sparse.bcoo_update_layout(M, n_batch=0)
    BCOO(float32[3, 3], nse=3)
    """
    n_batch = mat.n_batch if n_batch is None else int(n_batch)
    n_dense = mat.n_dense if n_dense is None else int(n_dense)
    if (n_batch, n_dense) == (mat.n_batch, mat.n_dense):
        return mat
    if on_inefficient not in ("error", "warn", None):
        raise ValueError(f"on_inefficent={on_inefficient!r}; expected one of "
                         "['error', 'warn', None].")
    if n_batch < 0:
        raise ValueError(f"n_batch must be non-negative; got {n_batch}")
    if n_dense < 0:
        raise ValueError(f"n_dense must be non-negative; got {n_dense}")
    if mat.ndim - n_batch - n_dense < 0:
        raise ValueError(f"sum of n_batch={n_batch} and n_dense={n_dense} cannot be larger "
                         f"than mat.ndim={mat.ndim}.")

    def inefficient(msg):
        if on_inefficient == "error":
            raise SparseEfficiencyError(msg + " To disable this error, set the "
                                        "on_inefficient argument of bcoo_update_layout to "
                                        "'warn' or None.")
        if on_inefficient == "warn":
            warnings.warn(msg + " To disable this warning, set the on_inefficient argument "
                          "of bcoo_update_layout to None.", SparseEfficiencyWarning)
    if n_dense > mat.n_dense and any(d > 1 for d in mat.shape[-n_dense:mat.ndim - mat.n_dense]):
        inefficient(f"For matrix of shape {mat.shape}, increasing n_dense from "
                    f"{mat.n_dense} to {n_dense} results in inefficient storage.")
    if n_batch > mat.n_batch and any(d > 1 for d in mat.shape[mat.n_batch:n_batch]):
        inefficient(f"For matrix of shape {mat.shape}, increasing n_batch from "
                    f"{mat.n_batch} to {n_batch} results in inefficient storage.")
    data, indices = _update_layout_impl(mat.data, mat.indices, mat.shape, n_batch, n_dense)
    return BCOO((data, indices), shape=mat.shape)


@partial(jit, static_argnums=(2, 3, 4))
def _update_layout_impl(data, indices, shape, n_batch, n_dense):
    """JAX's four steps: dense -> sparse, batch -> sparse, sparse -> dense, sparse ->
    batch; each moves coordinates between index columns and buffer axes."""
    cur_batch, cur_dense = indices.ndim - 2, data.ndim - indices.ndim + 1
    grid = lambda sizes, dt: [m.ravel() for m in jnp.meshgrid(
        *(jnp.arange(s, dtype=dt) for s in sizes), indexing="ij")]
    if n_dense < cur_dense:   # trailing dense axes become index columns
        n = cur_dense - n_dense

        def dense_to_sparse(d, i):
            new_d = d.reshape(math.prod(d.shape[:n]), *d.shape[n:])
            return new_d, jnp.column_stack([jnp.broadcast_to(i, (new_d.shape[0], i.size)),
                                            *grid(d.shape[:n], i.dtype)])
        data, indices = nfold_vmap(dense_to_sparse, cur_batch + 1)(data, indices)
        merge = lambda x: x.reshape(*x.shape[:cur_batch],
                                    math.prod(x.shape[cur_batch:cur_batch + 2]),
                                    *x.shape[cur_batch + 2:])
        data, indices, cur_dense = merge(data), merge(indices), n_dense
    if n_batch < cur_batch:   # trailing batch axes become leading index columns
        n = cur_batch - n_batch

        def batch_to_sparse(d, i):
            new_d = d.reshape(math.prod(d.shape[:n + 1]), *d.shape[n + 1:])
            new_i = i.reshape(math.prod(i.shape[:n + 1]), *i.shape[n + 1:])
            return new_d, jnp.column_stack((*grid((*i.shape[:n], i.shape[-2]), i.dtype)[:-1],
                                            new_i))
        data, indices = nfold_vmap(batch_to_sparse, n_batch)(data, indices)
        cur_batch = n_batch
    if n_dense > cur_dense:   # trailing index columns become dense axes
        n = n_dense - cur_dense

        def sparse_to_dense(d, i):
            new_d = jnp.zeros(shape[len(shape) - n_dense:], d.dtype).at[tuple(i[-n:])].set(d)
            return new_d, i[:-n]
        data, indices = nfold_vmap(sparse_to_dense, cur_batch + 1)(data, indices)
    if n_batch > cur_batch:   # leading index columns become batch axes
        n = n_batch - cur_batch

        def sparse_to_batch(d, i):
            nse = i.shape[-2]
            idx = tuple(i[:, j] for j in range(n)) + (jnp.arange(nse),)
            new_i = jnp.broadcast_to(i[:, n:], (*shape[cur_batch:n_batch], nse, i.shape[-1] - n))
            new_d = jnp.zeros((*shape[cur_batch:n_batch], nse, *d.shape[d.ndim - n_dense:]),
                              d.dtype).at[idx].set(d)
            return new_d, new_i
        data, indices = nfold_vmap(sparse_to_batch, cur_batch)(data, indices)
    return data, indices
