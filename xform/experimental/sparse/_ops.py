"""BCOO operations, each a composition of xform's lax/numpy (gather, scatter-add, sort,
dot_general) over an unbatched kernel vmapped across the batch dimensions: jit lowers
them like any code, and grad/vmap differentiate and batch the composition. Each kernel
is a jitted function of the buffers with the layout static (one compile per op and
layout, as JAX's primitives); validation and errors happen before it, on the BCOO."""
import math
from functools import partial

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.experimental.sparse._bcoo import BCOO, _extract
from xform.experimental.sparse._util import (concrete_int, nfold_vmap, remaining,
                                             validate_bcoo)
from xform.transforms.jit import ShapeDtypeStruct, eval_shape, jit


def _as_tuple(x):
    return tuple(int(i) for i in (x if isinstance(x, (tuple, list, np.ndarray)) else (x,)))


# ---- transpose ----

def bcoo_transpose(mat, *, permutation):
    """Sparse ``lax.transpose``: batch, sparse and dense axes each permute among
    themselves (the sparse ones by reordering index columns).

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCOO.fromdense(jnp.array([[0., 1.], [2., 0.]]))
    >>> sparse.bcoo_transpose(M, permutation=(1, 0)).todense().tolist()
    [[0.0, 2.0], [1.0, 0.0]]
    """
    permutation = _as_tuple(permutation)
    if tuple(sorted(permutation)) != tuple(range(mat.ndim)):
        raise TypeError("transpose permutation isn't a permutation of operand dimensions, "
                        f"got permutation {permutation} for shape {mat.shape}.")
    n_batch, n_sparse, n_dense, _ = validate_bcoo(mat.data, mat.indices, mat.shape)
    out_shape = tuple(mat.shape[p] for p in permutation)
    if permutation == tuple(range(mat.ndim)):
        return mat
    batch_perm = permutation[:n_batch]
    sparse_perm = [p - n_batch for p in permutation[n_batch:n_batch + n_sparse]]
    dense_perm = [p - n_sparse - n_batch for p in permutation[n_batch + n_sparse:]]
    if n_batch and tuple(sorted(batch_perm)) != tuple(range(n_batch)):
        raise NotImplementedError("transpose permutation cannot permute batch axes with "
                                  f"non-batch axes; got permutation {permutation}, with "
                                  f"n_batch={n_batch}.")
    if n_dense and tuple(sorted(dense_perm)) != tuple(range(n_dense)):
        raise NotImplementedError("transpose permutation cannot permute dense axes with "
                                  f"non-dense axes; got permutation {permutation}, with "
                                  f"n_dense={n_dense}.")
    indices = mat.indices[..., np.array(sparse_perm, int)] if n_sparse else mat.indices
    indices = indices.transpose(*batch_perm, n_batch, n_batch + 1)
    data = mat.data.transpose(*batch_perm, n_batch, *(d + n_batch + 1 for d in dense_perm))
    sorted_ = mat.indices_sorted and sparse_perm == list(range(n_sparse))
    return BCOO((data, indices), shape=out_shape, indices_sorted=sorted_,
                unique_indices=mat.unique_indices)


# ---- dot_general ----

def _rdot_general(lhs, rhs, dimension_numbers, preferred_element_type):
    reversed_dn = tuple(d[::-1] for d in dimension_numbers)
    result = _dot_general(rhs, lhs, reversed_dn, preferred_element_type)
    n_contract, n_batch = (len(d[0]) for d in dimension_numbers)
    n_swap = rhs.ndim - n_contract
    return lax.transpose(result, (*range(n_batch), *range(n_swap, result.ndim),
                                  *range(n_batch, n_swap)))


def _dot_general(lhs, rhs, dimension_numbers, preferred_element_type,
                 name="bcoo_dot_general"):
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = map(_as_tuple, (lc, rc, lb, rb))
    out = eval_shape(lambda a, b: lax.dot_general(
        a, b, ((lc, rc), (lb, rb)), preferred_element_type=preferred_element_type),
        ShapeDtypeStruct(lhs.shape, lhs.dtype), ShapeDtypeStruct(rhs.shape, rhs.dtype))
    data, indices = lhs.data, lhs.indices
    n_batch, n_sparse, _, _ = validate_bcoo(data, indices, lhs.shape)
    if lb and max(lb) >= n_batch:
        raise NotImplementedError(
            f"{name} batch dimensions must be among the batch dimensions in the "
            f"sparse representation.\ngot lhs_batch={lb}, n_batch={n_batch}")
    if any(d >= n_batch + n_sparse for d in lc):
        raise NotImplementedError(f"{name}: contracting over dense dimensions.")
    pet = None if preferred_element_type is None else np.dtype(preferred_element_type)
    return _dot_general_impl(data, indices, rhs, ((lc, rc), (lb, rb)), pet, out.shape,
                             np.dtype(out.dtype))


@partial(jit, static_argnums=(3, 4, 5, 6))
def _dot_general_impl(data, indices, rhs, dimension_numbers, preferred_element_type,
                      out_shape, out_dtype):
    (lc, rc), (lb, rb) = dimension_numbers
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    lc_b = tuple(l for l in lc if l < n_batch)
    rc_b = tuple(r for l, r in zip(lc, rc) if l < n_batch)
    lc_s = tuple(l - n_batch for l in lc if l >= n_batch)
    rc_s = tuple(r for l, r in zip(lc, rc) if l >= n_batch)
    if lb or lc_b:   # batch dims: dot batch, free, contracted
        perm = [*lb, *remaining(range(n_batch), lb, lc_b), *lc_b]
        data = data.transpose(*perm, *range(n_batch, data.ndim))
        indices = indices.transpose(*perm, *range(n_batch, indices.ndim))
    if lc_s:         # index columns: contracted first
        indices = indices[..., np.array([*lc_s, *remaining(range(n_sparse), lc_s)], int)]
    rhs = rhs.transpose(*rb, *rc_b, *rc_s, *remaining(range(rhs.ndim), rb, rc))

    def kernel(out_array, data, indices, rhs):
        idx = tuple(indices[..., i] for i in range(n_sparse))
        idx_right, idx_out = idx[:len(lc_s)], idx[len(lc_s):]
        if idx_right and indices.ndim > 2:   # contracted batch dims index rhs too
            idx_batch = jnp.meshgrid(*(jnp.arange(n) for n in indices.shape[:-1]),
                                     indexing="ij")[:indices.ndim - 2]
            idx_right = (*idx_batch, *idx_right)
        bdims = list(range(len(lc_b) + bool(lc_s)))
        prod = lax.dot_general(data, rhs.at[idx_right].get(mode="fill", fill_value=0),
                               (((), ()), (bdims, bdims)),
                               preferred_element_type=preferred_element_type)
        if idx_out:
            return out_array.at[idx_out].add(prod)
        return prod.sum(tuple(range(prod.ndim - out_array.ndim)), dtype=out_array.dtype)

    n_vmap = n_batch - len(lc_b)
    rhs = lax.expand_dims(rhs, tuple(range(len(rb), n_vmap)))
    return nfold_vmap(kernel, n_vmap)(jnp.zeros(out_shape, out_dtype), data, indices, rhs)


# ---- reductions ----

def bcoo_reduce_sum(mat, *, axes):
    """Sparse ``lax.reduce_sum`` over ``axes``: dense axes sum the data, sparse axes drop
    their index column, batch axes fold into ``nse``. The result is a BCOO."""
    shape = mat.shape
    axes = sorted({int(a) % len(shape) if -len(shape) <= a < len(shape) else int(a)
                   for a in axes})
    if any(not 0 <= a < len(shape) for a in axes):
        raise ValueError(f"bcoo_reduce_sum: axes {axes} out of range for shape {shape}")
    validate_bcoo(mat.data, mat.indices, shape)
    data, indices = _reduce_sum_impl(mat.data, mat.indices, shape, tuple(axes))
    out_shape = tuple(s for i, s in enumerate(shape) if i not in axes)
    return BCOO((data, indices), shape=out_shape)


@partial(jit, static_argnums=(2, 3))
def _reduce_sum_impl(data, indices, shape, axes):
    n_batch, n_sparse, nse = indices.ndim - 2, indices.shape[-1], indices.shape[-2]
    data = data.sum(tuple(a - n_sparse + 1 for a in axes if a >= n_batch + n_sparse))
    if n_sparse:   # zero the data of out-of-bounds (padding) indices
        fill = jnp.array(shape[n_batch:n_batch + n_sparse], indices.dtype)
        mask = jnp.all(indices < fill, -1)
        mask = mask.reshape(mask.shape + (1,) * (data.ndim - mask.ndim))
        data = jnp.where(mask, data, jnp.zeros((), data.dtype))
    keep = [i for i in range(n_sparse) if i + n_batch not in axes]
    if keep:
        indices = indices[..., np.array(keep, int)]
    else:
        indices = jnp.zeros(indices.shape[:-1] + (0,), indices.dtype)
    batch_axes = [a for a in axes if a < n_batch]
    for ax in batch_axes:   # broadcast (size-1) batch dims first
        if data.shape[ax] == 1:
            if indices.shape[ax] == 1:
                data = data * shape[ax]
            else:
                data = lax.broadcast_in_dim(data, data.shape[:ax] + (shape[ax],) + data.shape[ax + 1:],
                                            tuple(range(data.ndim)))
        elif indices.shape[ax] == 1:
            data = data.sum(ax, keepdims=True)
    new_batch = [i for i in range(n_batch) if i not in batch_axes]
    new_nse = nse * math.prod(data.shape[i] for i in batch_axes)

    def fold(x):
        x = x.transpose(*new_batch, *batch_axes, *range(n_batch, x.ndim))
        return x.reshape(*(x.shape[:len(new_batch)]), new_nse, *x.shape[n_batch + 1:])
    return fold(data), fold(indices)


# ---- elementwise multiplication ----

def bcoo_multiply_dense(sp_mat, v):
    """Elementwise ``sp_mat * v`` for a dense ``v`` broadcasting to ``sp_mat.shape``:
    the data of the result (the sparsity pattern is ``sp_mat``'s)."""
    v = jnp.asarray(v)
    shape = sp_mat.shape
    if v.ndim == 0:   # a weak scalar takes the data's dtype where promotion would keep it
        if v.weak_type and jnp.result_type(sp_mat.dtype, v) == sp_mat.dtype:
            v = v.astype(sp_mat.dtype)
        return lax.mul(sp_mat.data, v)
    if v.shape == shape:   # distributive: duplicates need no merging
        return lax.mul(sp_mat.data, _extract(sp_mat.indices, v))
    if jnp.broadcast_shapes(v.shape, shape) != shape:
        raise NotImplementedError(
            "multiplication between sparse and dense is only implemented for cases where the "
            f"output shape matches the sparse matrix shape. Got shape={shape}, v.shape={v.shape}")
    validate_bcoo(sp_mat.data, sp_mat.indices, shape)
    return _multiply_dense_impl(sp_mat.data, sp_mat.indices,
                                lax.expand_dims(v, tuple(range(len(shape) - v.ndim))))


@jit
def _multiply_dense_impl(data, indices, v):
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]

    def kernel(data, indices, v):
        ind = tuple(indices[:, i] if s != 1 else 0 for i, s in zip(range(n_sparse), v.shape))
        return data * v[ind]
    return nfold_vmap(kernel, n_batch)(data, indices, v)


def _to_unbatched(mat):
    """The same array with n_batch = 0: batch coordinates become index columns."""
    n_batch = mat.n_batch
    if n_batch == 0:
        return mat
    batch_shape = mat.shape[:n_batch]
    data = jnp.broadcast_to(mat.data, batch_shape + mat.data.shape[n_batch:])
    indices = jnp.broadcast_to(mat.indices, batch_shape + mat.indices.shape[n_batch:])
    grid = np.stack(np.meshgrid(*(np.arange(s) for s in batch_shape), np.arange(mat.nse),
                                indexing="ij")[:-1], -1).astype(indices.dtype)
    indices = jnp.concatenate([jnp.asarray(grid), indices], -1)
    total = math.prod(batch_shape) * mat.nse
    return BCOO((data.reshape(total, *data.shape[n_batch + 1:]),
                 indices.reshape(total, indices.shape[-1])), shape=mat.shape)


def bcoo_multiply_sparse(lhs, rhs):
    """Elementwise product of two BCOOs (nse of the result: ``lhs.nse * rhs.nse``)."""
    if len(lhs.shape) != len(rhs.shape):
        raise TypeError("bcoo_multiply_sparse: arrays must have same number of dimensions, "
                        f"got {lhs.shape}, {rhs.shape}")
    if lhs.n_dense != rhs.n_dense:
        raise NotImplementedError("bcoo_multiply_sparse: arrays with differing numbers of "
                                  f"dense dimensions: {lhs}, {rhs}")
    n_batch = min(lhs.n_batch, rhs.n_batch)
    out_shape = jnp.broadcast_shapes(lhs.shape, rhs.shape)
    if lhs.n_batch != rhs.n_batch:   # JAX moves the extra batch dims into the indices
        if n_batch:
            raise NotImplementedError("bcoo_multiply_sparse with differing nonzero n_batch")
        lhs, rhs = _to_unbatched(lhs), _to_unbatched(rhs)
    data, indices = _multiply_sparse_impl(lhs.data, lhs.indices, rhs.data, rhs.indices,
                                          lhs.shape[n_batch:], rhs.shape[n_batch:], n_batch)
    return BCOO((data, indices), shape=out_shape)


@partial(jit, static_argnums=(4, 5, 6))
def _multiply_sparse_impl(ldata, lindices, rdata, rindices, lshape, rshape, n_batch):
    lnse, rnse, ns = lindices.shape[-2], rindices.shape[-2], lindices.shape[-1]
    dims = np.array([i for i, (s1, s2) in enumerate(zip(lshape[:ns], rshape[:ns]))
                     if s1 != 1 and s2 != 1], int)

    def kernel(ld, li, rd, ri):
        mask = jnp.all(li[:, None, dims] == ri[None, :, dims], -1)
        il, ir = jnp.nonzero(mask, size=lnse * rnse, fill_value=(lnse, rnse))
        data = (ld.at[il].get(mode="fill", fill_value=0) *
                rd.at[ir].get(mode="fill", fill_value=0))
        return data, jnp.maximum(li.at[il].get(mode="fill", fill_value=max(lshape, default=0)),
                                 ri.at[ir].get(mode="fill", fill_value=max(rshape, default=0)))
    return nfold_vmap(kernel, n_batch)(ldata, lindices, rdata, rindices)


# ---- duplicates and order ----

def _unique_rows(indices, sparse_shape):
    """Sorted unique rows of ``indices`` [nse, n] (out-of-bounds rows merged into one row
    equal to the shape, sorting last), padded with that row; the row each input maps to;
    the count of in-bounds unique rows."""
    nse, n = indices.shape
    if nse == 0:  # nothing stored (e.g. fromdense of zeros): nothing to merge
        return indices, jnp.zeros(0, np.int32), jnp.zeros((), np.int32)
    fill = jnp.array(sparse_shape, indices.dtype)
    ind = jnp.where((indices >= fill).any(-1, keepdims=True), fill, indices)
    *cols, perm = lax.sort((*(ind[:, i] for i in range(n)), lax.iota(np.int32, nse)),
                           num_keys=n)
    rows = jnp.stack(cols, -1)
    new = jnp.concatenate([jnp.ones(1, bool), jnp.any(rows[1:] != rows[:-1], -1)])
    group = jnp.cumsum(new.astype(np.int32)) - 1
    inverse = jnp.zeros(nse, np.int32).at[perm].set(group)
    unique = jnp.broadcast_to(fill, (nse, n)).at[group].set(rows)
    true_size = group[-1] + 1 - jnp.any(ind == fill).astype(np.int32)
    return unique, inverse, true_size


def bcoo_sum_duplicates(mat, nse=None):
    """Duplicate indices summed, indices sorted (lexicographically, per batch).

    Args:
      mat: a BCOO.
      nse: stored elements of the result; if None, computed from the indices (needs
        concrete indices). A larger ``nse`` pads, a smaller one drops the last entries.

    Returns:
      A BCOO with sorted, unique indices.
    """
    data, indices = mat.data, mat.indices
    n_batch, n_sparse, _, _ = validate_bcoo(data, indices, mat.shape)
    if n_sparse == 0:
        unique = jnp.zeros(indices.shape[:-2] + (1, 0), indices.dtype)
        data = data.sum(n_batch, keepdims=True, dtype=data.dtype)
        inverse = jnp.zeros(indices.shape[:-2] + (1,), np.int32)
    else:
        unique, inverse, true_nse = _unique_batched(indices,
                                                    mat.shape[n_batch:n_batch + n_sparse])
    if nse is None:
        nse = 1 if n_sparse == 0 else true_nse.max()
    nse = concrete_int(nse, "nse argument of bcoo_sum_duplicates")
    data_out, unique = _sum_duplicates_impl(data, unique, inverse,
                                            mat.shape[n_batch:n_batch + n_sparse], nse)
    return BCOO((data_out, unique), shape=mat.shape, indices_sorted=True, unique_indices=True)


@partial(jit, static_argnums=(1,))
def _unique_batched(indices, sparse_shape):
    return nfold_vmap(lambda i: _unique_rows(i, sparse_shape), indices.ndim - 2,
                      broadcasted=False)(indices)


@partial(jit, static_argnums=(3, 4))
def _sum_duplicates_impl(data, unique, inverse, sparse_shape, nse):
    n_batch, n_sparse = unique.ndim - 2, unique.shape[-1]
    if nse <= unique.shape[-2]:
        unique = unique[..., :nse, :]
    else:
        fill = jnp.broadcast_to(jnp.array(sparse_shape, unique.dtype),
                                unique.shape[:-2] + (nse - unique.shape[-2], n_sparse))
        unique = jnp.concatenate([unique, fill], -2)
    batch = tuple(map(max, unique.shape[:n_batch], data.shape[:n_batch]))
    data_out = jnp.zeros((*batch, nse, *data.shape[n_batch + 1:]), data.dtype)
    scatter = nfold_vmap(lambda out, m, d: out.at[m].add(d, mode="drop"), n_batch)
    return scatter(data_out, inverse, data), unique


def bcoo_eliminate_zeros(mat, nse=None):
    """Entries whose data is all zero become padding, then duplicates are summed."""
    n_batch = mat.n_batch
    mask = (mat.data == 0).all(tuple(range(n_batch + 1, mat.data.ndim)))
    mask = mask.all(tuple(i for i, s in enumerate(mat.indices.shape[:n_batch]) if s == 1),
                    keepdims=True)
    fill = jnp.array(mat.shape[n_batch:n_batch + mat.n_sparse], mat.indices.dtype)
    indices = jnp.where(mask[..., None], fill, mat.indices)
    return bcoo_sum_duplicates(BCOO((mat.data, indices), shape=mat.shape), nse=nse)


def bcoo_sort_indices(mat):
    """Indices sorted lexicographically per batch (duplicates kept), data permuted alike."""
    if mat.n_sparse == 0:
        return mat
    data, indices = _sort_indices_impl(mat.data, mat.indices)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True,
                unique_indices=mat.unique_indices)


@jit
def _sort_indices_impl(data, indices):
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]

    def sort(ind):
        *cols, perm = lax.sort((*(ind[:, i] for i in range(n_sparse)),
                                lax.iota(np.int32, ind.shape[0])), num_keys=n_sparse)
        return jnp.stack(cols, -1), perm
    indices, perm = nfold_vmap(sort, n_batch, broadcasted=False)(indices)
    return nfold_vmap(lambda d, p: d[p], n_batch)(data, perm), indices
