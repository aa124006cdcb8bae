"""xform.experimental.sparse against jax.experimental.sparse: the same dense inputs go
through both; todense results (and data/indices where JAX's are deterministic) must
match, across n_batch/n_dense layouts, padding, duplicates, jit, vmap, grad, sparsify."""
import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import sparse as jsp

import xform
import xform.numpy as jnp
from xform.experimental import sparse as xsp

LAYOUTS = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0)]   # (n_batch, n_dense) of a rank-3 array


def dense(shape, seed=0, density=0.4):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    x[rng.random(shape) > density] = 0
    return x


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def both(x, **kw):
    return xsp.BCOO.fromdense(x, **kw), jsp.BCOO.fromdense(jjnp.asarray(x), **kw)


def with_duplicates():
    """A BCOO with a duplicate index and a padding (out-of-bounds) index, in both libs."""
    data = np.array([1., 2., 3., 4.], np.float32)
    indices = np.array([[0, 1], [2, 0], [0, 1], [3, 3]], np.int32)
    return (xsp.BCOO((data, indices), shape=(3, 3)),
            jsp.BCOO((jjnp.asarray(data), jjnp.asarray(indices)), shape=(3, 3)))


def nse_of(x, n_batch, n_dense):
    mask = (x != 0).any(tuple(range(x.ndim - n_dense, x.ndim))) if n_dense else x != 0
    return int(mask.sum(tuple(range(n_batch, mask.ndim))).max())


def run_both(f, *args):
    """``f(lib, sparse, *args)`` jitted in xform and in JAX (one compile each)."""
    xo = xform.jit(lambda *a: f(jnp, xsp, *a))(*map(jnp.asarray, args))
    jo = jax.jit(lambda *a: f(jjnp, jsp, *a))(*map(jjnp.asarray, args))
    return xo, jo


def assert_trees_close(xo, jo, tol=1e-5):
    xl, jl = jax.tree.leaves(xo), jax.tree.leaves(jo)
    assert len(xl) == len(jl)
    for i, (a, b) in enumerate(zip(xl, jl)):
        assert np.shape(a) == np.shape(b), (i, np.shape(a), np.shape(b))
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol,
                                   err_msg=f"output {i}")


def test_fromdense_todense_match_jax():
    x = dense((3, 4, 2))
    nses = [nse_of(x, n_batch, n_dense) for n_batch, n_dense in LAYOUTS]

    def f(lib, sp, x):
        outs = []
        for (n_batch, n_dense), nse in zip(LAYOUTS, nses):
            M = sp.BCOO.fromdense(x, nse=nse, n_batch=n_batch, n_dense=n_dense)
            P = sp.BCOO.fromdense(x, nse=nse + 2, n_batch=n_batch, n_dense=n_dense)  # padded
            outs += [M.data, M.indices, M.todense(), P.indices, sp.todense(P)]
        return outs
    assert_trees_close(*run_both(f, x))
    X, J = both(x, n_batch=1, n_dense=1)   # eager, nse computed from the values
    assert (X.nse, X.n_batch, X.n_sparse, X.n_dense) == (J.nse, J.n_batch, J.n_sparse, J.n_dense)
    assert repr(X) == repr(J)
    same(X.todense(), x)


def test_duplicates_and_padding_match_jax():
    data = np.array([1., 2., 3., 4.], np.float32)
    indices = np.array([[0, 1], [2, 0], [0, 1], [3, 3]], np.int32)

    def f(lib, sp, data, indices):
        M = sp.BCOO((data, indices), shape=(3, 3))
        outs = [M.todense(), M.sum(), M.sum(0).todense()]
        for nse in (1, 4):
            S = M.sum_duplicates(nse=nse, remove_zeros=False)
            outs += [S.data, S.indices]
        S = M.sort_indices()
        outs += [S.data, S.indices, sp.bcoo_extract(M, lib.arange(9.).reshape(3, 3)).data]
        # batched duplicates: every entry stored twice
        for n_batch, n_dense in [(1, 0), (0, 1)]:
            B = sp.BCOO.fromdense(lib.arange(12.).reshape(3, 4) % 3, nse=4 if n_batch else 3,
                                  n_batch=n_batch, n_dense=n_dense)
            D = sp.BCOO((lib.concatenate([B.data, B.data], n_batch),
                         lib.concatenate([B.indices, B.indices], n_batch)), shape=B.shape)
            S = D.sum_duplicates(nse=B.nse, remove_zeros=False)
            outs += [S.data, S.indices, D.todense()]
        return outs
    assert_trees_close(*run_both(f, data, indices))
    X, J = with_duplicates()   # eager: nse computed from the indices
    xs, js = X.sum_duplicates(), J.sum_duplicates()
    same(xs.indices, js.indices)
    same(xs.data, js.data)


DOT_CASES = [  # (lhs shape, n_batch, n_dense, rhs shape, dimension_numbers)
    ((3, 4), 0, 0, (4, 2), (((1,), (0,)), ((), ()))),
    ((3, 4), 0, 0, (3,), (((0,), (0,)), ((), ()))),
    ((2, 3, 4), 1, 0, (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ((2, 3, 4), 1, 0, (4,), (((2,), (0,)), ((), ()))),
    ((2, 3, 4), 1, 0, (2, 3), (((0, 1), (0, 1)), ((), ()))),
    ((3, 4, 2), 0, 1, (4, 5), (((1,), (0,)), ((), ()))),
]


def test_dot_general_matches_jax():
    def f(lib, sp, *ys):
        outs = []
        for (shape, n_batch, n_dense, _, dn), y in zip(DOT_CASES, ys):
            x = dense(shape)
            M = sp.BCOO.fromdense(x, nse=nse_of(x, n_batch, n_dense), n_batch=n_batch,
                                  n_dense=n_dense)
            rdn = tuple(d[::-1] for d in dn)   # dense x sparse: roles swapped
            outs += [sp.bcoo_dot_general(M, y, dimension_numbers=dn),
                     sp.bcoo_dot_general(y, M, dimension_numbers=rdn)]
        return outs
    ys = [dense(c[3], seed=1, density=1.0) for c in DOT_CASES]
    assert_trees_close(*run_both(f, *ys), tol=1e-4)


def test_operators_match_jax():
    x, v = dense((3, 4)), dense((4,), seed=1, density=1.0)
    dup_data = np.array([1., 2., 3., 4.], np.float32)
    dup_indices = np.array([[0, 1], [2, 0], [0, 1], [3, 3]], np.int32)

    def f(lib, sp, xt, v, dup_data, dup_indices):
        M = sp.BCOO.fromdense(xt, nse=nse_of(x, 0, 0))
        D = sp.BCOO((dup_data, dup_indices), shape=(3, 3))   # duplicates + padding
        outs = [M @ v, lib.ones(3) @ M, M.T @ lib.ones(3), (M + M).todense(),
                M.sum(1).todense(), M.transpose((1, 0)).todense(), M.astype(lib.int32).data]
        for A in (M, D):
            outs += [(2 * A).todense(), (A * A).todense(), (-A).todense(),
                     (A - 2 * A).todense(), (A / 2.0).todense(), abs(A).todense(),
                     (A * lib.arange(A.shape[1], dtype=lib.float32)).todense()]
        return outs
    assert_trees_close(*run_both(f, x, v, dup_data, dup_indices))


def test_matmul_shape_error_names_shapes():
    X, _ = both(dense((3, 4)))
    with pytest.raises(TypeError, match=r"\(4,\).*\(5,\)|4.*5"):
        X @ jnp.ones(5)


def test_sparsify_matches_jax():
    x, v = dense((3, 4)), dense((3,), seed=1, density=1.0)

    def f(lib, sp, xt, v):
        def body(M, v):
            y = lib.sin(M) * 2.0 + lib.tanh(M)
            z = (M.T @ v).astype(lib.float32)
            return lib.sqrt(lib.abs(y)).sum(0), z, (-M).sum()
        # jit inside sparsify is inlined; todense inside sparsify densifies
        j = jax.jit if lib is jjnp else xform.jit
        g = lambda M: lib.cos(sp.todense(j(lambda a: a * 3.0)(M)))
        M = sp.BCOO.fromdense(xt, nse=nse_of(x, 0, 0))
        s, z, t = sp.sparsify(body)(M, v)
        assert isinstance(s, sp.BCOO)
        return s.todense(), z, t, sp.sparsify(g)(M)
    assert_trees_close(*run_both(f, x, v))


def test_sparsify_unimplemented_errors_match_jax():
    X, J = both(dense((3, 4)))
    for lib, sp, M in [(jnp, xsp, X), (jjnp, jsp, J)]:
        with pytest.raises(NotImplementedError) as e:
            sp.sparsify(lib.cos)(M)
        assert "sparse rule for cos is not implemented because it would result in dense" in str(e.value)
    for M in (X, J):
        with pytest.raises(NotImplementedError, match="Subtraction between sparse and dense"):
            M - jnp.ones((3, 4))


def test_jit_and_grad_wrt_data():
    x, y = dense((2, 3, 4)), dense((4, 5), seed=1, density=1.0)
    dn = (((2,), (0,)), ((), ()))

    def f(lib, sp, xt, y):
        outs = []
        for n_batch in (0, 1):   # JAX's own grad fails with n_dense > 0 here
            M = sp.BCOO.fromdense(xt, nse=nse_of(x, n_batch, 0), n_batch=n_batch)

            def loss(data):
                A = sp.BCOO((data, M.indices), shape=M.shape)
                return ((lib.tanh(sp.bcoo_dot_general(A, y, dimension_numbers=dn)) ** 2).sum()
                        + (A.todense() ** 3).sum())
            outs.append((jax if lib is jjnp else xform).grad(loss)(M.data))
        return outs
    assert_trees_close(*run_both(f, x, y), tol=1e-4)


def test_sparse_grad_matches_jax():
    Xd, Jd = with_duplicates()
    v = np.arange(3, dtype=np.float32)
    xf = lambda M, v: jnp.sum(jnp.sin(M @ v))
    jf = lambda M, v: jjnp.sum(jjnp.sin(M @ v))
    xg, jg = xsp.grad(xf)(Xd, jnp.asarray(v)), jsp.grad(jf)(Jd, jjnp.asarray(v))
    assert isinstance(xg, xsp.BCOO) and repr(xg) == repr(jg)
    close(xg.data, jg.data)
    same(xg.indices, jg.indices)
    (xv, xgs), (jv, jgs) = (xsp.value_and_grad(xf, argnums=(0, 1))(Xd, jnp.asarray(v)),
                            jsp.value_and_grad(jf, argnums=(0, 1))(Jd, jjnp.asarray(v)))
    close(xv, jv)
    close(xgs[0].data, jgs[0].data)
    close(xgs[1], jgs[1])


def test_vmap_over_batched_bcoo():
    x, v = dense((3, 2, 4)), dense((3, 4), seed=1, density=1.0)
    X, J = both(x, n_batch=1)
    xo = xform.vmap(lambda M, v: M @ v)(X, jnp.asarray(v))
    jo = jax.vmap(lambda M, v: M @ v)(J, jjnp.asarray(v))
    close(xo, jo)
    xs = xform.vmap(lambda M: 3.0 * M)(X)   # BCOO out: batch dim back on
    assert isinstance(xs, xsp.BCOO) and xs.shape == X.shape
    close(xs.todense(), 3 * x)
    Y = xform.vmap(lambda a: xsp.BCOO.fromdense(a, nse=4))(jnp.asarray(x))
    assert Y.shape == x.shape and Y.n_batch == 1
    same(Y.todense(), x)
    with pytest.raises(ValueError, match="n_batch=0"):
        xform.vmap(lambda M: M.todense())(xsp.BCOO.fromdense(x))


def test_structural_ops_match_jax():
    x, z = dense((2, 3)), dense((2, 3), seed=2)

    def f(lib, sp, x, z):
        outs = []
        for n_batch in (0, 1):
            X, Z = (sp.BCOO.fromdense(a, nse=3, n_batch=n_batch) for a in (x, z))
            outs += [sp.bcoo_concatenate([X, Z], dimension=d).todense() for d in (0, 1)]
            outs += [sp.bcoo_multiply_sparse(X, Z).todense()]
            R = sp.bcoo_reduce_sum(X, axes=(0,))
            outs += [R.todense(), R.indices]
        B = sp.bcoo_broadcast_in_dim(sp.BCOO.fromdense(x, nse=6), shape=(4, 2, 3),
                                     broadcast_dimensions=(1, 2))
        outs += [B.todense(), B.indices]
        return outs
    assert_trees_close(*run_both(f, x, z))


def test_constructors_match_jax():
    for args, kw in [((3, 4, 1), {}), ((4, 3, -1), {"n_batch": 1})]:
        same(xsp.eye(*args, **kw).todense(), jsp.eye(*args, **kw).todense())
    e, je = xsp.empty((2, 3), nse=2, n_batch=1), jsp.empty((2, 3), nse=2, n_batch=1)
    same(e.indices, je.indices)
    same(e.todense(), je.todense())
    r = xsp.random_bcoo(xform.random.key(0), (4, 5), nse=3, n_batch=1)
    assert (r.shape, r.nse, r.n_batch) == ((4, 5), 3, 1)
    # unique indices per batch, as requested
    assert all(len(set(r.indices[b, :, 0].tolist())) == 3 for b in range(4))


def test_bad_input_errors():
    with pytest.raises(ValueError, match="Invalid data.shape"):
        xsp.BCOO((jnp.ones(3), jnp.zeros((4, 2), jnp.int32)), shape=(3, 3))
    with pytest.raises(ValueError, match="shape mismatch"):
        xsp.bcoo_extract(xsp.BCOO.fromdense(jnp.eye(2)), jnp.ones(3))
    with pytest.raises(xform.errors.ConcretizationTypeError, match="nse"):
        xform.jit(lambda a: xsp.BCOO.fromdense(a).todense())(jnp.eye(2))
    with pytest.raises(NotImplementedError, match="batch dimensions must be among"):
        xsp.bcoo_dot_general(xsp.BCOO.fromdense(jnp.ones((2, 3))), jnp.ones((2, 3)),
                             dimension_numbers=(((1,), (1,)), ((0,), (0,))))
