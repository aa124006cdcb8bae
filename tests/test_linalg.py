"""xform.numpy.linalg and xform.scipy.linalg vs jax (the oracle): values and dtypes,
eagerly and under jit, gradients vs jax.grad and finite differences, vmap."""
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import xform
import xform.numpy as xnp
import xform.scipy.linalg as xsl
from xform import test_util

RNG = np.random.default_rng(0)


def _mat(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _spd(n, batch=()):
    x = _mat(*batch, n, n, dtype=np.float64)
    return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(np.float32)


def _close(x, y, tol=2e-5):
    xs, ys = jax.tree_util.tree_leaves(x), jax.tree_util.tree_leaves(y)
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype, (np.asarray(a).dtype,
                                                            np.asarray(b).dtype)
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                   rtol=tol, atol=tol)


A = _mat(4, 4) + 4 * np.eye(4, dtype=np.float32)
TALL = _mat(5, 3)
SPD = _spd(4)
B = _mat(2, 4, 3)
CASES = [
    ("solve_vec", lambda m: m.linalg.solve(A, np.arange(4.0, dtype=np.float32))),
    ("solve_mat_batched", lambda m: m.linalg.solve(np.stack([A, A.T]), B)),
    ("inv", lambda m: m.linalg.inv(A)),
    ("det", lambda m: m.linalg.det(np.stack([A, -A[::-1]]))),
    ("slogdet", lambda m: tuple(m.linalg.slogdet(-A))),
    ("cholesky", lambda m: m.linalg.cholesky(SPD)),
    ("cholesky_upper", lambda m: m.linalg.cholesky(SPD, upper=True)),
    ("eigvalsh", lambda m: m.linalg.eigvalsh(SPD)),
    ("eigh_w", lambda m: m.linalg.eigh(SPD).eigenvalues),
    ("svdvals", lambda m: m.linalg.svd(TALL, compute_uv=False)),
    ("qr_r_abs", lambda m: m.abs(m.linalg.qr(TALL, mode="r"))),
    ("norm_default", lambda m: m.linalg.norm(TALL)),
    ("norm_fro_keep", lambda m: m.linalg.norm(TALL, "fro", axis=(0, 1), keepdims=True)),
    ("norm_1", lambda m: m.linalg.norm(TALL, 1)),
    ("norm_inf", lambda m: m.linalg.norm(TALL, np.inf)),
    ("norm_2", lambda m: m.linalg.norm(TALL, 2)),
    ("norm_nuc", lambda m: m.linalg.norm(TALL, "nuc")),
    ("norm_vec_3", lambda m: m.linalg.norm(TALL, 3, axis=0)),
    ("norm_vec_0", lambda m: m.linalg.norm(TALL, 0, axis=-1)),
    ("pinv", lambda m: m.linalg.pinv(TALL)),
    ("lstsq_x", lambda m: m.linalg.lstsq(TALL, np.ones(5, np.float32))[0]),
    ("matrix_power_3", lambda m: m.linalg.matrix_power(A, 3)),
    ("matrix_power_neg2", lambda m: m.linalg.matrix_power(A, -2)),
    ("matrix_power_int", lambda m: m.linalg.matrix_power(np.arange(4).reshape(2, 2), 5)),
    ("matrix_rank", lambda m: m.linalg.matrix_rank(np.outer(np.arange(3.0), np.ones(4)))),
    ("int_input_inv", lambda m: m.linalg.inv(np.array([[2, 1], [1, 3]]))),
]


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_numpy_linalg_matches_jax(name, f):
    _close(f(xnp), f(jnp), tol=1e-3 if "power" in name else 2e-5)


@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("lower", [True, False])
def test_solve_triangular(trans, lower):
    a = np.tril(A) if lower else np.triu(A)
    b = _mat(4, 2)
    _close(xsl.solve_triangular(a, b, trans=trans, lower=lower),
           jsl.solve_triangular(a, b, trans=trans, lower=lower))
    _close(xsl.solve_triangular(a, b[:, 0], trans=trans, lower=lower),
           jsl.solve_triangular(a, b[:, 0], trans=trans, lower=lower))


@pytest.mark.parametrize("lower", [True, False])
def test_cho_factor_solve(lower):
    b = _mat(4, 3)
    c, low = xsl.cho_factor(SPD, lower=lower)
    _close(c, jsl.cho_factor(SPD, lower=lower)[0])
    _close(xsl.cho_solve((c, low), b), jsl.cho_solve(jsl.cho_factor(SPD, lower=lower), b))


def test_lu_family():
    _close(xsl.lu(A), jsl.lu(A))
    _close(xsl.lu_factor(A), jsl.lu_factor(A))
    b = _mat(4)
    _close(xsl.lu_solve(xsl.lu_factor(A), b), jsl.lu_solve(jsl.lu_factor(A), b))
    _close(xsl.solve(SPD, b, assume_a="pos"), jsl.solve(SPD, b, assume_a="pos"))


def test_jit_and_vmap():
    bs = np.stack([A, A + 1, A.T])
    f = lambda a: xnp.linalg.solve(a, xnp.ones(4)) + xnp.linalg.det(a)  # noqa: E731
    got = xform.jit(xform.vmap(f))(bs)
    want = jax.vmap(lambda a: jnp.linalg.solve(a, jnp.ones(4)) + jnp.linalg.det(a))(bs)
    _close(got, want, tol=1e-3)


GRAD_CASES = [
    ("solve", lambda m, a: m.sum(m.linalg.solve(a, m.arange(4.0)) ** 2)),
    ("inv", lambda m, a: m.sum(m.sin(m.linalg.inv(a)))),
    ("det", lambda m, a: m.linalg.det(a)),
    ("slogdet", lambda m, a: m.linalg.slogdet(a)[1]),
    ("pinv", lambda m, a: m.sum(m.linalg.pinv(a[:, :3]) ** 2)),
    ("norm_2", lambda m, a: m.linalg.norm(a, 2)),
    ("cholesky_logdet", lambda m, a: m.sum(m.log(m.diagonal(
        m.linalg.cholesky(a @ a.T + 4 * m.eye(4)))))),
    ("eigvalsh", lambda m, a: m.sum(m.linalg.eigvalsh(a + a.T) ** 3)),
]


@pytest.mark.parametrize("name,f", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grads_match_jax_and_finite_differences(x64, name, f):
    a = (A + 0.5).astype(np.float64)
    _close(xform.grad(lambda a: f(xnp, a))(a), jax.grad(lambda a: f(jnp, a))(a), tol=1e-8)
    test_util.check_grads(lambda a: f(xnp, a), (a,), order=1, modes=("fwd", "rev"))


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="square"):
        xnp.linalg.inv(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        xform.lax.linalg.cholesky(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="incompatible shapes"):
        xnp.linalg.solve(A, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="invalid norm order"):
        xnp.linalg.norm(TALL, "bogus")
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        xform.grad(lambda a: xnp.sum(xnp.linalg.svd(a)[0]))(TALL)


def test_not_positive_definite_gives_nan():
    # as JAX: the failed factor is NaN, then tril zeroes its upper triangle
    got, want = np.asarray(xnp.linalg.cholesky(-SPD)), np.asarray(jnp.linalg.cholesky(-SPD))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[np.tril_indices(4)]).all() and (got[np.triu_indices(4, 1)] == 0).all()


def test_cholesky_matches_jax_bit_for_bit():
    # LAPACK's potrf on CPU, as JAX lowers it (stablehlo.cholesky rounds differently)
    for a in (SPD, SPD.astype(np.complex64) + 0.5j * (np.tril(SPD, -1) - np.triu(SPD, 1))):
        np.testing.assert_array_equal(xform.jit(xnp.linalg.cholesky)(a),
                                      jax.jit(jnp.linalg.cholesky)(a))


def test_lu_pivots_to_permutation_matches_jax():
    pivots = np.array([[2, 2, 3, 3], [0, 3, 2, 3]], np.int32)
    _close(xform.lax.linalg.lu_pivots_to_permutation(pivots, 5),
           jax.lax.linalg.lu_pivots_to_permutation(pivots, 5))
