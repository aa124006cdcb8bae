"""``bcoo_dot_general``: the dispatch between sparse x dense (in ``_ops``) and sparse x
sparse, JAX's ``bcoo_spdot_general``: every pair of stored elements whose contracted
indices agree multiplies, then duplicates of the output indices are summed."""
import math
from functools import partial

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.experimental.sparse._bcoo import BCOO, _extract
from xform.experimental.sparse._ops import (_as_tuple, _dot_general, _rdot_general,
                                            bcoo_sum_duplicates)
from xform.experimental.sparse._util import remaining
from xform.experimental.sparse._slicing import bcoo_update_layout
from xform.transforms.jit import ShapeDtypeStruct, eval_shape, jit, make_jaxpr
from xform.transforms.vmap import vmap


def bcoo_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """Sparse ``lax.dot_general``: BCOO x dense or dense x BCOO gives a dense array,
    BCOO x BCOO a BCOO.

    Sparse x dense: each stored element gathers the matching slice of the dense operand,
    multiplies, and scatter-adds into the output, so the cost scales with ``nse``. Shapes
    are checked as dense ``dot_general`` checks them (same errors).

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCOO.fromdense(jnp.array([[1., 0.], [0., 2.]]))
    >>> sparse.bcoo_dot_general(M, jnp.ones(2), dimension_numbers=(((1,), (0,)), ((), ())))
    Array([1., 2.], dtype=float32)
    """
    del precision, out_sharding
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        return bcoo_spdot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                                  preferred_element_type=preferred_element_type)
    if isinstance(lhs, BCOO):
        return _dot_general(lhs, jnp.asarray(rhs), dimension_numbers, preferred_element_type)
    if isinstance(rhs, BCOO):
        return _rdot_general(jnp.asarray(lhs), rhs, dimension_numbers, preferred_element_type)
    return lax.dot_general(lhs, rhs, dimension_numbers,
                           preferred_element_type=preferred_element_type)


def bcoo_dot_general_sampled(A, B, indices, *, dimension_numbers):
    """``lax.dot_general(A, B)`` of dense operands evaluated at BCOO ``indices`` only: the
    ``data`` of a BCOO with those indices. NB: computed as the dense product, then a
    gather (JAX's general path; its matvec special case is an optimisation).

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> sparse.bcoo_dot_general_sampled(jnp.ones((2, 3)), jnp.ones((3, 2)),
    ...     jnp.array([[0, 1]]), dimension_numbers=(((1,), (0,)), ((), ())))
    Array([3.], dtype=float32)
    """
    A, B, indices = map(jnp.asarray, (A, B, indices))
    dn = tuple(tuple(map(_as_tuple, d)) for d in dimension_numbers)
    return _sampled(A, B, indices, dn)


@partial(jit, static_argnums=(3,))
def _sampled(A, B, indices, dimension_numbers):
    prod = lax.dot_general(A, B, dimension_numbers, precision=lax.Precision.HIGHEST)
    return _extract(indices, prod)


def bcoo_spdot_general(lhs, rhs, *, dimension_numbers, preferred_element_type=None):
    """BCOO x BCOO contraction over sparse dimensions (no dense dims), as a BCOO with
    ``nse`` = product of the operands' (capped at the output's sparse size)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = map(_as_tuple, (lc, rc, lb, rb))
    out = eval_shape(lambda a, b: lax.dot_general(
        a, b, ((lc, rc), (lb, rb)), preferred_element_type=preferred_element_type),
        ShapeDtypeStruct(lhs.shape, lhs.dtype), ShapeDtypeStruct(rhs.shape, rhs.dtype))
    if lhs.n_dense or rhs.n_dense:
        raise NotImplementedError("bcoo_spdot_general with dense dimensions.")
    if (lb and max(lb) >= lhs.n_batch) or (rb and max(rb) >= rhs.n_batch):
        raise NotImplementedError("bcoo_spdot_general: batch_dims must correspond to batch "
                                  "dimensions of the sparse representation.")
    for c, m in ((lc, lhs), (rc, rhs)):
        if c and (min(c) < m.n_batch or max(c) >= m.n_batch + m.n_sparse):
            raise NotImplementedError("bcoo_spdot_general only supports contraction of "
                                      "sparse indices.")
    if rhs.n_batch > len(rb) and lhs.n_sparse > len(lc):
        raise ValueError("bcoo_spdot_general: cannot have unused batch dims on rhs with "
                         "unused sparse dims on lhs.")
    out_n_batch = lhs.n_batch + rhs.n_batch - len(lb)
    out_nse = ((lhs.nse if lhs.n_sparse > len(lc) else 1)
               * (rhs.nse if rhs.n_sparse > len(rc) else 1))
    out_nse = min(out_nse, math.prod(out.shape[out_n_batch:]))
    data, indices = _spdot_impl(
        *_batch_front(lhs, lb), *_batch_front(rhs, rb), lhs.shape, rhs.shape,
        ((lc, rc), (lb, rb)), out_nse, np.dtype(out.dtype))
    return BCOO((data, indices), shape=out.shape)


def _batch_front(mat, bdims):
    """data, indices with the dot's batch dims first and size-1 batch dims broadcast."""
    nb = mat.n_batch
    perm = [*bdims, *remaining(range(nb), bdims)]
    batch = tuple(mat.shape[p] for p in perm)
    data = mat.data.transpose(*perm, *range(nb, mat.data.ndim))
    indices = mat.indices.transpose(*perm, *range(nb, mat.indices.ndim))
    return (jnp.broadcast_to(data, batch + data.shape[nb:]),
            jnp.broadcast_to(indices, batch + indices.shape[nb:]))


@partial(jit, static_argnums=(4, 5, 6, 7, 8))
def _spdot_impl(ldata, lindices, rdata, rindices, lshape, rshape, dimension_numbers,
                out_nse, out_dtype):
    (lc, rc), (lb, _) = dimension_numbers
    lnb, rnb = lindices.ndim - 2, rindices.ndim - 2
    f = partial(_spdot_unbatched, lshape=lshape[lnb:], rshape=rshape[rnb:],
                lc=tuple(d - lnb for d in lc), rc=tuple(d - rnb for d in rc),
                out_nse=out_nse, out_dtype=out_dtype)
    for _ in range(rnb - len(lb)):
        f = vmap(f, in_axes=(None, None, 0, 0))
    for _ in range(lnb - len(lb)):
        f = vmap(f, in_axes=(0, 0, None, None))
    for _ in range(len(lb)):
        f = vmap(f)
    return f(ldata, lindices, rdata, rindices)


def _spdot_unbatched(ldata, lindices, rdata, rindices, *, lshape, rshape, lc, rc, out_nse,
                     out_dtype):
    lnse, rnse = lindices.shape[0], rindices.shape[0]
    out_shape = (*(s for i, s in enumerate(lshape) if i not in lc),
                 *(s for i, s in enumerate(rshape) if i not in rc))
    cols = lambda ind, c: ind[:, np.array(c, int)] if c else ind[:, :0]
    li, ri = cols(lindices, lc), cols(rindices, rc)
    lj = cols(lindices, remaining(range(lindices.shape[1]), lc))
    rj = cols(rindices, remaining(range(rindices.shape[1]), rc))
    overlap = (li[:, None] == ri[None, :]).all(-1)
    lvalid = (li < jnp.array([lshape[d] for d in lc], li.dtype)).all(-1)
    rvalid = (ri < jnp.array([rshape[d] for d in rc], ri.dtype)).all(-1)
    prod = (ldata[:, None] * rdata[None, :]).astype(out_dtype)
    data = jnp.where(overlap & lvalid[:, None] & rvalid[None, :], prod,
                     jnp.zeros((), out_dtype)).ravel()
    idx_dtype = jnp.result_type(lindices, rindices)
    indices = jnp.concatenate([jnp.broadcast_to(lj[:, None], (lnse, rnse, lj.shape[1])),
                               jnp.broadcast_to(rj[None, :], (lnse, rnse, rj.shape[1]))],
                              -1).astype(idx_dtype).reshape(lnse * rnse, lj.shape[1] + rj.shape[1])
    # Zeros are kept (not eliminated): eliminating them breaks autodiff (JAX issue 10163).
    out = bcoo_sum_duplicates(BCOO((data, indices), shape=out_shape), nse=out_nse)
    return out.data, out.indices


# ---- conv_general_dilated ----

def bcoo_conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation=None,
                              rhs_dilation=None, dimension_numbers=None,
                              feature_group_count=1, batch_group_count=1, precision=None,
                              preferred_element_type=None, out_sharding=None):
    """Sparse ``lax.conv_general_dilated``, JAX's case only: 1-D, unit strides and
    dilations, no groups, leading dimensions (1, 1). Every pair of stored elements
    contributes at ``i_lhs + pad_lo - i_rhs`` (a BCOO with nse = lhs.nse * rhs.nse)."""
    del precision, preferred_element_type, out_sharding
    params = make_jaxpr(lambda a, b: lax.conv_general_dilated(
        a, b, window_strides, padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
        dimension_numbers=dimension_numbers, feature_group_count=feature_group_count,
        batch_group_count=batch_group_count))(
        ShapeDtypeStruct(lhs.shape, lhs.dtype), ShapeDtypeStruct(rhs.shape, rhs.dtype)
    ).jaxpr.eqns[0].params
    if params["lhs_dilation"] != (1,) * (lhs.ndim - 2):
        raise NotImplementedError("bcoo convolution with lhs_dilation.")
    if params["rhs_dilation"] != (1,) * (rhs.ndim - 2):
        raise NotImplementedError("bcoo convolution with rhs_dilation.")
    if params["window_strides"] != (1,) * (lhs.ndim - 2):
        raise NotImplementedError("bcoo convolution with non-unit window_strides.")
    if (params["batch_group_count"], params["feature_group_count"]) != (1, 1):
        raise NotImplementedError("bcoo convolution with non-unit group counts.")
    if tuple(lhs.shape[:2]) != (1, 1) or tuple(rhs.shape[:2]) != (1, 1):
        raise NotImplementedError("bcoo convolution with leading dimensions other than (1, 1)")
    if lhs.ndim != 3:
        raise NotImplementedError("bcoo convolution with more than one spatial dimension.")
    index_dtype = next((m.indices.dtype for m in (lhs, rhs) if isinstance(m, BCOO)), np.int32)
    (lo, hi), = params["padding"]
    (ld, li), (rd, ri) = (_as_1d(m, np.dtype(index_dtype)) for m in (lhs, rhs))
    size = max(0, lhs.shape[-1] + lo + hi - rhs.shape[-1] + 1)
    data, indices = _conv_1d(ld, li, rd, ri, int(lo))
    return BCOO((data, indices), shape=(1, 1, size))


def _as_1d(mat, index_dtype):
    """(data, indices) of a (1, 1, n) operand as an unbatched 1-D BCOO's buffers."""
    if isinstance(mat, BCOO):
        mat = bcoo_update_layout(mat, n_batch=2, n_dense=0)
        data, indices = mat.data[0, 0], mat.indices[0, 0]
        return jnp.where(indices[:, 0] < mat.shape[-1], data, 0).astype(data.dtype), indices
    mat = jnp.asarray(mat)
    return mat[0, 0], lax.broadcasted_iota(index_dtype, (mat.shape[-1], 1), 0)


@partial(jit, static_argnums=(4,))
def _conv_1d(ldata, lindices, rdata, rindices, pad_lo):
    if ldata.dtype != rdata.dtype:
        raise TypeError(f"bcoo_conv_general_dilated: operand dtypes {ldata.dtype} and "
                        f"{rdata.dtype} differ")
    data = (ldata[:, None] * rdata[None, :]).ravel()
    indices = (lindices[:, None, 0] + (pad_lo - rindices[None, :, 0])).ravel()
    data = jnp.where(indices < 0, jnp.zeros((), data.dtype), data)
    indices = jnp.where(indices < 0, 0, indices)
    return data[None, None], indices[None, None, :, None]
