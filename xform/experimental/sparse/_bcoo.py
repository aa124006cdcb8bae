"""The BCOO class (a pytree of ``data`` and ``indices`` with a static ``shape``) and the
conversions between dense and sparse: todense (a scatter-add), extract (a gather),
fromdense (nonzero + extract), the empty BCOO and eye. The kernels are jitted functions of the
buffers (static layout), so eager use compiles one program per op as JAX's primitives
do, and under an outer trace they inline as a call.

Layout, as JAX's: ``data`` is ``[*batch, nse, *dense]`` and ``indices`` is
``[*batch, nse, n_sparse]``; a batch dimension of size 1 broadcasts; an index equal to
the dimension's size (the padding fromdense writes) is out of bounds and dropped by
todense, so padding contributes nothing.
"""
from functools import partial

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core.pytree_registry import register_pytree_node_class
from xform.core.trace import Tracer
from xform.experimental.sparse._util import (JAXSparse, concrete_int, nfold_vmap,
                                             validate_bcoo, validate_indices)
from xform.transforms.jit import jit


@register_pytree_node_class
class BCOO(JAXSparse):
    """Batched coordinate (BCOO) sparse array, as ``jax.experimental.sparse.BCOO``.

    Args:
      args: ``(data, indices)``: ``data`` of shape ``[*batch, nse, *dense]`` holds the
        stored values, ``indices`` of shape ``[*batch, nse, n_sparse]`` their sparse
        coordinates. Duplicate indices are summed.
      shape: the shape of the dense array represented.
      indices_sorted, unique_indices: facts about ``indices`` the caller vouches for.

    NB: a pytree whose static part is ``shape``. JAX registers BCOO with vmap as a
    vmappable type; xform's vmap has no such hook, so unflattening reconciles ``shape``
    with the leaves instead: leading batch dimensions that vmap removed (in_axes=0) or
    added (out_axes=0) are dropped from or added to ``shape``. Map BCOOs over axis 0.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCOO.fromdense(jnp.array([[0., 2., 0.], [1., 0., 4.]]))
    >>> M
    BCOO(float32[2, 3], nse=3)
    >>> M.indices.tolist()
    [[0, 1], [1, 0], [1, 2]]
    """

    def __init__(self, args, *, shape, indices_sorted=False, unique_indices=False):
        self.data, self.indices = map(jnp.asarray, args)
        self.shape = tuple(int(s) for s in shape)
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices
        validate_bcoo(self.data, self.indices, self.shape)

    nse = property(lambda self: self.indices.shape[-2])
    n_batch = property(lambda self: self.indices.ndim - 2)
    n_sparse = property(lambda self: self.indices.shape[-1])
    n_dense = property(lambda self: self.data.ndim - 1 - self.n_batch)
    _bufs = property(lambda self: (self.data, self.indices))
    _info = property(lambda self: dict(shape=self.shape, indices_sorted=self.indices_sorted,
                                       unique_indices=self.unique_indices))

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32, n_dense=0, n_batch=0):
        """BCOO of a dense array (see :func:`bcoo_fromdense`)."""
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    def todense(self):
        """The dense array (duplicates summed, out-of-bounds entries dropped)."""
        return bcoo_todense(self)

    def tree_flatten(self):
        return (self.data, self.indices), (self.shape, self.indices_sorted,
                                           self.unique_indices)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.data, obj.indices = children
        shape, obj.indices_sorted, obj.unique_indices = aux
        obj.shape = _reconcile_shape(shape, obj.data, obj.indices)
        return obj


def _reconcile_shape(shape, data, indices):
    """``shape`` adjusted for the leading batch dims vmap removed from or added to the
    leaves (see the BCOO NB); unchanged when the leaves are not arrays."""
    try:
        expected = indices.shape[-1] + data.ndim - 1
        if indices.ndim < 2:
            if isinstance(indices, Tracer):
                raise ValueError(
                    f"Cannot map in_axis=0 for BCOO array with n_batch=0 (shape {shape}). "
                    "in_axes for batched BCOO operations must correspond to a batch "
                    "dimension: create the BCOO with n_batch >= 1.")
            return shape
    except (AttributeError, TypeError, IndexError):
        return shape
    k = len(shape) - expected
    if k > 0:
        return shape[k:]
    if k < 0:
        added = tuple(max(a, b) for a, b in zip(data.shape[:-k], indices.shape[:-k]))
        return added + shape
    return shape


# ---- todense / extract ----

def _batch_grids(shape, idx_batch_shape):
    """Index arrays broadcasting over the batch dims: for the (possibly size-1) batch
    dims of indices/data, and for the full batch dims of the dense array."""
    n_batch = len(idx_batch_shape)
    idx_grid = tuple(np.meshgrid(*(np.zeros(s, int) if i_s == 1 else np.arange(s)
                                   for s, i_s in zip(shape[:n_batch], idx_batch_shape)),
                                 indexing="ij", sparse=True)) if n_batch else ()
    batch_ind = tuple(np.meshgrid(*(np.arange(s) for s in shape[:n_batch]), np.arange(1),
                                  indexing="ij", sparse=True))[:-1]
    return idx_grid, batch_ind


@partial(jit, static_argnames=("shape",))
def _todense(data, indices, shape):
    n_batch, n_sparse, _, _ = validate_bcoo(data, indices, shape)
    idx_grid, batch_ind = _batch_grids(shape, indices.shape[:n_batch])
    sparse_ind = tuple(indices[idx_grid + (slice(None), i)] for i in range(n_sparse))
    if not sparse_ind:
        data = data.sum(n_batch, keepdims=bool(batch_ind), dtype=data.dtype)
    return jnp.zeros(shape, data.dtype).at[batch_ind + sparse_ind].add(data)


def bcoo_todense(mat):
    """The dense array a BCOO represents: a scatter-add, so duplicates are summed and
    out-of-bounds (padding) indices are dropped.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCOO((jnp.array([1., 2.]), jnp.array([[0], [0]])), shape=(2,))
    >>> sparse.bcoo_todense(M).tolist()
    [3.0, 0.0]
    """
    return _todense(mat.data, mat.indices, mat.shape)


def _first_occurrence_mask(indices):
    """[*batch, nse] bool: True where an index row differs from every earlier row."""
    def unbatched(ind):
        same = jnp.all(ind[:, None, :] == ind[None, :, :], -1)
        earlier = jnp.tril(same, k=-1)
        return ~jnp.any(earlier, 1)
    return nfold_vmap(unbatched, indices.ndim - 2, broadcasted=False)(indices)


@partial(jit, static_argnames=("assume_unique",))
def _extract(indices, arr, assume_unique=True):
    props = validate_indices(indices, arr.shape)
    idx_grid, batch_ind = _batch_grids(arr.shape, indices.shape[:props.n_batch])
    sparse_ind = tuple(indices[idx_grid + (slice(None), i)] for i in range(props.n_sparse))
    if not sparse_ind + batch_ind:
        result = arr[None]
    else:
        result = arr.at[batch_ind + sparse_ind].get(mode="fill", fill_value=0)
    if props.n_sparse == 0 and props.nse != 1:
        if assume_unique:
            shape = result.shape[:props.n_batch] + (props.nse,) + result.shape[props.n_batch + 1:]
            result = lax.broadcast_in_dim(result, shape, tuple(range(result.ndim)))
        else:   # every index is the same (empty) one: its value sits at position 0
            pad = [(0, 0)] * result.ndim
            pad[props.n_batch] = (0, props.nse - 1)
            result = jnp.pad(result, pad)
    elif not assume_unique:   # duplicates: the value at the first occurrence, zeros after
        first = _first_occurrence_mask(indices)
        first = first.reshape(first.shape + (1,) * (result.ndim - first.ndim))
        result = jnp.where(first, result, jnp.zeros((), result.dtype))
    return result


def bcoo_extract(sparr, arr, *, assume_unique=None):
    """A BCOO with ``sparr``'s indices holding ``arr``'s values at them.

    Args:
      sparr: the BCOO whose sparsity pattern is used.
      arr: a dense array of shape ``sparr.shape``.
      assume_unique: if False, duplicate indices get the value once (at their first
        occurrence) and zero elsewhere; defaults to ``sparr.unique_indices``.

    Returns:
      A BCOO of ``arr``'s dtype.
    """
    if not isinstance(sparr, BCOO):
        raise TypeError("First argument to bcoo_extract should be a BCOO array. "
                        f"Got type(sparr)={type(sparr)}")
    a = jnp.asarray(arr)
    if a.shape != sparr.shape:
        raise ValueError(f"shape mismatch: sparr.shape={sparr.shape} a.shape={a.shape}")
    if assume_unique is None:
        assume_unique = sparr.unique_indices
    data = _extract(sparr.indices, a, assume_unique=assume_unique)
    return BCOO((data, sparr.indices), **sparr._info)


# ---- fromdense ----

@partial(jit, static_argnames=("n_batch", "n_dense"))
def _count_stored_elements(mat, n_batch, n_dense):
    mask = mat != 0
    if n_dense > 0:
        mask = mask.any(tuple(-(i + 1) for i in range(n_dense)))
    counts = mask.sum(tuple(range(n_batch, mask.ndim)))
    return counts.max(initial=0)


def bcoo_fromdense(mat, *, nse=None, n_batch=0, n_dense=0, index_dtype=np.int32):
    """BCOO of a dense array: the nonzeros of each batch, in row-major order.

    Args:
      mat: the dense array.
      nse: stored elements per batch; computed from ``mat`` if None (needs a concrete
        ``mat``, so pass it under jit). Extra slots are padded (zero data, indices equal
        to the shape); a too-small ``nse`` drops the last nonzeros.
      n_batch: leading dimensions stored as batch dimensions.
      n_dense: trailing dimensions stored densely in ``data``.
      index_dtype: dtype of the indices.

    Returns:
      A BCOO with sorted, unique indices.
    """
    mat = jnp.asarray(mat)
    n_sparse = mat.ndim - n_batch - n_dense
    if n_batch < 0 or n_dense < 0 or n_sparse < 0:
        raise ValueError(f"Invalid n_batch={n_batch}, n_dense={n_dense} for mat.shape="
                         f"{mat.shape}: need 0 <= n_batch + n_dense <= {mat.ndim}")
    if nse is None:
        nse = _count_stored_elements(mat, n_batch, n_dense)
    nse = concrete_int(nse, "nse argument of bcoo_fromdense")
    data, indices = _fromdense(mat, nse, n_batch, n_dense, np.dtype(index_dtype))
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


@partial(jit, static_argnums=(1, 2, 3, 4))
def _fromdense(mat, nse, n_batch, n_dense, index_dtype):
    n_sparse = mat.ndim - n_batch - n_dense
    mask = mat != 0
    if n_dense > 0:
        mask = mask.any(tuple(-(i + 1) for i in range(n_dense)))

    def nonzero(m):
        return jnp.stack(jnp.nonzero(m, size=nse, fill_value=m.shape), -1)
    if n_sparse == 0:
        indices = jnp.zeros(mask.shape[:n_batch] + (nse, 0), index_dtype)
    else:
        indices = nfold_vmap(nonzero, n_batch, broadcasted=False)(mask).astype(index_dtype)
    data = _extract(indices, mat)
    true_nse = mask.sum(tuple(range(n_batch, mask.ndim)))[..., None]
    valid = lax.broadcasted_iota(true_nse.dtype, (1,) * n_batch + (nse,), n_batch) < true_nse
    valid = valid.reshape(valid.shape + (1,) * n_dense)
    return jnp.where(valid, data, jnp.zeros((), data.dtype)), indices


# ---- constructors ----

def _bcoo_empty(shape, *, dtype=None, index_dtype="int32", nse=0, n_batch=0, n_dense=0):
    """An all-zero BCOO (``sparse.empty``'s 'bcoo' format): zero data, out-of-bounds
    indices."""
    shape = tuple(shape)
    n_sparse = len(shape) - n_dense - n_batch
    if n_sparse < 0 or n_dense < 0 or n_batch < 0 or nse < 0:
        raise ValueError(f"Invalid inputs: shape={shape}, n_dense={n_dense}, "
                         f"n_batch={n_batch}, nse={nse}")
    batch, sparse, dense = shape[:n_batch], shape[n_batch:n_batch + n_sparse], shape[n_batch + n_sparse:]
    data = jnp.zeros((*batch, nse, *dense), dtype if dtype is not None else jnp.float_)
    indices = jnp.broadcast_to(jnp.array(sparse, index_dtype), (*batch, nse, n_sparse))
    return BCOO((data, indices), shape=shape, indices_sorted=True, unique_indices=True)


def _bcoo_eye(N, M, k, *, dtype=None, index_dtype="int32", n_batch=0, n_dense=0):
    """A sparse identity-like ``N x M`` BCOO with ones on diagonal ``k``
    (``sparse.eye``'s 'bcoo' format)."""
    if 2 - n_batch - n_dense < 0 or n_batch < 0 or n_dense < 0:
        raise ValueError(f"Invalid inputs: shape={(N, M)}, n_dense={n_dense}, n_batch={n_batch}")
    dtype = dtype if dtype is not None else jnp.float_
    diag_size = min(N, M - k) if k > 0 else min(N + k, M)
    if diag_size <= 0:
        return _bcoo_empty((N, M), dtype=dtype, index_dtype=index_dtype, n_batch=n_batch,
                           n_dense=n_dense)
    if n_dense > 0 or n_batch > 1:   # these layouts store the zeros explicitly
        return bcoo_fromdense(jnp.eye(N, M, k, dtype=dtype), n_batch=n_batch,
                              n_dense=n_dense, index_dtype=index_dtype)
    if n_batch == 0:
        idx = np.arange(diag_size)
        rows, cols = idx - min(k, 0), idx + max(k, 0)
        data = jnp.ones(diag_size, dtype)
        indices = jnp.array(np.stack([rows, cols], -1), index_dtype)
    else:   # one entry per row; rows without a diagonal entry are padding
        cols = np.arange(N) + k
        pad = (cols < 0) | (cols >= M)
        data = jnp.array(np.where(pad, 0, 1)[:, None], dtype)
        indices = jnp.array(np.where(pad, M, cols)[:, None, None], index_dtype)
    return BCOO((data, indices), shape=(N, M), indices_sorted=True, unique_indices=True)
