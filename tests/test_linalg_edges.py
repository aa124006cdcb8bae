"""Edges of jnp.linalg / jax.scipy.linalg / jnp.poly* vs jax at run time: column-pivoted
and raw QR (and QR's JVPs for every shape), polyfit's full/cov outputs, det's second
derivative at singular matrices, and the right-hand-side broadcasting rules of the
triangular solvers (a batched matrix with an unbatched or vector b)."""
import warnings

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import xform
import xform.experimental
import xform.numpy as xnp
import xform.scipy.linalg as xsl

RNG = np.random.default_rng(7)


def _mat(*shape, dtype=np.float32):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _same(x, y, tol=1e-4):
    xs, ys = jax.tree_util.tree_leaves(x), xform.tree_util.tree_leaves(y)
    assert type(x).__name__ == type(y).__name__ or isinstance(x, tuple) == isinstance(y, tuple)
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        a, b = np.asarray(a), np.asarray(b)
        assert (a.shape, a.dtype) == (b.shape, b.dtype)
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_pivoted_qr_matches_jax(shape):
    a = _mat(*shape)
    for mode in ("full", "economic", "r"):
        _same(jsl.qr(a, mode=mode, pivoting=True), xsl.qr(a, mode=mode, pivoting=True))
    q, r, p = xsl.qr(a, pivoting=True, mode="economic")   # the identity it promises
    np.testing.assert_allclose(np.take_along_axis(a, np.asarray(p)[..., None, :], -1),
                               np.asarray(q @ r), atol=1e-5)


def test_raw_and_full_qr_modes_and_scipy_raw_error():
    a = _mat(4, 3, dtype=np.complex64)
    for mode in ("raw", "full"):
        _same(jnp.linalg.qr(a, mode=mode), xnp.linalg.qr(a, mode=mode))
    with pytest.raises(ValueError, match="Unsupported QR decomposition mode 'raw'"):
        xsl.qr(a, mode="raw")


@pytest.mark.parametrize("shape,full,piv", [((3, 5), False, False), ((5, 3), True, False),
                                            ((5, 3), False, True)])
def test_qr_jvp_all_shapes_matches_jax(shape, full, piv):
    # wide and full-q-of-tall were NotImplementedError; pivoted dx is permuted first
    x, t = _mat(*shape), _mat(*shape)
    out_j = jax.jit(lambda x, t: jax.jvp(
        lambda a: jax.lax.linalg.qr(a, full_matrices=full, pivoting=piv)[:2], (x,), (t,)))(x, t)
    out_x = xform.jit(lambda x, t: xform.jvp(
        lambda a: xform.lax.linalg.qr(a, full_matrices=full, pivoting=piv)[:2], (x,),
        (t,)))(x, t)
    _same(out_j, out_x, tol=2e-3)


def test_wide_pivoted_qr_jvp_matches_finite_differences():
    # JAX's rule uses the unpermuted trailing columns here; xform permutes them.
    x, t = _mat(3, 5).astype(np.float64), _mat(3, 5).astype(np.float64)
    with xform.experimental.enable_x64():
        f = lambda a: xform.lax.linalg.qr(a, pivoting=True, full_matrices=False)[1]  # noqa
        _, dr = xform.jvp(f, (x,), (t,))
        eps = 1e-6
        fd = (np.asarray(f(x + eps * t)) - np.asarray(f(x - eps * t))) / (2 * eps)
    np.testing.assert_allclose(np.asarray(dr), fd, atol=1e-6)


@pytest.mark.parametrize("kw", [{"full": True}, {"cov": True}, {"cov": "unscaled"}])
def test_polyfit_full_and_cov_match_jax(kw):
    x, y, w = _mat(7), _mat(7, 2), np.abs(_mat(7)) + 0.5

    def fits(lib):
        return lambda x, y, w: (lib.polyfit(x, y, 2, w=w, **kw),
                                lib.polyfit(x, y[:, 0], 1, **kw))
    _same(jax.jit(fits(jnp))(x, y, w), xform.jit(fits(xnp))(x, y, w), tol=1e-3)


def test_poly_of_a_square_matrix_matches_jax():
    a = _mat(3, 3)
    _same(jnp.poly(a), xnp.poly(a), tol=1e-4)


@pytest.mark.parametrize("n,rank", [(3, 1), (4, 2)])
def test_det_hessian_at_singular_matrices_matches_jax(n, rank):
    # 3x3: JAX's closed form (LU's zero pivot gave NaNs); 4x4: the cofactor solve's JVP
    a = (_mat(n, rank) @ _mat(rank, n)).astype(np.float32)
    # float32 matmuls (a GPU's default is TF32, 1e-3 off at these near-singular points)
    with jax.default_matmul_precision("float32"), xform.default_matmul_precision("float32"):
        _same(jax.jit(jax.hessian(jnp.linalg.det))(a),
              xform.jit(xform.hessian(xnp.linalg.det))(a), tol=1e-3)


BATCHED = np.tril(_mat(2, 3, 3)) + 3 * np.eye(3, dtype=np.float32)


@pytest.mark.parametrize("b_shape", [(3,), (3, 2), (2, 3), (4, 1, 3, 2)])
def test_triangular_solvers_broadcast_b_as_jax(b_shape):
    # (3, 2) with a batched a is a matrix, (2, 3) a batch of vectors (JAX's deprecated
    # rule, with its FutureWarning); lu_solve gave an (n, n) result for the latter.
    b = _mat(*b_shape)
    lu, piv = (np.asarray(v) for v in jsl.lu_factor(BATCHED))

    def solves(sl):
        return lambda a, lu, piv, b: (
            sl.solve_triangular(a, b, lower=True), sl.cho_solve((a, True), b),
            sl.lu_solve((lu, piv), b), sl.lu_solve((lu, piv), b, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        _same(jax.jit(solves(jsl))(BATCHED, lu, piv, b),
              xform.jit(solves(xsl))(BATCHED, lu, piv, b))
    if b_shape == (2, 3):
        with pytest.warns(FutureWarning, match="batched 1D solves"):
            xsl.solve_triangular(BATCHED, b, lower=True)


def test_lax_triangular_solve_vector_b_and_rank_errors():
    b = _mat(2, 3)
    for left in (True, False):
        _same(jax.lax.linalg.triangular_solve(BATCHED, b, left_side=left, lower=True),
              xform.lax.linalg.triangular_solve(BATCHED, b, left_side=left, lower=True))
    with pytest.raises(TypeError, match="same number of batch dimensions"):
        xform.lax.linalg.triangular_solve(BATCHED, _mat(4, 1, 3, 2), left_side=True)
    with pytest.raises(TypeError, match="must have rank at least 2"):
        xform.lax.linalg.triangular_solve(BATCHED, _mat(3), left_side=True)


def test_scipy_solve_pos_jvp_sees_the_whole_matrix_as_jax():
    # JAX's custom_linear_solve over all of a (xform differentiated one triangle)
    h = _mat(2, 3, 3)
    h = h @ np.swapaxes(h, -1, -2) + 3 * np.eye(3, dtype=np.float32)
    args, tans = (h, _mat(2, 3, 2)), (_mat(2, 3, 3), _mat(2, 3, 2))
    _same(jax.jvp(lambda a, b: jsl.solve(a, b, assume_a="pos"), args, tans),
          xform.jvp(lambda a, b: xsl.solve(a, b, assume_a="pos"), args, tans))


def test_lstsq_rank_and_empty_residuals_take_default_dtypes_under_x64(x64):
    # NumPy's residuals are empty unless a has full column rank (xform gave them for a
    # rank-deficient tall a); rank was int32 and the empty residuals a's real dtype
    a, b = np.array([[1., 1.], [1., 1.], [0., 0.]], np.float32), np.ones(3, np.float32)
    _same(jnp.linalg.lstsq(a, b, numpy_resid=True), xnp.linalg.lstsq(a, b, numpy_resid=True))
    _same(jnp.linalg.lstsq(a[:0], b[:0]), xnp.linalg.lstsq(a[:0], b[:0]))


def test_linalg_outer_is_one_dimensional_only():
    _same(jnp.linalg.outer(np.arange(3), np.arange(2.)), xnp.linalg.outer(np.arange(3), np.arange(2.)))
    with pytest.raises(ValueError, match="must be one-dimensional"):
        xnp.linalg.outer(np.ones((2, 2)), np.ones(2))


def test_triangular_solve_half_precision_as_jax():
    # any float dtype (StableHLO's op, as JAX's); xform accepted only LAPACK's four
    a = (np.tril(_mat(3, 3)) + 3 * np.eye(3)).astype(np.float16)
    b = _mat(3).astype(np.float16)
    f = lambda sl: lambda a: sl.solve_triangular(a, b, lower=True, trans=1)  # noqa: E731
    g = lambda sl: lambda a: sl.solve_triangular(a, b, lower=True).sum()  # noqa: E731
    _same(jax.jit(jax.value_and_grad(g(jsl)))(a), xform.jit(xform.value_and_grad(g(xsl)))(a),
          tol=3e-2)
    _same(jax.jit(f(jsl))(a), xform.jit(f(xsl))(a), tol=1e-2)


def test_vector_norm_of_integers_under_x64(x64):
    # JAX sums the squares first: an int8 or bool vector's 2-norm is float64 (was float32)
    for dtype in (np.int8, np.bool_):
        x = np.array([[1, 2, 0], [3, 0, 1]]).astype(dtype)
        _same(jnp.linalg.vector_norm(x, axis=1), xform.jit(
            lambda v: xnp.linalg.vector_norm(v, axis=1))(x))


def test_svd_subset_by_index_and_multi_dot_checks_as_jax():
    a = _mat(5, 4)
    if xform.default_backend() == "cpu":   # subset_by_index is a TPU kernel's, as JAX's
        for herm in (False, True):
            with pytest.raises(NotImplementedError, match="subset_by_index"):
                xform.jit(lambda m: xnp.linalg.svd(m, False, False, hermitian=herm,
                                                   subset_by_index=(1, 3)))(a.T @ a)
    _same(jnp.linalg.multi_dot([a, a.T, a], precision="highest"),
          xnp.linalg.multi_dot([a, a.T, a], precision="highest"), tol=1e-3)
    with pytest.raises(ValueError, match="must all be two-dimensional"):  # was broadcast
        xnp.linalg.multi_dot([np.ones((2, 3, 3)), np.ones((3, 3))])
