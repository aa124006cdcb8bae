"""The older 2-D formats, as JAX's ``coo``/``csr`` modules: ``COO`` (data, row, col),
``CSR`` and its transpose view ``CSC`` (data, indices, indptr), with fromdense, todense,
matvec and matmat. Each op is a small jitted composition (JAX's impls: nonzero, a
scatter-add, a gather), so jit/vmap/grad apply as to any code. Their layouts are JAX's,
which differ from BCOO's: COO's padding is index (0, 0) with zero data, CSR's padding
sits past ``indptr[-1]``. As in JAX, these classes do little; prefer BCOO/BCSR."""
from functools import partial

import numpy as np

from xform import numpy as jnp
from xform.core.pytree_registry import register_pytree_node_class
from xform.experimental.sparse._util import JAXSparse, concrete_int
from xform.transforms.jit import jit


class _Sparse2D(JAXSparse):
    """The 2-D classes' nse, flattening and matmul (JAX's ``JAXSparse`` defaults)."""
    nse = property(lambda self: self.data.size)

    def tree_flatten(self):
        return self._bufs, tuple(sorted(self._info.items()))

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)   # no validation: leaves may be placeholders
        obj._set(children, **dict(aux))
        return obj

    def __init__(self, args, **info):
        self._set(tuple(map(jnp.asarray, args)), **info)

    def __matmul__(self, other):
        if isinstance(other, JAXSparse):
            raise NotImplementedError("matmul between two sparse objects.")
        other = jnp.asarray(other)
        dtype = jnp.result_type(self.data, other)
        data, other = self.data.astype(dtype), other.astype(dtype)
        if other.ndim not in (1, 2):
            raise NotImplementedError(f"matmul with object of shape {other.shape}")
        return self._matmul(data, other)


def _check_2d(shape, name):
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2:
        raise ValueError(f"{name} must have ndim=2; got shape={shape}")
    return shape


def _product(data, row, col, B, out_rows, transpose):
    """``M @ B`` (or ``M.T @ B``) of the COO matrix (data, row, col), B a vector or matrix."""
    if transpose:
        row, col = col, row
    if B.ndim == 2:
        data = data[:, None]
    prod = data * B[col]
    return jnp.zeros((out_rows, *B.shape[1:]), prod.dtype).at[row].add(prod)


def _check_product(shape, B, transpose, ndim):
    B = jnp.asarray(B)
    if B.ndim != ndim or B.shape[0] != shape[0 if transpose else 1]:
        raise TypeError(f"dimension mismatch: sparse matrix of shape {shape}"
                        f"{' (transposed)' if transpose else ''} times operand of shape "
                        f"{B.shape}; expected a {ndim}-d operand with leading dimension "
                        f"{shape[0 if transpose else 1]}")
    return B


# ---- COO ----

@register_pytree_node_class
class COO(_Sparse2D):
    """2-D coordinate-format matrix, as ``jax.experimental.sparse.COO``.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.COO.fromdense(jnp.array([[0., 2.], [3., 0.]]))
    >>> M, M.row.tolist(), M.col.tolist()
    (COO(float32[2, 2], nse=2), [0, 1], [1, 0])
    """

    def _set(self, bufs, *, shape, rows_sorted=False, cols_sorted=False):
        self.data, self.row, self.col = bufs
        self.shape = _check_2d(shape, "COO")
        self._rows_sorted, self._cols_sorted = rows_sorted, cols_sorted

    _bufs = property(lambda self: (self.data, self.row, self.col))
    _info = property(lambda self: dict(shape=self.shape, rows_sorted=self._rows_sorted,
                                       cols_sorted=self._cols_sorted))

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32):
        return coo_fromdense(mat, nse=nse, index_dtype=index_dtype)

    def todense(self):
        return coo_todense(self)

    def transpose(self, axes=None):
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return COO((self.data, self.col, self.row), shape=self.shape[::-1],
                   rows_sorted=self._cols_sorted, cols_sorted=self._rows_sorted)

    def _matmul(self, data, B):
        return _coo_product(data, self.row, self.col, B, self.shape[0], False)


def coo_fromdense(mat, *, nse=None, index_dtype=jnp.int32):
    """COO of a 2-D dense array: its nonzeros in row-major order; ``nse`` (computed
    from ``mat`` if None, which needs a concrete ``mat``) pads with index (0, 0)."""
    mat = jnp.asarray(mat)
    _check_2d(mat.shape, "COO")
    if nse is None:
        nse = (mat != 0).sum()
    nse = concrete_int(nse, "nse argument of coo_fromdense")
    return COO(_coo_fromdense(mat, nse, np.dtype(index_dtype)), shape=mat.shape,
               rows_sorted=True)


@partial(jit, static_argnums=(1, 2))
def _coo_fromdense(mat, nse, index_dtype):
    row, col = jnp.nonzero(mat, size=nse)
    data = jnp.where(jnp.arange(nse) < (mat != 0).sum(), mat[row, col], 0).astype(mat.dtype)
    return data, row.astype(index_dtype), col.astype(index_dtype)


def coo_todense(mat):
    """The dense matrix (duplicates summed)."""
    return _coo_todense(*mat._bufs, mat.shape)


@partial(jit, static_argnums=(3,))
def _coo_todense(data, row, col, shape):
    return jnp.zeros(shape, data.dtype).at[row, col].add(data)


_coo_product = jit(_product, static_argnums=(4, 5))


def coo_matvec(mat, v, transpose=False):
    """``mat @ v`` (``mat.T @ v`` if ``transpose``) for a dense vector ``v``."""
    v = _check_product(mat.shape, v, transpose, 1)
    return _coo_product(*mat._bufs, v, mat.shape[1 if transpose else 0], bool(transpose))


def coo_matmat(mat, B, *, transpose=False):
    """``mat @ B`` (``mat.T @ B`` if ``transpose``) for a dense matrix ``B``."""
    B = _check_product(mat.shape, B, transpose, 2)
    return _coo_product(*mat._bufs, B, mat.shape[1 if transpose else 0], bool(transpose))


# ---- CSR / CSC ----

def _csr_rows(indices, indptr):
    # the row of stored element k (see _bcsr._csr_to_coo); padding lands in the last row
    return jnp.cumsum(jnp.zeros_like(indices).at[indptr].add(1)) - 1


class _Compressed(_Sparse2D):
    def _set(self, bufs, *, shape):
        self.data, self.indices, self.indptr = bufs
        self.shape = _check_2d(shape, type(self).__name__)

    _bufs = property(lambda self: (self.data, self.indices, self.indptr))
    _info = property(lambda self: dict(shape=self.shape))


@register_pytree_node_class
class CSR(_Compressed):
    """2-D compressed-sparse-row matrix, as ``jax.experimental.sparse.CSR``.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.CSR.fromdense(jnp.array([[0., 2.], [3., 0.]]))
    >>> M, M.indptr.tolist()
    (CSR(float32[2, 2], nse=2), [0, 1, 2])
    """

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32):
        return csr_fromdense(mat, nse=nse, index_dtype=index_dtype)

    def todense(self):
        return csr_todense(self)

    def transpose(self, axes=None):
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return CSC(self._bufs, shape=self.shape[::-1])

    def _matmul(self, data, B):
        return _csr_product(data, self.indices, self.indptr, B, self.shape[0], False)


@register_pytree_node_class
class CSC(_Compressed):
    """2-D compressed-sparse-column matrix: the transpose of the CSR in its buffers."""

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32):
        return csr_fromdense(jnp.asarray(mat).T, nse=nse, index_dtype=index_dtype).T

    def todense(self):
        return csr_todense(self.T).T

    def transpose(self, axes=None):
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return CSR(self._bufs, shape=self.shape[::-1])

    def _matmul(self, data, B):
        return _csr_product(data, self.indices, self.indptr, B, self.shape[0], True)


def csr_fromdense(mat, *, nse=None, index_dtype=np.int32):
    """CSR of a 2-D dense array; padding (``nse`` beyond the nonzeros) has column 0 and
    sits past ``indptr[-1]``."""
    mat = jnp.asarray(mat)
    _check_2d(mat.shape, "CSR")
    if nse is None:
        nse = (mat != 0).sum()
    nse = concrete_int(nse, "nse argument of csr_fromdense")
    return CSR(_csr_fromdense(mat, nse, np.dtype(index_dtype)), shape=mat.shape)


@partial(jit, static_argnums=(1, 2))
def _csr_fromdense(mat, nse, index_dtype):
    data, row, col = _coo_fromdense(mat, nse, index_dtype)
    m = mat.shape[0]
    row = jnp.where(jnp.arange(nse) < (mat != 0).sum(), row, m)   # padding: past length
    counts = jnp.bincount(row, length=m).astype(index_dtype)
    return data, col, jnp.zeros(m + 1, index_dtype).at[1:].set(jnp.cumsum(counts))


def csr_todense(mat):
    """The dense matrix of a CSR."""
    return _csr_todense(*mat._bufs, mat.shape)


@partial(jit, static_argnums=(3,))
def _csr_todense(data, indices, indptr, shape):
    return _coo_todense(data, _csr_rows(indices, indptr), indices, shape)


@partial(jit, static_argnums=(4, 5))
def _csr_product(data, indices, indptr, B, out_rows, transpose):
    return _product(data, _csr_rows(indices, indptr), indices, B, out_rows, transpose)


def csr_matvec(mat, v, transpose=False):
    """``mat @ v`` (``mat.T @ v`` if ``transpose``) for a CSR ``mat``."""
    v = _check_product(mat.shape, v, transpose, 1)
    return _csr_product(*mat._bufs, v, mat.shape[1 if transpose else 0], bool(transpose))


def csr_matmat(mat, B, *, transpose=False):
    """``mat @ B`` (``mat.T @ B`` if ``transpose``) for a CSR ``mat``."""
    B = _check_product(mat.shape, B, transpose, 2)
    return _csr_product(*mat._bufs, B, mat.shape[1 if transpose else 0], bool(transpose))


# ---- empty / eye (JAX's `_empty`/`_eye` classmethods) ----

def coo_empty(shape, *, dtype=None, index_dtype="int32", sparse_format="coo"):
    shape = _check_2d(shape, sparse_format.upper())
    data = jnp.zeros(0, dtype if dtype is not None else jnp.float_)
    index = jnp.zeros(0, index_dtype)
    if sparse_format == "coo":
        return COO((data, index, index), shape=shape, rows_sorted=True, cols_sorted=True)
    cls, n = (CSR, shape[0]) if sparse_format == "csr" else (CSC, shape[1])
    return cls((data, index, jnp.zeros(n + 1, index_dtype)), shape=shape)


def coo_eye(N, M, k, *, dtype=None, index_dtype="int32", sparse_format="coo"):
    """The k-th diagonal of ones; CSC is the transpose of CSR's ``eye(M, N, -k)``."""
    if sparse_format == "csc":
        return coo_eye(M, N, -k, dtype=dtype, index_dtype=index_dtype, sparse_format="csr").T
    size = min(N, M - k) if k > 0 else min(N + k, M)
    if size <= 0:
        return coo_empty((N, M), dtype=dtype, index_dtype=index_dtype,
                         sparse_format=sparse_format)
    idx = np.arange(size)
    row = jnp.asarray(idx - min(k, 0), index_dtype)
    col = jnp.asarray(idx + max(k, 0), index_dtype)
    data = jnp.ones(size, dtype if dtype is not None else jnp.float_)
    if sparse_format == "coo":
        return COO((data, row, col), shape=(N, M), rows_sorted=True, cols_sorted=True)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(idx - min(k, 0), minlength=N))])
    return CSR((data, col, jnp.asarray(indptr, index_dtype)), shape=(N, M))
