"""The rest of jax.scipy.linalg (special matrices, expm, polar, the Schur-based matrix
functions, eigh_tridiagonal, qr_multiply, solve_sylvester) and jnp.linalg.eig/eigvals,
vs jax (the oracle): values and dtypes, gradients where JAX defines them, vmap, jit,
JAX's error messages, and the LAPACK calls' lowering."""
import doctest

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import xform
import xform.numpy as xnp
import xform.scipy.linalg as xsl
from xform.interpreters import mlir
from xform.lax import linalg as xll

RNG = np.random.default_rng(0)
# schur and hessenberg are CPU-only LAPACK kernels (as in JAX); eig's left eigenvectors
# too in xform (JAX runs them on GPU through kernels xform does not reach).
cpu_only = pytest.mark.skipif(xform.default_backend() != "cpu",
                              reason="LAPACK kernels: CPU only")


def _mat(*shape, dtype=np.float32):
    x = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _close(x, y, tol=1e-5):
    xs, ys = jax.tree_util.tree_leaves(x), jax.tree_util.tree_leaves(y)
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        if hasattr(a, "weak_type") and hasattr(b, "weak_type"):
            assert a.weak_type == b.weak_type, (a, b)
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_names_match_jax():
    missing = [n for n in dir(jsl) if not n.startswith("_") and not hasattr(xsl, n)]
    assert not missing, missing
    assert hasattr(xnp.linalg, "eig") and hasattr(xnp.linalg, "eigvals")


C, R, R7 = _mat(2, 3), _mat(4), _mat(7) + 3
SPECIAL = {
    "block_diag": lambda m: m.block_diag(np.ones((1, 1)), 2 * np.ones((2, 3)), np.arange(2)),
    "block_diag_empty": lambda m: m.block_diag(),
    "block_diag_weak": lambda m: m.block_diag(1, 2.0),
    "toeplitz_batched": lambda m: m.toeplitz(C, R),
    "toeplitz_complex": lambda m: m.toeplitz(C[0] + 1j * C[1]),
    "hankel": lambda m: m.hankel(C, R),
    "circulant": lambda m: m.circulant(C),
    "leslie": lambda m: m.leslie(C, C[:, :2]),
    "companion": lambda m: m.companion(np.array([1, -10, 31, -30])),
    "fiedler": lambda m: m.fiedler(C),
    "fiedler_companion": lambda m: m.fiedler_companion(R7),
    "convolution_matrix_same": lambda m: m.convolution_matrix(C, 5, "same"),
    "convolution_matrix_valid": lambda m: m.convolution_matrix(np.arange(5), 3, "valid"),
    "hilbert": lambda m: m.hilbert(4),
    "invhilbert": lambda m: m.invhilbert(4),
    "pascal": lambda m: (m.pascal(5), m.pascal(4, "upper")),
    "invpascal": lambda m: (m.invpascal(5), m.invpascal(4, "lower")),
    "helmert": lambda m: (m.helmert(5), m.helmert(4, full=True)),
    "hadamard": lambda m: (m.hadamard(8), m.hadamard(4, dtype=np.float32)),
    "dft": lambda m: (m.dft(5), m.dft(4, "sqrtn"), m.dft(3, "n")),
}


@pytest.mark.parametrize("name", SPECIAL)
def test_special_matrices(name):
    _close(SPECIAL[name](xsl), SPECIAL[name](jsl), tol=2e-6)


def test_expm_values_batched_and_upper_triangular():
    # Norms across the Pade degree and squaring thresholds, batched (vectorized); the
    # last needs more than max_squarings=16 squarings: NaN.
    a = np.stack([s * _mat(4, 4) for s in (0.01, 0.3, 1.0, 3.0, 30.0, 1e7)])
    got, want = np.asarray(xsl.expm(a)), np.asarray(jsl.expm(a))
    assert np.isnan(got[-1]).all() and np.isnan(want[-1]).all()
    _close(got[:-1], want[:-1], tol=1e-5 * np.abs(want[:-1]).max())
    t = np.triu(_mat(3, 3))
    _close(xsl.expm(t, upper_triangular=True), jsl.expm(t, upper_triangular=True))
    ac = _mat(3, 3, dtype=np.complex64)
    _close(xsl.expm(ac), jsl.expm(ac))


def test_expm_derivatives():
    a, e = _mat(3, 3), _mat(3, 3)
    expm_a, frechet = xsl.expm_frechet(a, e)
    _close((expm_a, frechet), jsl.expm_frechet(a, e), tol=1e-4)
    _close(xsl.expm_frechet(a, e, compute_expm=False), frechet)
    f = lambda m: (lambda x: (m.expm(x) ** 2).sum())  # noqa: E731
    _close(xform.jit(xform.grad(f(xsl)))(a), jax.grad(f(jsl))(a), tol=1e-4)


@pytest.mark.parametrize("shape,side,method", [((5, 3), "right", "qdwh"),
                                               ((3, 5), "left", "qdwh"),
                                               ((2, 4, 4), "left", "svd")])
def test_polar(shape, side, method):
    a = _mat(*shape)
    _close(xsl.polar(a, side, method=method), jsl.polar(a, side, method=method), tol=1e-4)


@cpu_only
def test_eig_and_eigvals():
    for dtype in (np.float32, np.complex64):
        a = _mat(2, 4, 4, dtype=dtype)
        w, v = xnp.linalg.eig(a)
        jw, jv = jnp.linalg.eig(a)
        # The same LAPACK kernel: the same eigenvalues, eigenvectors (phases included).
        _close((w, v), (jw, jv))
        _close(xnp.linalg.eigvals(a), jnp.linalg.eigvals(a))
        w, v = np.asarray(w), np.asarray(v)
        np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=1e-4)
        _close(xll.eig(a)[1], jax.lax.linalg.eig(a)[1])   # left eigenvectors
    assert xnp.linalg.eigvals(np.eye(2, dtype=np.int32)).dtype == np.complex64


@cpu_only
def test_eig_derivatives():
    a, t = _mat(4, 4), _mat(4, 4)
    jvp = lambda f, api: api.jit(lambda a, t: api.jvp(f, (a,), (t,)))(a, t)  # noqa: E731
    _close(jvp(xnp.linalg.eigvals, xform), jvp(jnp.linalg.eigvals, jax), tol=1e-4)
    g = lambda m: (lambda x: m.real(m.linalg.eigvals(x) ** 2).sum())  # noqa: E731
    _close(xform.jit(xform.grad(g(xnp)))(a), jax.jit(jax.grad(g(jnp)))(a), tol=1e-4)
    e = lambda m: (lambda x: m.eig(x, enable_eigvec_derivs=True))  # noqa: E731
    _close(jvp(e(xll), xform), jvp(e(jax.lax.linalg), jax), tol=1e-4)
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs"):
        xform.jvp(xnp.linalg.eig, (a,), (t,))


@cpu_only
def test_eig_vmap_and_jit():
    a = _mat(3, 4, 4)
    got = xform.jit(xform.vmap(xnp.linalg.eigvals, in_axes=2))(np.moveaxis(a, 0, 2))
    _close(got, jnp.linalg.eigvals(a))


@cpu_only
def test_schur_and_hessenberg():
    a = _mat(2, 4, 4)
    for output in ("real", "complex"):
        t, z = xsl.schur(a, output)
        _close((t, z), jsl.schur(a, output))
        z = np.asarray(z)
        np.testing.assert_allclose(z @ t @ np.conj(np.swapaxes(z, -1, -2)), a, atol=1e-4)
    h, q = xsl.hessenberg(a, calc_q=True)
    _close((h, q), jsl.hessenberg(a, calc_q=True))
    np.testing.assert_allclose(np.asarray(q) @ h @ np.swapaxes(q, -1, -2), a, atol=1e-4)
    _close(xsl.hessenberg(a[0]), jsl.hessenberg(a[0]))


@cpu_only
def test_schur_based_matrix_functions():
    a, b, c = _mat(4, 4), _mat(3, 3), _mat(4, 3)
    _close(xsl.sqrtm(a), jsl.sqrtm(a), tol=1e-4)
    f = lambda m: (lambda x: m.sin(x) + 2 * m.cos(x))  # noqa: E731
    # funm runs schur, then rsf2csf (a has complex eigenvalues: 2x2 blocks to split).
    assert np.iscomplex(np.linalg.eigvals(a)).any()
    _close(xsl.funm(a, f(xnp), disp=False), jsl.funm(a, f(jnp), disp=False), tol=1e-4)
    _close(xsl.solve_sylvester(a, b, c), jsl.solve_sylvester(a, b, c), tol=1e-4)
    x = np.asarray(xsl.solve_sylvester(a, b, c, method="eigen"))
    np.testing.assert_allclose(a @ x + x @ b, c, atol=1e-4)
    assert np.isnan(np.asarray(xsl.solve_sylvester(np.eye(2), -np.eye(2), np.eye(2)))).all()


@pytest.mark.parametrize("ashape,cshape,mode,conjugate", [((5, 3), (4, 5), "right", True),
                                                          ((5, 3), (3,), "left", False),
                                                          ((3, 5), (3, 4), "left", True)])
def test_qr_multiply(ashape, cshape, mode, conjugate):
    a, c = _mat(*ashape, dtype=np.complex64), _mat(*cshape)
    _close(xsl.qr_multiply(a, c, mode, conjugate=conjugate),
           jsl.qr_multiply(a, c, mode, conjugate=conjugate))


def test_eigh_tridiagonal():
    d, e = _mat(6), _mat(5)
    w, v = xsl.eigh_tridiagonal(d, e, select="i", select_range=(1, 3))
    jw, jv = jsl.eigh_tridiagonal(d, e, select="i", select_range=(1, 3))
    _close(w, jw)
    # Vectors up to sign (JAX's come from inverse iteration: float32-accurate only).
    _close(np.abs(np.asarray(v)), np.abs(np.asarray(jv)), tol=2e-4)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    np.testing.assert_allclose(t @ v, np.asarray(v) * np.asarray(w), atol=1e-4)


@pytest.mark.parametrize("call,err,msg", [
    (lambda: xnp.linalg.eig(np.ones((3, 4), np.float32)), ValueError,
     r"The input to eig must be a square matrix. Got shape \(3, 4\)."),
    (lambda: xnp.linalg.eigvals(np.ones(3, np.float32)), TypeError,
     r"Input 0 to eig must have rank at least 2, but got shape=\(3,\)"),
    (lambda: xsl.schur(np.ones((2, 2)), "imag"), ValueError,
     "Expected 'output' to be either 'real' or 'complex'"),
    (lambda: xsl.hessenberg(np.ones((2, 3), np.float32)), ValueError,
     r"Argument to Hessenberg reduction must have shape \[..., n, n\]"),
    (lambda: xsl.expm(np.ones((2, 3))), ValueError,
     r"Expected A to be a \(batched\) square matrix, got A.shape=\(2, 3\)"),
    (lambda: xsl.hadamard(6), ValueError, "n must be a positive power of 2; got 6"),
    (lambda: xsl.polar(np.ones((3, 5)), method="qdwh"), NotImplementedError,
     "method='qdwh' only supports"),
])
def test_errors_match_jax(call, err, msg):
    with pytest.raises(err, match=msg):
        call()


def test_lapack_lowering_as_jax():
    """CPU: the geev/gees/gehrd calls and attributes JAX emits. CUDA: eig is cuSOLVER's
    geev (JAX's default there without left eigenvectors), else jaxlib's hybrid kernel
    (tests/test_export.py compares it with JAX's); schur and hessenberg raise (CPU only
    in JAX too)."""
    a = np.ones((3, 3), np.float32)

    def lowered(f, platform="cpu"):
        return str(mlir.lower_jaxpr_to_module(xform.make_jaxpr(f)(a), platform=platform))
    text = lowered(lambda x: xnp.linalg.eig(x))
    assert "lapack_sgeev_ffi" in text and "compute_left = 78 : ui8" in text
    assert "mode = 86 : ui8, sort = 78 : ui8" in lowered(xll.schur)
    assert "high = 3 : i32, low = 1 : i32" in lowered(xll.hessenberg)
    assert "cusolver_geev_ffi" in lowered(xnp.linalg.eig, "cuda")
    assert "cuhybrid_eig_real" in lowered(xll.eig, "cuda")
    with pytest.raises(NotImplementedError, match="schur is only implemented on CPU"):
        lowered(xll.schur, "cuda")
    assert "cusolver_orgqr_ffi" in lowered(lambda x: xll.householder_product(x, x[0]), "cuda")


def test_unpack_conjugate_pairs():
    """The GPU path's unpacking of real geev's eigenvectors (conjugate pairs stored as
    real and imaginary columns), against NumPy's complex eigenvectors."""
    from xform.lax.linalg_nonsymmetric import _unpack_conjugate_pairs
    w, v = np.linalg.eig(_mat(2, 5, 5))
    packed = v.real.copy()
    pair_start = (w.imag > 0)[..., None, :]   # LAPACK lists +imag first
    packed[..., 1:] = np.where(pair_start[..., :-1], v.imag[..., :-1], packed[..., 1:])
    assert (w.imag != 0).any()
    _close(xform.jit(_unpack_conjugate_pairs)(w.astype(np.complex64), packed.astype(np.float32)),
           v.astype(np.complex64))


@cpu_only
def test_docstring_examples():
    from xform.lax import linalg_nonsymmetric
    from xform.scipy import _linalg_decomp, _linalg_matfuncs, _linalg_special
    for module in (_linalg_special, _linalg_matfuncs, _linalg_decomp, linalg_nonsymmetric):
        result = doctest.testmod(module, extraglobs={"xform": xform},
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted and not result.failed, module.__name__
