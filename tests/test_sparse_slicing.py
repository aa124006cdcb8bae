"""BCOO slicing/indexing/layout and sparsify of control flow against
jax.experimental.sparse: buffers (where JAX defines them) and dense values must match,
jitted once per library; where JAX's own implementation fails, against NumPy."""
import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import sparse as jsp

import xform
import xform.numpy as jnp
from xform.experimental import sparse as xsp

from sparse_util import assert_trees_close, dense

X3 = dense((2, 4, 3))


def parts(x, n_batch, n_dense):
    M = xsp.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    return np.asarray(M.data), np.asarray(M.indices)


def bufs(M):
    return [M.data, M.indices]   # todense of equal buffers is tested in test_sparse.py


# Per layout (n_batch, n_dense) of X3, the indexing cases: each a function of the
# library, its sparse module, the BCOO and a traced index. gather only where n_dense == 0
# (JAX's bcoo_gather fails with dense dims: a reshape error).
SLICE_CASES = {
    (1, 1): [
        lambda lib, sp, M, k: sp.bcoo_slice(M, start_indices=(0, 1, 0),
                                            limit_indices=(2, 4, 3), strides=(1, 2, 1)),
        lambda lib, sp, M, k: sp.bcoo_dynamic_slice(M, (k, k + 1, 1), (1, 2, 2)),
        lambda lib, sp, M, k: sp.bcoo_rev(M, (0, 1, 2)),
        lambda lib, sp, M, k: M[k],   # dynamic_slice + squeeze of a batch dim
        lambda lib, sp, M, k: sp.bcoo_update_layout(M, n_batch=0, n_dense=0),
    ],
    (0, 0): [
        lambda lib, sp, M, k: M[1, 1:3],   # slice + squeeze of a sparse dim
        lambda lib, sp, M, k: M[..., ::-1],
        lambda lib, sp, M, k: M[:, lib.array([0, 3])],
        lambda lib, sp, M, k: sp.bcoo_update_layout(M, n_batch=1, n_dense=1,
                                                    on_inefficient=None),
    ],
}


@pytest.mark.parametrize("layout", list(SLICE_CASES))
def test_slicing_and_layout_match_jax(layout):
    d, i = parts(X3, *layout)

    def f(lib, sp, d, i, k):
        M = sp.BCOO((d, i), shape=X3.shape)
        return [b for case in SLICE_CASES[layout] for b in bufs(case(lib, sp, M, k))]
    xo = xform.jit(lambda *a: f(jnp, xsp, *a))(d, i, 1)
    jo = jax.jit(lambda *a: f(jjnp, jsp, *a))(d, i, 1)
    assert_trees_close(xo, jo)


def test_gather_with_dense_dims_and_iteration():
    """JAX's bcoo_gather fails for n_dense > 0; xform's must agree with NumPy."""
    d, i = parts(X3, 1, 1)

    def f(d, i):
        M = xsp.BCOO((d, i), shape=X3.shape)
        return [M[:, jnp.array([0, 3])].todense(), *(r.todense() for r in M[1, 1:3])]
    gathered, *rows = xform.jit(f)(d, i)   # BCOO.__iter__ yields BCOO rows
    np.testing.assert_array_equal(gathered, X3[:, [0, 3]])
    np.testing.assert_array_equal(np.stack(rows), X3[1, 1:3])


def test_slicing_errors_match_jax():
    d, i = parts(X3[0], 0, 0)
    X, J = xsp.BCOO((d, i), shape=(4, 3)), jsp.BCOO((d, i), shape=(4, 3))
    for sp, M, lib in [(xsp, X, xform), (jsp, J, jax)]:
        with pytest.raises(ValueError, match="invalid indices"):
            sp.bcoo_slice(M, start_indices=(0, 0), limit_indices=(5, 3))
        with pytest.raises(ValueError, match="strides must be a sequence of positive"):
            sp.bcoo_slice(M, start_indices=(0, 0), limit_indices=(2, 3), strides=(0, 1))
        with pytest.raises(ValueError, match="size not equal to one"):
            sp.bcoo_squeeze(M, dimensions=(0,))
        with pytest.raises(sp.SparseEfficiencyError, match="increasing n_batch from 0 to 1"):
            sp.bcoo_update_layout(M, n_batch=1)
        with pytest.warns(sp.SparseEfficiencyWarning):   # at trace time: no compile
            lib.eval_shape(lambda: sp.bcoo_update_layout(M, n_dense=1, on_inefficient="warn"))
        with pytest.raises(TypeError):   # lax.dynamic_slice's own check (size > shape)
            sp.bcoo_dynamic_slice(M, (0, 0), (5, 1))


def _control_flow(lib, lax, sp, M, v):
    def body(c):
        i, A = c
        return i + 1, A * 2.0
    _, A = lax.while_loop(lambda c: c[0] < 3, body, (0, M))
    return sp.todense(A), _cond_scan(lib, lax, A, v)


def _cond_scan(lib, lax, M, v):   # differentiable: no while_loop
    B = lax.cond(v.sum() > 0, lambda A: lib.sin(A) * 3.0, lambda A: -A, M)
    C, _ = lax.scan(lambda c, _: (c * c, None), B, None, length=2)   # JAX: no xs, no ys
    return (C @ v).sum()


def test_sparsify_control_flow_matches_jax():
    d, i = parts(X3[0], 0, 0)
    v = np.array([1., -2., .5], np.float32)

    def f(lib, lax, sp, d, i, v):
        M = sp.BCOO((d, i), shape=(4, 3), indices_sorted=True, unique_indices=True)
        outs = sp.sparsify(lambda M, v: _control_flow(lib, lax, sp, M, v))(M, v)
        g = sp.grad(sp.sparsify(lambda M, v: _cond_scan(lib, lax, M, v)))(M, v)
        return outs, g.data
    xo = xform.jit(lambda *a: f(jnp, xform.lax, xsp, *a))(d, i, v)
    jo = jax.jit(lambda *a: f(jjnp, jax.lax, jsp, *a))(d, i, v)
    assert_trees_close(xo, jo, tol=1e-4)


def test_sparsify_scan_with_xs_and_carry_errors():
    """Dense xs/ys in a sparse scan (JAX's rule refuses any xs): against the dense scan."""
    M = xsp.BCOO.fromdense(X3[0])
    xs = np.arange(1., 4., dtype=np.float32)
    step = lambda c, x: (c * x, (c @ jnp.ones(3)).sum())
    carry, ys = xsp.sparsify(lambda M, xs: xform.lax.scan(step, M, xs))(M, xs)
    jstep = lambda c, x: (c * x, c.sum())
    jc, jy = jax.lax.scan(jstep, X3[0], xs)
    assert_trees_close((carry.todense(), ys), (jc, jy))
    D = xsp.BCOO((jnp.ones(2), jnp.array([[0, 1], [1, 0]])), shape=(2, 2))   # not unique
    with pytest.raises(TypeError, match="same structure, nse and layout"):
        xsp.sparsify(lambda M: xform.lax.while_loop(lambda c: c.sum() < 3, lambda c: c * c, M))(D)
    with pytest.raises(TypeError, match="same structure, nse and layout"):
        xsp.sparsify(lambda M: xform.lax.cond(True, lambda c: c * c, lambda c: c, M))(D)


def test_conv_matches_jax():
    """bcoo_conv_general_dilated (JAX's 1-D case), direct and through sparsify."""
    x = np.array([[[0, 1., 0, 2, 3, 0, 0]]], np.float32)
    k = np.array([[[1., 0, -2]]], np.float32)

    def f(lib, lax, sp, x, k):
        X, K = sp.BCOO.fromdense(x, nse=3), sp.BCOO.fromdense(k, nse=2)
        outs = []
        for a, b in [(X, K), (x, K)]:
            o = sp.bcoo_conv_general_dilated(a, b, window_strides=(1,), padding=[(1, 2)])
            outs += [o.data, o.indices, o.todense()]
        same = sp.sparsify(lambda a, b: lax.conv_general_dilated(a, b, (1,), "SAME"))(X, k)
        return outs + [sp.todense(same), lax.conv_general_dilated(x, k, (1,), [(1, 2)])]
    xo = xform.jit(lambda *a: f(jnp, xform.lax, xsp, *a))(x, k)
    jo = jax.jit(lambda *a: f(jjnp, jax.lax, jsp, *a))(x, k)
    assert_trees_close(xo, jo)
    assert_trees_close(xo[2], jo[-1])   # the sparse convolution is the dense one
    with pytest.raises(NotImplementedError, match="non-unit window_strides"):
        xsp.bcoo_conv_general_dilated(xsp.BCOO((x[0, 0, :1], np.zeros((1, 3), np.int32)),
                                               shape=x.shape), k, window_strides=(2,),
                                      padding="VALID")
