"""xform.experimental.sparse against jax.experimental.sparse: the same dense inputs go
through both; todense results (and data/indices where JAX's are deterministic) must
match, across n_batch/n_dense layouts, padding, duplicates, jit, vmap, grad, sparsify."""
import functools

import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import sparse as jsp

import xform
import xform.numpy as jnp
from xform.experimental import sparse as xsp

import sparse_util

LAYOUTS = [(1, 1), (2, 0)]   # (n_batch, n_dense) of a rank-3 array; (0, 0): test_sparse_bcsr


dense = functools.partial(sparse_util.dense, density=0.4)   # this file's sparser inputs
assert_trees_close = sparse_util.assert_trees_close


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def with_duplicates():
    """A BCOO with a duplicate index and a padding (out-of-bounds) index, in both libs."""
    data = np.array([1., 2., 3., 4.], np.float32)
    indices = np.array([[0, 1], [2, 0], [0, 1], [3, 3]], np.int32)
    return (xsp.BCOO((data, indices), shape=(3, 3)),
            jsp.BCOO((jjnp.asarray(data), jjnp.asarray(indices)), shape=(3, 3)))


def nse_of(x, n_batch, n_dense):
    mask = (x != 0).any(tuple(range(x.ndim - n_dense, x.ndim))) if n_dense else x != 0
    return int(mask.sum(tuple(range(n_batch, mask.ndim))).max())


def parts(x, n_batch=0, n_dense=0, nse=None):
    """(data, indices) of ``x`` as NumPy (xform's fromdense, checked against JAX's in
    test_fromdense_todense_match_jax): the other tests build both libraries' BCOOs from
    them, sparing JAX's costly nonzero compile."""
    M = xsp.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense, nse=nse)
    return np.asarray(M.data), np.asarray(M.indices)


def bcoo(sp, d, i, shape):
    return sp.BCOO((d, i), shape=shape, indices_sorted=True, unique_indices=True)


def run_both(f, *args):
    """``f(lib, sparse, *args)`` jitted in xform and in JAX (one compile each)."""
    xo = xform.jit(lambda *a: f(jnp, xsp, *a))(*map(jnp.asarray, args))
    jo = jax.jit(lambda *a: f(jjnp, jsp, *a))(*map(jjnp.asarray, args))
    return xo, jo


def test_fromdense_todense_match_jax():
    x = dense((3, 4, 2))
    nses = [nse_of(x, n_batch, n_dense) for n_batch, n_dense in LAYOUTS]

    def f(lib, sp, x):
        outs = []
        for (n_batch, n_dense), nse in zip(LAYOUTS, nses):
            M = sp.BCOO.fromdense(x, nse=nse, n_batch=n_batch, n_dense=n_dense)
            outs += [M.data, M.indices, M.todense()]
        P = sp.BCOO.fromdense(x, nse=nses[0] + 2, n_batch=1, n_dense=1)  # padded
        return outs + [P.indices, sp.todense(P)]
    xo, jo = run_both(f, x)
    assert_trees_close(xo, jo)
    X = xsp.BCOO.fromdense(x, n_batch=1, n_dense=1)   # eager: nse computed from the values
    same(X.data, jo[0])
    same(X.indices, jo[1])
    J = jsp.BCOO((jo[0], jo[1]), shape=x.shape)
    assert (X.nse, X.n_batch, X.n_sparse, X.n_dense) == (J.nse, J.n_batch, J.n_sparse, J.n_dense)
    assert repr(X) == repr(J)


def test_duplicates_and_padding_match_jax():
    data = np.array([1., 2., 3., 4.], np.float32)
    indices = np.array([[0, 1], [2, 0], [0, 1], [3, 3]], np.int32)

    bd, bi = parts(np.arange(12.).reshape(2, 3, 2) % 3, n_batch=1, n_dense=1)

    def f(lib, sp, data, indices, bd, bi):
        M = sp.BCOO((data, indices), shape=(3, 3))
        outs = [M.todense(), M.sum(), M.sum(0).todense()]
        for nse in (2, 4):   # exact, padded
            S = M.sum_duplicates(nse=nse, remove_zeros=False)
            outs += [S.data, S.indices]
        S = M.sort_indices()
        outs += [S.data, S.indices, sp.bcoo_extract(M, lib.arange(9.).reshape(3, 3)).data]
        # batched duplicates: every entry stored twice
        B = bcoo(sp, bd, bi, (2, 3, 2))
        D = sp.BCOO((lib.concatenate([B.data, B.data], 1),
                     lib.concatenate([B.indices, B.indices], 1)), shape=B.shape)
        S = D.sum_duplicates(nse=B.nse, remove_zeros=False)
        outs += [S.data, S.indices, D.todense()]
        return outs
    xo, jo = run_both(f, data, indices, bd, bi)
    assert_trees_close(xo, jo)
    X, _ = with_duplicates()   # eager: nse (2) computed from the indices
    xs = X.sum_duplicates(remove_zeros=False)
    same(xs.data, jo[3])
    same(xs.indices, jo[4])



def test_nothing_stored_matches_jax():
    """nse=0 (fromdense of zeros): sum_duplicates and sparse @ sparse give empty BCOOs."""
    def f(lib, sp, d, i):
        Z = sp.BCOO((d, i), shape=(3, 3))
        S, P = Z.sum_duplicates(nse=0), Z @ Z
        return [S.data, S.indices, P.data, P.indices, P.todense()]
    assert_trees_close(*run_both(f, np.zeros((0,), np.float32), np.zeros((0, 2), np.int32)))


DOT_CASES = [  # (lhs shape, n_batch, n_dense, rhs shape, dimension_numbers)
    ((3, 4), 0, 0, (4, 2), (((1,), (0,)), ((), ()))),
    ((2, 3, 4), 1, 0, (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ((2, 3, 4), 1, 0, (2, 3), (((0, 1), (0, 1)), ((), ()))),
    ((3, 4, 2), 0, 1, (4, 5), (((1,), (0,)), ((), ()))),
]


def test_dot_general_matches_jax():
    """Sparse x dense and dense x sparse against JAX's dense dot_general (JAX's sparse
    one is defined to match it; a dense reference compiles far faster)."""
    xs = [dense(c[0]) for c in DOT_CASES]
    ys = [dense(c[3], seed=1, density=1.0) for c in DOT_CASES]

    def f_sparse(*ys):
        outs = []
        for (shape, n_batch, n_dense, _, dn), x, y in zip(DOT_CASES, xs, ys):
            M = xsp.BCOO.fromdense(x, nse=nse_of(x, n_batch, n_dense), n_batch=n_batch,
                                   n_dense=n_dense)
            rdn = tuple(d[::-1] for d in dn)   # dense x sparse: roles swapped
            outs += [xsp.bcoo_dot_general(M, y, dimension_numbers=dn),
                     xsp.bcoo_dot_general(y, M, dimension_numbers=rdn)]
        return outs

    def f_dense(*ys):
        return [o for (*_, dn), x, y in zip(DOT_CASES, xs, ys)
                for o in (jax.lax.dot_general(x, y, dn),
                          jax.lax.dot_general(y, x, tuple(d[::-1] for d in dn)))]
    assert_trees_close(xform.jit(f_sparse)(*ys), jax.jit(f_dense)(*ys), tol=1e-4)


def test_operators_match_jax():
    x, v = dense((3, 4)), dense((4,), seed=1, density=1.0)
    dup_data = np.array([1., 2., 3., 4.], np.float32)
    dup_indices = np.array([[0, 1], [2, 0], [0, 1], [3, 3]], np.int32)
    dup_dense = np.zeros((3, 3), np.float32)
    np.add.at(dup_dense, tuple(dup_indices[:3].T), dup_data[:3])   # (3, 3) is padding

    def ops(lib, M, D, v, dt):
        outs = [M @ v, lib.ones(3) @ M, M.T @ lib.ones(3), dt(M + M), dt(M.sum(1)),
                dt(M.transpose((1, 0))), dt(M.astype(lib.int32)), dt(-M), dt(M - 2 * M),
                dt(M / 2.0)]
        for A in (M, D):   # D: nonlinear ops must merge its duplicates first
            outs += [dt(A * A), dt(abs(A)), dt(A * lib.arange(A.shape[1], dtype=lib.float32))]
        return outs

    def f_sparse(xt, v, dup_data, dup_indices):
        M = xsp.BCOO.fromdense(xt, nse=nse_of(x, 0, 0))
        D = xsp.BCOO((dup_data, dup_indices), shape=(3, 3))   # duplicates + padding
        return ops(jnp, M, D, v, xsp.todense)
    f_dense = lambda x, v, d: ops(jjnp, x, d, v, lambda a: a)
    assert_trees_close(xform.jit(f_sparse)(x, v, dup_data, dup_indices),
                       jax.jit(f_dense)(x, v, dup_dense))


def test_matmul_shape_error_names_shapes():
    X, J = with_duplicates()
    for M, ones in [(X, jnp.ones(5)), (J, jjnp.ones(5))]:   # JAX's is a TypeError too
        with pytest.raises(TypeError, match=r"\(5,\)"):
            M @ ones


def test_sparsify_matches_jax():
    x, v = dense((3, 4)), dense((3,), seed=1, density=1.0)

    def f(lib, sp, d, i, v):
        def body(M, v):
            y = lib.sin(M) * 2.0 + lib.tanh(M)
            z = (M.T @ v).astype(lib.float32)
            return lib.sqrt(lib.abs(y)).sum(0), z, (-M).sum()
        # jit inside sparsify is inlined; todense inside sparsify densifies
        j = jax.jit if lib is jjnp else xform.jit
        g = lambda M: lib.cos(sp.todense(j(lambda a: a * 3.0)(M)))
        M = bcoo(sp, d, i, x.shape)
        s, z, t = sp.sparsify(body)(M, v)
        assert isinstance(s, sp.BCOO)
        return s.todense(), z, t, sp.sparsify(g)(M)
    assert_trees_close(*run_both(f, *parts(x), v))


def test_sparsify_unimplemented_errors_match_jax():
    X, J = with_duplicates()
    for lib, sp, M in [(jnp, xsp, X), (jjnp, jsp, J)]:
        with pytest.raises(NotImplementedError) as e:
            sp.sparsify(lib.cos)(M)
        assert "sparse rule for cos is not implemented because it would result in dense" in str(e.value)
    for M in (X, J):
        with pytest.raises(NotImplementedError, match="Subtraction between sparse and dense"):
            M - jnp.ones((3, 3))


def test_jit_and_grad_wrt_data():
    x, y = dense((2, 3, 4)), dense((4, 5), seed=1, density=1.0)
    dn = (((2,), (0,)), ((), ()))

    def f(lib, sp, y, *bufs):
        outs = []
        for d, i in zip(bufs[::2], bufs[1::2]):   # JAX's own grad fails with n_dense > 0
            M = bcoo(sp, d, i, x.shape)

            def loss(data):
                A = sp.BCOO((data, M.indices), shape=M.shape)
                return ((lib.tanh(sp.bcoo_dot_general(A, y, dimension_numbers=dn)) ** 2).sum()
                        + (A.todense() ** 3).sum())
            outs.append((jax if lib is jjnp else xform).grad(loss)(M.data))
        return outs
    assert_trees_close(*run_both(f, y, *parts(x), *parts(x, n_batch=1)), tol=1e-4)


def test_sparse_grad_matches_jax():
    Xd, Jd = with_duplicates()
    v = np.arange(3, dtype=np.float32)
    xf = lambda M, v: jnp.sum(jnp.sin(M @ v))
    jf = lambda M, v: jjnp.sum(jjnp.sin(M @ v))
    xg, jg = xsp.grad(xf)(Xd, jnp.asarray(v)), jax.jit(jsp.grad(jf))(Jd, jjnp.asarray(v))
    assert isinstance(xg, xsp.BCOO) and repr(xg) == repr(jg)
    close(xg.data, jg.data)
    same(xg.indices, jg.indices)
    (xv, xgs), (jv, jgs) = (xsp.value_and_grad(xf, argnums=(0, 1))(Xd, jnp.asarray(v)),
                            jax.jit(jsp.value_and_grad(jf, argnums=(0, 1)))(Jd, jjnp.asarray(v)))
    close(xv, jv)
    close(xgs[0].data, jgs[0].data)
    close(xgs[1], jgs[1])
    # sparse x sparse: JAX's bcoo_spdot_general has no transpose rule; xform's
    # composition differentiates, and must agree with the dense product's gradient.
    xs = xsp.grad(lambda A: (A @ A.T).todense().sum())(Xd)
    xd = xsp.grad(lambda A: (A.todense() @ A.todense().T).sum())(Xd)
    close(xs.data, xd.data)


def test_vmap_over_batched_bcoo():
    x, v = dense((3, 2, 4)), dense((3, 4), seed=1, density=1.0)
    X = xsp.BCOO.fromdense(x, n_batch=1)
    J = jsp.BCOO((jjnp.asarray(X.data), jjnp.asarray(X.indices)), shape=X.shape)
    xo = xform.vmap(lambda M, v: M @ v)(X, jnp.asarray(v))
    jo = jax.jit(jax.vmap(lambda M, v: M @ v))(J, jjnp.asarray(v))
    close(xo, jo)
    xs = xform.vmap(lambda M: 3.0 * M)(X)   # BCOO out: batch dim back on
    assert isinstance(xs, xsp.BCOO) and xs.shape == X.shape
    close(xs.todense(), 3 * x)
    Y = xform.vmap(lambda a: xsp.BCOO.fromdense(a, nse=4))(jnp.asarray(x))
    assert Y.shape == x.shape and Y.n_batch == 1
    same(Y.todense(), x)
    with pytest.raises(ValueError, match="n_batch=0"):
        xform.vmap(lambda M: M.todense())(xsp.BCOO.fromdense(x))
    Z = xform.jit(lambda M: M * 2.0)(X)   # BCOO in and out of jit
    assert isinstance(Z, xsp.BCOO) and Z.shape == X.shape
    same(Z.indices, X.indices)


def test_structural_ops_match_jax():
    x, z = dense((2, 3)), dense((2, 3), seed=2)

    bufs = [b for n_batch in (0, 1) for a in (x, z) for b in parts(a, n_batch, nse=3)]

    def f(lib, sp, *bufs):
        outs = []
        for n_batch in (0, 1):
            X, Z = (bcoo(sp, *bufs[4 * n_batch + k:4 * n_batch + k + 2], x.shape) for k in (0, 2))
            if n_batch:   # n_batch=0 runs the same kernels
                outs += [sp.bcoo_concatenate([X, Z], dimension=d).todense() for d in (0, 1)]
                outs += [sp.bcoo_multiply_sparse(X, Z).todense()]
            R = sp.bcoo_reduce_sum(X, axes=(0,))
            S = X.reshape((2, 3, 1)) if n_batch else X.reshape((3, 2))
            outs += [R.todense(), R.indices, S.todense(), S.indices]
        P = sp.bcoo_dot_general(X, Z, dimension_numbers=(((1,), (1,)), ((0,), (0,))))
        outs += [P.todense(), P.indices]   # sparse x sparse (batched)
        B = sp.bcoo_broadcast_in_dim(bcoo(sp, *bufs[:2], x.shape), shape=(4, 2, 3),
                                     broadcast_dimensions=(1, 2))
        outs += [B.todense(), B.indices]
        return outs
    assert_trees_close(*run_both(f, *bufs))


def test_constructors_match_jax():
    same(xsp.eye(4, 3, -1, n_batch=1).todense(), np.eye(4, 3, -1))
    same(xsp.eye(3, 4, 1).todense(), np.eye(3, 4, 1))
    xi, ji = xsp.eye(3, 4, 1), jax.jit(lambda: jsp.eye(3, 4, 1))()
    same(xi.indices, ji.indices)
    e = xsp.empty((2, 3), nse=2, n_batch=1)
    je = jax.jit(lambda: jsp.empty((2, 3), nse=2, n_batch=1))()
    same(e.indices, je.indices)
    same(e.data, je.data)
    same(e.todense(), np.zeros((2, 3)))
    r = xsp.random_bcoo(xform.random.key(0), (4, 5), nse=3, n_batch=1, unique_indices=False)
    assert (r.shape, r.nse, r.n_batch, r.dtype) == ((4, 5), 3, 1, np.float32)
    assert np.all((np.asarray(r.indices) >= 0) & (np.asarray(r.indices) < 5))



def test_default_dtypes_follow_x64_as_jax(x64):
    """eye/empty/random_bcoo default to the canonical float (and int indices): float64
    and int64 under x64, as JAX's."""
    def f(sp, lib):
        r = sp.random_bcoo(lib.random.key(0), (4, 5), nse=3)
        return [str(a.dtype) for a in (sp.eye(3).data, sp.empty((2, 3), nse=1).data,
                                       sp.empty((2, 3), sparse_format="bcsr").data,
                                       sp.empty((2, 3), sparse_format="coo").data,
                                       r.data, r.indices)]
    assert f(xsp, xform) == f(jsp, jax)


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


@pytest.mark.parametrize("name", ["_bcoo", "_ops", "_dot", "_transform", "_ad", "_api", "_bcsr",
                                  "_coo", "_slicing"])
def test_docstring_examples_run(name):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(f"xform.experimental.sparse.{name}"),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
