"""The BCSR class (batched compressed sparse rows: ``data``, column ``indices`` and row
pointers ``indptr``, with a static ``shape``) and its operations, as JAX's ``bcsr``.

Like JAX's, every BCSR operation converts to BCOO indices and reuses the BCOO kernel
(JAX's BCSR impls call ``_bcsr_to_bcoo`` too): the row of each stored element is a
cumulative count of row starts, and back, ``indptr`` is a cumulative bincount of the rows.
Both conversions are compositions, so jit, vmap and grad need nothing BCSR-specific.
"""
from functools import partial

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core.dtypes import issubdtype
from xform.core.pytree_registry import register_pytree_node_class
from xform.core.trace import Tracer
from xform.experimental.sparse._bcoo import (BCOO, _count_stored_elements,
                                             _extract, _todense, bcoo_fromdense)
from xform.experimental.sparse._ops import (_dot_general, bcoo_eliminate_zeros,
                                            bcoo_sort_indices, bcoo_sum_duplicates)
from xform.experimental.sparse._ops2 import bcoo_broadcast_in_dim, bcoo_concatenate
from xform.experimental.sparse._util import JAXSparse, concrete_int, nfold_vmap
from xform.transforms.jit import jit


def _compatible(shape1, shape2):
    return all(s1 in (1, s2) for s1, s2 in zip(shape1, shape2))


def validate_bcsr_indices(indices, indptr, shape):
    """(n_batch, n_dense, nse) of BCSR ``indices``/``indptr`` for ``shape``."""
    for name, x in (("indices", indices), ("indptr", indptr)):
        if not issubdtype(x.dtype, np.integer):
            raise TypeError(f"BCSR {name} must be integers, got dtype {x.dtype}")
    shape = tuple(shape)
    if indices.ndim < 1:
        raise ValueError(f"BCSR indices must have at least 1 dimension; got {indices.shape=}")
    nse, n_batch = indices.shape[-1], indices.ndim - 1
    n_dense = len(shape) - n_batch - 2
    if n_dense < 0:
        raise ValueError(f"BCSR array must have 2 sparse dimensions; got {indices.shape=} "
                         f"for {shape=}")
    if not _compatible(indices.shape[:n_batch], shape[:n_batch]):
        raise ValueError(f"indices batch dimensions not compatible for {indices.shape=}, {shape=}")
    if not _compatible(indptr.shape[:n_batch], shape[:n_batch]):
        raise ValueError(f"indptr batch dimensions not compatible for {indptr.shape=}, {shape=}")
    if tuple(indptr.shape[n_batch:]) != (shape[n_batch] + 1,):
        raise ValueError("indptr shape must match the matrix shape plus 1.")
    return n_batch, n_dense, nse


def validate_bcsr(data, indices, indptr, shape):
    n_batch, n_dense, nse = validate_bcsr_indices(indices, indptr, shape)
    shape = tuple(shape)
    if data.ndim < n_batch + 1 or not _compatible(data.shape[:n_batch], shape[:n_batch]):
        raise ValueError(f"data batch dimensions not compatible for {data.shape=}, {shape=}")
    if tuple(data.shape[n_batch:]) != (nse,) + shape[n_batch + 2:]:
        raise ValueError(f"Invalid {data.shape=} for {nse=}, {n_batch=}, {n_dense=}")
    return n_batch, n_dense, nse


def _csr_to_coo(indices, indptr):
    # row of stored element k = (number of row starts at or before k) - 1; the scatter
    # drops indptr[-1] = nse, so padding past it lands in the last row (its column is
    # out of bounds, so it still contributes nothing).
    rows = jnp.cumsum(jnp.zeros_like(indices).at[indptr].add(1)) - 1
    return jnp.stack([rows.astype(indices.dtype), indices], -1)


def bcsr_to_bcoo_indices(indices, indptr, shape):
    """BCOO indices ``[*batch, nse, 2]`` of BCSR ``(indices, indptr)``."""
    n_batch = validate_bcsr_indices(indices, indptr, shape)[0]
    return nfold_vmap(_csr_to_coo, n_batch)(indices, indptr)


def bcoo_to_bcsr_indices(indices, shape, index_dtype):
    """BCSR ``(indices, indptr)`` of sorted BCOO indices with two sparse dimensions."""
    if indices.shape[-1] != 2:
        raise ValueError("Must have 2 sparse dimensions to be converted to BCSR.")
    n_batch, n_rows = indices.ndim - 2, shape[indices.ndim - 2]

    def get_ptr(rows):   # out-of-bounds (padding) rows are past `length`: not counted
        counts = jnp.bincount(rows, length=n_rows).astype(index_dtype)
        return jnp.zeros(n_rows + 1, index_dtype).at[1:].set(jnp.cumsum(counts))
    return indices[..., 1], nfold_vmap(get_ptr, n_batch, broadcasted=False)(indices[..., 0])


@register_pytree_node_class
class BCSR(JAXSparse):
    """Batched compressed sparse row (BCSR) matrix, as ``jax.experimental.sparse.BCSR``.

    Args:
      args: ``(data, indices, indptr)``: ``data`` ``[*batch, nse, *dense]`` the stored
        values, ``indices`` ``[*batch, nse]`` their columns, ``indptr``
        ``[*batch, n_rows + 1]`` where each row's entries start.
      shape: the dense shape: batch dims, then the two sparse dims, then dense dims.

    NB: vmap over a BCSR maps axis 0 of its leaves, with ``shape`` reconciled on
    unflattening, as for :class:`BCOO`.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCSR.fromdense(jnp.array([[0., 2., 0.], [1., 0., 4.]]))
    >>> M
    BCSR(float32[2, 3], nse=3)
    >>> M.indices.tolist(), M.indptr.tolist()
    ([1, 0, 2], [0, 1, 3])
    """

    def __init__(self, args, *, shape, indices_sorted=False, unique_indices=False):
        self.data, self.indices, self.indptr = map(jnp.asarray, args)
        self.shape = tuple(int(s) for s in shape)
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices
        validate_bcsr(self.data, self.indices, self.indptr, self.shape)

    nse = property(lambda self: self.indices.shape[-1])
    n_batch = property(lambda self: self.indices.ndim - 1)
    n_sparse = property(lambda self: 2)
    n_dense = property(lambda self: self.data.ndim - self.indices.ndim)
    _bufs = property(lambda self: (self.data, self.indices, self.indptr))
    _info = property(lambda self: dict(shape=self.shape, indices_sorted=self.indices_sorted,
                                       unique_indices=self.unique_indices))

    def transpose(self, *args, **kwargs):
        raise NotImplementedError("Transpose is not implemented.")

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32, n_dense=0, n_batch=0):
        """BCSR of a dense array (see :func:`bcsr_fromdense`)."""
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    def todense(self):
        """The dense array."""
        return bcsr_todense(self)

    def to_bcoo(self):
        """The same array as a :class:`BCOO` (two sparse dimensions)."""
        return BCOO((self.data, bcsr_to_bcoo_indices(self.indices, self.indptr, self.shape)),
                    shape=self.shape)

    @classmethod
    def from_bcoo(cls, arr):
        """A BCSR of a BCOO with ``n_sparse == 2`` (its indices are sorted first)."""
        if arr.n_sparse != 2:
            raise NotImplementedError(
                f"BSCR.from_bcoo requires n_sparse=2; got arr.n_sparse={arr.n_sparse}")
        if not arr.indices_sorted:
            arr = bcoo_sort_indices(arr)
        indices, indptr = bcoo_to_bcsr_indices(arr.indices, arr.shape, arr.indices.dtype)
        return cls((arr.data, indices, indptr), shape=arr.shape)

    def sum_duplicates(self, nse=None, remove_zeros=True):
        """Duplicates summed, indices sorted; explicit zeros dropped if ``remove_zeros``."""
        if remove_zeros:
            return BCSR.from_bcoo(bcoo_eliminate_zeros(self.to_bcoo(), nse=nse))
        return bcsr_sum_duplicates(self, nse=nse)

    def tree_flatten(self):
        return self._bufs, (self.shape, self.indices_sorted, self.unique_indices)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        shape, obj.indices_sorted, obj.unique_indices = aux
        obj.shape = _reconcile_shape(shape, obj.data, obj.indices)
        return obj


def _reconcile_shape(shape, data, indices):
    """``shape`` adjusted for leading batch dims vmap removed or added (see BCOO's NB)."""
    try:
        if indices.ndim < 1:
            if isinstance(indices, Tracer):
                raise ValueError(
                    f"Cannot map in_axis=0 for BCSR array with n_batch=0 (shape {shape}). "
                    "in_axes for batched BCSR operations must correspond to a batched "
                    "dimension.")
            return shape
        k = len(shape) - (data.ndim + 1)
    except (AttributeError, TypeError):
        return shape
    if k > 0:
        return shape[k:]
    if k < 0:
        return tuple(max(a, b) for a, b in zip(data.shape[:-k], indices.shape[:-k])) + shape
    return shape


# ---- conversions ----

def bcsr_fromdense(mat, *, nse=None, n_batch=0, n_dense=0, index_dtype=jnp.int32):
    """BCSR of a dense array: ``mat.ndim - n_batch - n_dense`` must be 2.

    Args:
      mat: the dense array.
      nse: stored elements per batch; computed from ``mat`` if None (needs a concrete
        ``mat``: pass it under jit).
      n_batch, n_dense: leading batch and trailing dense dimensions.
      index_dtype: dtype of ``indices`` and ``indptr``.
    """
    mat = jnp.asarray(mat)
    if mat.ndim - n_batch - n_dense != 2:
        raise ValueError("bcsr_fromdense: must have 2 sparse dimensions.")
    if nse is None:
        nse = _count_stored_elements(mat, n_batch, n_dense)
    nse = concrete_int(nse, "nse argument of bcsr_fromdense")
    return BCSR(_fromdense(mat, nse, n_batch, n_dense, np.dtype(index_dtype)), shape=mat.shape)


@partial(jit, static_argnums=(1, 2, 3, 4))
def _fromdense(mat, nse, n_batch, n_dense, index_dtype):
    coo = bcoo_fromdense(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                         index_dtype=index_dtype)
    return (coo.data, *bcoo_to_bcsr_indices(coo.indices, mat.shape, index_dtype))


def bcsr_todense(mat):
    """The dense array of a BCSR (duplicates summed, padding dropped)."""
    return _bcsr_todense(mat.data, mat.indices, mat.indptr, mat.shape)


@partial(jit, static_argnums=(3,))
def _bcsr_todense(data, indices, indptr, shape):
    return _todense(data, bcsr_to_bcoo_indices(indices, indptr, shape), shape)


def bcsr_extract(indices, indptr, mat):
    """The values of dense ``mat`` at BCSR ``(indices, indptr)``: a BCSR ``data`` array
    (JAX's signature: buffers in, buffer out)."""
    indices, indptr, mat = map(jnp.asarray, (indices, indptr, mat))
    validate_bcsr_indices(indices, indptr, mat.shape)
    return _bcsr_extract(indices, indptr, mat)


@jit
def _bcsr_extract(indices, indptr, mat):
    return _extract(bcsr_to_bcoo_indices(indices, indptr, mat.shape), mat)


def bcsr_sum_duplicates(mat, nse=None):
    """Duplicate indices summed (explicit zeros kept), indices sorted per row."""
    return BCSR.from_bcoo(bcoo_sum_duplicates(mat.to_bcoo(), nse=nse))


def bcsr_eliminate_zeros(mat, nse=None):
    """Explicitly stored zeros dropped and duplicates summed."""
    return BCSR.from_bcoo(bcoo_eliminate_zeros(mat.to_bcoo(), nse=nse))


def bcsr_broadcast_in_dim(mat, *, shape, broadcast_dimensions, sharding=None):
    """Sparse ``lax.broadcast_in_dim`` through BCOO (see ``bcoo_broadcast_in_dim``)."""
    del sharding
    return BCSR.from_bcoo(bcoo_broadcast_in_dim(mat.to_bcoo(), shape=shape,
                                                broadcast_dimensions=broadcast_dimensions))


def bcsr_concatenate(operands, *, dimension):
    """Sparse ``lax.concatenate`` of BCSRs along a batch or sparse dimension."""
    return BCSR.from_bcoo(bcoo_concatenate([m.to_bcoo() for m in operands],
                                           dimension=dimension))


def bcsr_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """``lax.dot_general`` of a BCSR ``lhs`` and a dense ``rhs`` (a dense result); two
    dense operands give the dense product. Other combinations are not implemented, as
    in JAX."""
    del precision, out_sharding
    sparse = (BCOO, BCSR)
    if not isinstance(rhs, sparse) and not isinstance(lhs, sparse):
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    if not isinstance(lhs, BCSR) or isinstance(rhs, sparse):
        raise NotImplementedError("bcsr_dot_general currently implemented for BCSR lhs and "
                                  "ndarray rhs.")
    return _dot_general(lhs.to_bcoo(), jnp.asarray(rhs), dimension_numbers,
                        preferred_element_type, name="bcsr_dot_general")


def bcsr_empty(shape, *, dtype=None, index_dtype="int32", n_dense=0, n_batch=0, nse=0):
    """An all-zero BCSR: ``indptr`` all zero, indices out of bounds."""
    shape = tuple(shape)
    if n_dense < 0 or n_batch < 0 or nse < 0:
        raise ValueError(f"Invalid inputs: {shape=}, {n_dense=}, {n_batch=}, {nse=}")
    if len(shape) - n_dense - n_batch != 2:
        raise ValueError("BCSR sparse.empty: must have 2 sparse dimensions.")
    batch, (rows, cols), dense = shape[:n_batch], shape[n_batch:n_batch + 2], shape[n_batch + 2:]
    data = jnp.zeros((*batch, nse, *dense), dtype if dtype is not None else jnp.float_)
    indices = jnp.full((*batch, nse), cols, index_dtype)
    return BCSR((data, indices, jnp.zeros((*batch, rows + 1), index_dtype)), shape=shape)

