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


def dense(shape, seed=0, density=0.5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    x[rng.random(shape) > density] = 0
    return x


def assert_trees_close(xo, jo, tol=1e-5):
    xl, jl = jax.tree.leaves(xo), jax.tree.leaves(jo)
    assert len(xl) == len(jl)
    for i, (a, b) in enumerate(zip(xl, jl)):
        assert np.shape(a) == np.shape(b), (i, np.shape(a), np.shape(b))
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol,
                                   err_msg=f"output {i}")


X3 = dense((2, 3, 4))
NSE = {0: 6, 1: 4}   # >= the nonzeros of X3[0] (n_batch=0) / of each X3[i] (n_batch=1)


def test_bcsr_buffers_and_ops_match_jax():
    v = np.arange(4, dtype=np.float32)

    def f(lib, sp, x, v):
        M0 = sp.BCSR.fromdense(x[0], nse=NSE[0])
        M = sp.BCSR.fromdense(x, nse=NSE[1] + 1, n_batch=1)   # padded
        R = sp.BCSR.from_bcoo(M.to_bcoo())
        D = M.sum_duplicates(nse=M.nse, remove_zeros=False)
        B = sp.bcsr_broadcast_in_dim(M0, shape=(2, 3, 4), broadcast_dimensions=(1, 2))
        K = sp.bcsr_concatenate([M0, M0], dimension=0)
        return [M0.data, M0.indices, M0.indptr, M0.to_bcoo().indices, M.data, M.indices,
                M.indptr, M.todense(), R.indptr, D.indices, D.indptr,
                sp.bcsr_extract(M.indices, M.indptr, 2 * x), M @ v,
                sp.bcsr_dot_general(M, lib.ones((4, 2)),
                                    dimension_numbers=(((2,), (0,)), ((), ()))),
                B.indptr, K.indices, K.indptr, sp.sparsify(lambda M, v: lib.sin(M) @ v)(M0, v)]
    xo = xform.jit(lambda *a: f(jnp, xsp, *a))(X3, v)
    jo = jax.jit(lambda *a: f(jjnp, jsp, *a))(X3, v)
    assert_trees_close(xo, jo)


def test_bcsr_eager_layout_repr_and_errors():
    x = X3[0]
    X, J = xsp.BCSR.fromdense(x), jsp.BCSR.fromdense(x)   # nse computed from the values
    assert repr(X) == repr(J) and (X.nse, X.n_batch, X.n_dense) == (J.nse, J.n_batch, J.n_dense)
    for a, b in zip((X.data, X.indices, X.indptr), (J.data, J.indices, J.indptr)):
        np.testing.assert_array_equal(a, b)
    Xs = X.sum_duplicates()   # eager: nse from the indices, explicit zeros dropped
    assert Xs.nse == J.nse
    np.testing.assert_array_equal(Xs.indptr, J.indptr)
    E, JE = (sp.empty((2, 3), sparse_format="bcsr", nse=2, n_batch=0) for sp in (xsp, jsp))
    assert repr(E) == repr(JE)
    for a, b in zip((E.data, E.indices, E.indptr), (JE.data, JE.indices, JE.indptr)):
        np.testing.assert_array_equal(a, b)
    for sp, lib, M in [(xsp, jnp, X), (jsp, jjnp, J)]:
        with pytest.raises(NotImplementedError, match="Transpose is not implemented"):
            M.T
        with pytest.raises(ValueError, match="must have 2 sparse dimensions"):
            sp.bcsr_fromdense(lib.ones((2, 3, 4)), nse=1)
        with pytest.raises(ValueError, match="indptr shape must match"):
            sp.BCSR((M.data, M.indices, M.indptr[:-1]), shape=M.shape)
        with pytest.raises(NotImplementedError, match="BCSR lhs and ndarray rhs"):
            sp.bcsr_dot_general(lib.ones((2, 3)), M, dimension_numbers=(((1,), (0,)), ((), ())))
        with pytest.raises(NotImplementedError, match="sparse rule for mul"):
            sp.sparsify(lambda M: M * M)(M)
        with pytest.raises(ValueError, match="not recognized"):
            sp.empty((2, 3), sparse_format="dok")


def test_bcsr_grad_and_vmap_match_jax():
    Xb, v = xsp.BCSR.fromdense(X3, n_batch=1), np.arange(4, dtype=np.float32)
    Jb = jsp.BCSR((jjnp.asarray(Xb.data), jjnp.asarray(Xb.indices), jjnp.asarray(Xb.indptr)),
                  shape=Xb.shape)
    loss = lambda lib: lambda M, v: lib.sum(lib.tanh(M @ v))
    xg = xsp.grad(loss(jnp))(Xb, jnp.asarray(v))
    jg = jax.jit(jsp.grad(loss(jjnp)))(Jb, jjnp.asarray(v))
    assert isinstance(xg, xsp.BCSR) and repr(xg) == repr(jg)
    assert_trees_close((xg.data, xg.indices, xg.indptr), (jg.data, jg.indices, jg.indptr))
    xo = xform.vmap(lambda M, v: (M @ v, M.todense()), in_axes=(0, None))(Xb, jnp.asarray(v))
    jo = jax.jit(jax.vmap(lambda M, v: (M @ v, M.todense()), in_axes=(0, None)))(Jb, v)
    assert_trees_close(xo, jo)
    with pytest.raises(ValueError, match="n_batch=0"):
        xform.vmap(lambda M: M.todense())(xsp.BCSR.fromdense(X3[0]))


@pytest.mark.parametrize("fmt", ["BCOO", "BCSR"])
def test_sparse_jacobians_match_jax(fmt):
    x, v = X3[0], np.arange(4, dtype=np.float32)
    X, J = getattr(xsp, fmt).fromdense(x), getattr(jsp, fmt).fromdense(x)
    f = lambda lib: lambda M, v: lib.sin(M @ v)
    for xjac, jjac in [(xsp.jacfwd, jsp.jacfwd), (xsp.jacrev, jsp.jacrev)]:
        xo = xjac(f(jnp), argnums=(0, 1))(X, jnp.asarray(v))
        jo = jax.jit(jjac(f(jjnp), argnums=(0, 1)))(J, jjnp.asarray(v))
        assert type(xo[0]).__name__ == fmt and repr(xo[0]) == repr(jo[0])
        assert_trees_close((xo[0]._bufs, xo[1]), (jo[0]._bufs, jo[1]))
    xa, aux = xsp.jacobian(lambda M: (M @ jnp.asarray(v), 3), has_aux=True)(X)
    assert aux == 3 and xa.shape == (3, 3, 4)
