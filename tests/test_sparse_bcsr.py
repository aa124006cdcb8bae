"""xform's BCSR and sparse jacfwd/jacrev against jax.experimental.sparse: the same dense
inputs through both libraries, each jitted once; buffers (data/indices/indptr, whose
layout JAX defines) and dense values must match, as must JAX's errors."""
import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import sparse as jsp

import xform
import xform.numpy as jnp
from xform.experimental import sparse as xsp

from sparse_util import assert_trees_close, dense


X3 = dense((2, 3, 4))
NSE0 = int((X3[0] != 0).sum())               # nonzeros of X3[0] (n_batch=0)
NSE1 = int((X3 != 0).sum((1, 2)).max())      # most nonzeros of an X3[i] (n_batch=1)


def test_bcsr_matches_jax():
    v = np.arange(4, dtype=np.float32)

    def f(lib, sp, x, v):
        M0 = sp.BCSR.fromdense(x[0], nse=NSE0)
        M = sp.BCSR.fromdense(x, nse=NSE1 + 1, n_batch=1)   # padded
        R = sp.BCSR.from_bcoo(M.to_bcoo())
        D = M.sum_duplicates(nse=M.nse)   # remove_zeros: bcsr_eliminate_zeros
        B = sp.bcsr_broadcast_in_dim(M0, shape=(2, 3, 4), broadcast_dimensions=(1, 2))
        K = sp.bcsr_concatenate([M0, M0], dimension=0)
        return [M0.data, M0.indices, M0.indptr, M0.to_bcoo().indices, M.data, M.indices,
                M.indptr, M.todense(), R.indptr, D.indices, D.indptr,
                sp.bcsr_extract(M.indices, M.indptr, 2 * x),
                sp.bcsr_dot_general(M, lib.ones((4, 2)),
                                    dimension_numbers=(((2,), (0,)), ((), ()))),
                B.indptr, K.indices, K.indptr, sp.sparsify(lambda M, v: lib.sin(M) @ v)(M0, v),
                sp.bcoo_dot_general_sampled(x, lib.ones((2, 4, 4)), M.to_bcoo().indices,
                                            dimension_numbers=(((2,), (1,)), ((0,), (0,))))]
    xo = xform.jit(lambda *a: f(jnp, xsp, *a))(X3, v)
    jo = jax.jit(lambda *a: f(jjnp, jsp, *a))(X3, v)
    assert_trees_close(xo, jo)
    X = xsp.BCSR.fromdense(X3[0])   # eager: nse computed from the values
    J = jsp.BCSR(tuple(jo[:3]), shape=X.shape)
    assert repr(X) == repr(J)
    assert_trees_close(X._bufs, J._bufs)


def test_bcsr_errors_match_jax():
    X = xsp.BCSR.fromdense(X3[0])
    J = jsp.BCSR(tuple(map(jjnp.asarray, X._bufs)), shape=X.shape)
    E, JE = (sp.empty((2, 3), sparse_format="bcsr", nse=2) for sp in (xsp, jsp))
    assert repr(E) == repr(JE)
    assert_trees_close(E._bufs, JE._bufs)
    for sp, lib, M in [(xsp, jnp, X), (jsp, jjnp, J)]:
        with pytest.raises(NotImplementedError, match="Transpose is not implemented"):
            M.T
        with pytest.raises(ValueError, match="must have 2 sparse dimensions"):
            sp.bcsr_fromdense(lib.ones((2, 3, 4)), nse=1)
        with pytest.raises(ValueError, match="indptr shape must match"):
            sp.BCSR((M.data, M.indices, np.zeros(2, np.int32)), shape=M.shape)
        with pytest.raises(NotImplementedError, match="BCSR lhs and ndarray rhs"):
            sp.bcsr_dot_general(lib.ones((2, 3)), M, dimension_numbers=(((1,), (0,)), ((), ())))
        with pytest.raises(NotImplementedError, match="sparse rule for mul"):
            sp.sparsify(lambda M: M * M)(M)
        with pytest.raises(ValueError, match="not recognized"):
            sp.empty((2, 3), sparse_format="dok")


def test_bcsr_vmap_matches_jax():   # its AD: test_sparse_jacobians_match_jax
    Xb, v = xsp.BCSR.fromdense(X3, n_batch=1), np.arange(4, dtype=np.float32)
    Jb = jsp.BCSR(tuple(map(jjnp.asarray, Xb._bufs)), shape=Xb.shape)
    xo = xform.vmap(lambda M, v: (M @ v, M.todense()), in_axes=(0, None))(Xb, jnp.asarray(v))
    jo = jax.jit(jax.vmap(lambda M, v: (M @ v, M.todense()), in_axes=(0, None)))(Jb, v)
    assert_trees_close(xo, jo)
    with pytest.raises(ValueError, match="n_batch=0"):
        xform.vmap(lambda M: M.todense())(xsp.BCSR.fromdense(X3[0]))


def test_sparse_jacobians_match_jax():
    """jacfwd of a BCOO and jacrev of a BCSR argument (with a dense one and aux)."""
    x, v = X3[0], np.arange(4, dtype=np.float32)
    d, i = (np.asarray(b) for b in xsp.BCOO.fromdense(x)._bufs)
    bufs = [np.asarray(b) for b in xsp.BCSR.fromdense(x)._bufs]

    def f(lib, sp, d, i, c, ci, p, v):
        fun = lambda M, v: (lib.sin(M @ v), (M @ v).sum())
        A = sp.jacfwd(fun, argnums=(0, 1), has_aux=True)(sp.BCOO((d, i), shape=x.shape), v)
        B = sp.jacrev(fun, argnums=(0, 1), has_aux=True)(sp.BCSR((c, ci, p), shape=x.shape), v)
        return A, B
    xo = xform.jit(lambda *a: f(jnp, xsp, *a))(d, i, *bufs, v)
    jo = jax.jit(lambda *a: f(jjnp, jsp, *a))(d, i, *bufs, v)
    for ((xm, xv), xaux), ((jm, jv), jaux) in zip(xo, jo):
        assert repr(xm) == repr(jm)   # format, shape, nse, n_batch (output axes)
        assert_trees_close((xm._bufs, xv, xaux), (jm._bufs, jv, jaux))


def test_coo_csr_csc_match_jax():
    x, v, B = X3[0], np.arange(4, dtype=np.float32), np.ones((3, 2), np.float32)

    def f(lib, sp, x, v, B):
        outs = []
        for cls in (sp.COO, sp.CSR, sp.CSC):
            M = cls.fromdense(x, nse=NSE0 + 1)   # padded (JAX's padding differs per class)
            outs += [M.data, M.row if cls is sp.COO else M.indptr, M.todense(), M @ v,
                     M.T @ B]
        return outs + [sp.csr_matvec(sp.CSR.fromdense(x, nse=NSE0), B[:, 0], transpose=True)]
    xo = xform.jit(lambda *a: f(jnp, xsp, *a))(x, v, B)
    jo = jax.jit(lambda *a: f(jjnp, jsp, *a))(x, v, B)
    assert_trees_close(xo, jo)
    made = lambda sp: (sp.eye(3, 4, -1, sparse_format="coo"),
                       sp.eye(3, 4, 1, sparse_format="csc"), sp.empty((3, 4), sparse_format="csr"))
    for xm, jm in zip(made(xsp), jax.jit(lambda: made(jsp))()):   # csc's eye: csr's, .T
        assert repr(xm) == repr(jm)
        assert_trees_close(xm._bufs, jm._bufs if hasattr(jm, "_bufs") else
                           (jm.data, jm.indices, jm.indptr))
    X = xsp.COO((xo[0], xo[1], xo[1]), shape=x.shape)   # any in-bounds columns
    J = jsp.COO(tuple(map(jjnp.asarray, X._bufs)), shape=x.shape)
    g, jg = (w(sp.grad(lambda M: (M @ v).sum()))(M)
             for sp, M, w in [(xsp, X, lambda f: f), (jsp, J, jax.jit)])
    assert isinstance(g, xsp.COO)
    np.testing.assert_allclose(g.data, jg.data)
