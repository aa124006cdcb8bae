"""Structural BCOO operations (concatenate, broadcast_in_dim, reshape), ``fromdense``
(an xform alias of ``bcoo_fromdense``), and ``random_bcoo``."""
import math
from functools import partial

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform import random
from xform.core import dtypes
from xform.experimental.sparse._bcoo import BCOO, bcoo_fromdense
from xform.experimental.sparse._util import validate_bcoo
from xform.transforms.jit import ShapeDtypeStruct, eval_shape, jit
from xform.transforms.vmap import vmap

def fromdense(mat, *, nse=None, index_dtype=np.int32, n_dense=0, n_batch=0):
    """A BCOO of ``mat`` (see :func:`bcoo_fromdense`)."""
    return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                          n_batch=n_batch)


def _set_nse(mat, nse):
    """``mat`` with ``nse`` slots: truncated, or padded with out-of-bounds indices."""
    if nse == mat.nse:
        return mat
    nb = mat.n_batch
    if nse < mat.nse:
        return BCOO((mat.data[(slice(None),) * nb + (slice(nse),)], mat.indices[..., :nse, :]),
                    **mat._info)
    pad = [(0, 0)] * mat.data.ndim
    pad[nb] = (0, nse - mat.nse)
    data = jnp.pad(mat.data, pad)
    fill = jnp.broadcast_to(jnp.array(mat.shape[nb:nb + mat.n_sparse], mat.indices.dtype),
                            mat.indices.shape[:-2] + (nse - mat.nse, mat.n_sparse))
    return BCOO((data, jnp.concatenate([mat.indices, fill], -2)), **mat._info)


def bcoo_concatenate(operands, *, dimension):
    """Sparse ``lax.concatenate`` along a batch or sparse ``dimension`` (operands need
    the same layout; along a sparse axis the later operands' indices are offset)."""
    dimension = int(dimension)
    if not all(isinstance(op, BCOO) for op in operands):
        raise ValueError("bcoo_concatenate: expected operands to be a sequence of BCOO "
                         f"arrays. Got {operands}")
    out = eval_shape(lambda *xs: lax.concatenate(xs, dimension),
                     *(ShapeDtypeStruct(op.shape, op.dtype) for op in operands))
    if len({op.n_dense for op in operands}) > 1:
        raise ValueError("bcoo_concatenate requires inputs to have matching nse dimensions.")
    if len({op.n_batch for op in operands}) != 1:
        raise ValueError("bcoo_concatenate requires inputs to have matching batch dimensions.")
    n_batch, n_sparse = operands[0].n_batch, operands[0].n_sparse
    index_batches = [op.indices.shape[:n_batch] for op in operands]
    data_batches = [op.data.shape[:n_batch] for op in operands]
    if dimension < n_batch:
        index_batches = [s[:dimension] + s[dimension + 1:] for s in index_batches]
        data_batches = [s[:dimension] + s[dimension + 1:] for s in data_batches]
    if not len(set(index_batches)) == len(set(data_batches)) == 1:
        raise NotImplementedError("concatenation of arrays with broadcasted batch indices")
    if dimension < n_batch:
        nse = max(op.nse for op in operands)
        operands = [_set_nse(op, nse) for op in operands]
        indices = lax.concatenate([op.indices for op in operands], dimension)
        data = lax.concatenate([op.data for op in operands], dimension)
    elif dimension < n_batch + n_sparse:
        offsets = np.cumsum([0] + [op.shape[dimension] for op in operands[:-1]])
        data = lax.concatenate([op.data for op in operands], n_batch)
        indices = lax.concatenate(
            [op.indices.at[..., dimension - n_batch].add(np.asarray(o, op.indices.dtype))
             for op, o in zip(operands, offsets)], n_batch)
    else:
        raise NotImplementedError("Concatenation along dense dimensions.")
    return BCOO((data, indices), shape=out.shape)


def bcoo_broadcast_in_dim(mat, *, shape, broadcast_dimensions):
    """Sparse ``lax.broadcast_in_dim``: new leading axes become batch dimensions, new
    trailing ones dense dimensions; new sparse axes must have length 1."""
    shape, bdims = tuple(shape), tuple(broadcast_dimensions)
    if len(mat.shape) != len(bdims):
        raise ValueError(f"mat.shape={mat.shape} and broadcast_dimensions={bdims} must have "
                         "the same length")
    n_batch, n_sparse, n_dense, nse = validate_bcoo(mat.data, mat.indices, mat.shape)
    batch_dims, sparse_dims = bdims[:n_batch], bdims[n_batch:n_batch + n_sparse]
    dense_dims = bdims[n_batch + n_sparse:]
    if max(batch_dims, default=0) > min(sparse_dims, default=len(shape)):
        raise ValueError("Cannot mix batch and sparse dimensions during broadcast_in_dim")
    if max(sparse_dims, default=0) > min(dense_dims, default=len(shape)):
        raise ValueError("Cannot mix sparse and dense dimensions during broadcast_in_dim")
    new_n_batch = min(bdims[n_batch:], default=len(shape))
    new_n_dense = n_dense and len(shape) - min(bdims[-n_dense:])
    new_n_sparse = len(shape) - new_n_batch - new_n_dense
    if (math.prod(mat.shape[n_batch:n_batch + n_sparse])
            != math.prod(shape[new_n_batch:new_n_batch + new_n_sparse])):
        raise NotImplementedError("Adding sparse dimensions with lengths != 1")
    data, indices = mat.data, mat.indices
    if (new_n_batch, new_n_dense) != (n_batch, n_dense):
        data = lax.broadcast_in_dim(
            data, (*shape[:new_n_batch], nse, *shape[new_n_batch + new_n_sparse:]),
            (*batch_dims, new_n_batch, *(b + 1 - new_n_sparse for b in dense_dims)))
        indices = lax.broadcast_in_dim(
            indices, (*shape[:new_n_batch], nse, n_sparse),
            (*batch_dims, new_n_batch, new_n_batch + 1))
    if new_n_sparse != n_sparse:
        cols = np.array(sparse_dims, int) - new_n_batch
        indices = jnp.zeros((*shape[:new_n_batch], nse, new_n_sparse),
                            indices.dtype).at[..., cols].set(indices)
    return BCOO((data, indices), shape=shape)


def bcoo_reshape(mat, *, new_sizes, dimensions=None, sharding=None):
    """Sparse ``lax.reshape``: batch and dense dims reshape as arrays, sparse dims by
    re-indexing (ravel then unravel); the new shape may not mix the three kinds."""
    del sharding
    new_sizes = tuple(int(n) for n in new_sizes)
    nb, ns = mat.n_batch, mat.n_sparse
    if mat.indices.shape[:nb] != mat.data.shape[:nb] or mat.data.shape[:nb] != mat.shape[:nb]:
        raise NotImplementedError("reshape of arrays with broadcasted batch dimensions.")
    if dimensions is not None and tuple(dimensions) != tuple(range(mat.ndim)):
        raise NotImplementedError("bcoo_reshape with a dimensions permutation")
    if math.prod(new_sizes) != math.prod(mat.shape):
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} "
                        f"for shape {mat.shape}.")
    batch_size, sparse_size = math.prod(mat.shape[:nb]), math.prod(mat.shape[nb:nb + ns])
    cuml = np.cumprod(new_sizes)
    if batch_size != 1 and batch_size not in cuml:
        raise ValueError("bcoo_reshape: new shape cannot mix batch and sparse dimensions; "
                         f"got shape={mat.shape} new_shape={new_sizes} with n_batch={nb}")
    if sparse_size != 1 and batch_size * sparse_size not in cuml:
        raise ValueError("bcoo_reshape: new shape cannot mix sparse and dense dimensions; "
                         f"got shape={mat.shape} new_shape={new_sizes} with n_dense={mat.n_dense}")
    i1 = int(cuml.searchsorted(batch_size, side="right"))
    i2 = int(cuml.searchsorted(batch_size * sparse_size, side="right"))
    data, indices = _reshape_impl(mat.data, mat.indices, mat.shape[nb:nb + ns],
                                  new_sizes[:i1], new_sizes[i1:i2], new_sizes[i2:])
    return BCOO((data, indices), shape=new_sizes)


@partial(jit, static_argnums=(2, 3, 4, 5))
def _reshape_impl(data, indices, sparse_shape, new_batch, new_sparse, new_dense):
    nse, ns = indices.shape[-2:]
    data = data.reshape(*new_batch, nse, *new_dense)
    indices = indices.reshape(*new_batch, nse, ns)
    if not new_sparse:
        return data, jnp.zeros((*new_batch, nse, 0), indices.dtype)
    if not sparse_shape:
        return data, jnp.zeros((*new_batch, nse, len(new_sparse)), indices.dtype)
    flat = jnp.ravel_multi_index(tuple(indices[..., i] for i in range(ns)), sparse_shape,
                                 mode="clip")
    oob = (indices >= jnp.array(sparse_shape, indices.dtype)).any(-1, keepdims=True)
    new = jnp.stack(jnp.unravel_index(flat, new_sparse), -1).astype(indices.dtype)
    return data, jnp.where(oob, jnp.array(new_sparse, indices.dtype), new)


def random_bcoo(key, shape, *, dtype=jnp.float_, indices_dtype=None, nse=0.2, n_batch=0,
                n_dense=0, unique_indices=True, sorted_indices=False,
                generator=random.uniform, **kwds):
    """A random BCOO: ``nse`` (a count, or a fraction of the sparse size if below 1)
    random positions per batch, values from ``generator(key, shape=, dtype=)``."""
    shape = tuple(int(s) for s in shape)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise ValueError(f"Invalid n_batch={n_batch}, n_dense={n_dense} for shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch_shape = shape[:n_batch]
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    sparse_size = math.prod(sparse_shape)
    if not 0 <= nse < sparse_size:
        raise ValueError(f"got nse={nse}, expected to be between 0 and {sparse_size}")
    if 0 < nse < 1:
        nse = int(math.ceil(nse * sparse_size))
    nse = int(nse)
    indices_dtype = np.dtype(indices_dtype or dtypes.default_int_dtype())

    keys = random.split(key, math.prod(batch_shape) + 1)
    data = generator(keys[0], shape=batch_shape + (nse,) + dense_shape, dtype=dtype, **kwds)
    indices = _random_indices(keys[1:], sparse_shape, nse, indices_dtype, unique_indices)
    indices = indices.reshape(batch_shape + (nse, n_sparse))
    mat = BCOO((data, indices), shape=shape)
    return mat.sort_indices() if sorted_indices else mat


@partial(jit, static_argnums=(1, 2, 3, 4))
def _random_indices(keys, sparse_shape, nse, indices_dtype, unique):
    def one_batch(k):
        if not sparse_shape:
            return jnp.zeros((nse, 0), indices_dtype)
        flat = random.choice(k, math.prod(sparse_shape), shape=(nse,), replace=not unique)
        return jnp.stack(jnp.unravel_index(flat.astype(indices_dtype), sparse_shape), -1)
    return vmap(one_batch)(keys)
