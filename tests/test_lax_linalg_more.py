"""The rest of jax.lax.linalg against the installed jax at run time: tridiagonal,
tridiagonal_solve (JVP, transpose, both batching cases), ormqr, symmetric_product,
cholesky_update, lu_pivots_to_permutation_p, qdwh and the algorithm enums of eig/eigh/
svd; JAX's errors for bad input and for the rules it lacks; and, through a CUDA export
on the CPU, the cuSOLVER/cuSPARSE custom calls each one makes."""
import re

import jax
import numpy as np
import pytest

import xform
from xform import export

L, J = xform.lax.linalg, jax.lax.linalg
RNG = np.random.default_rng(11)
F32 = np.float32


def _mat(*shape, dtype=F32):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _same(ours, theirs, tol=1e-5):
    xs, ys = xform.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        a, b = np.asarray(a), np.asarray(b)
        assert (a.shape, a.dtype) == (b.shape, b.dtype)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _raises_like(ours, theirs, match):
    """Both libraries raise the same error class, ours with a message matching."""
    with pytest.raises(Exception) as want:
        theirs()
    with pytest.raises(want.type, match=match):
        ours()


# ---- tridiagonal ----

@pytest.mark.parametrize("dtype,lower", [(F32, True), (np.complex64, False)])
def test_tridiagonal_matches_jax_eager_jit_and_vmap(dtype, lower):
    a = _mat(2, 4, 4, dtype=dtype)
    want = J.tridiagonal(a, lower=lower)
    ours = L.tridiagonal(a, lower=lower)
    assert type(ours) is type(want)   # (a list)
    _same(ours, want)
    _same(xform.jit(lambda a: L.tridiagonal(a, lower=lower))(a), want)
    looped = [L.tridiagonal(x, lower=lower) for x in a]
    _same(xform.vmap(lambda a: L.tridiagonal(a, lower=lower), in_axes=2)(
        np.moveaxis(a, 0, 2)), tuple(np.stack(o) for o in zip(*looped)))


def test_tridiagonal_errors_as_jax():
    for bad, match in [(np.ones((3, 4), F32), "square matrix. Got shape"),
                       (np.ones((0, 0), F32), "square matrix"),
                       (np.ones(3, F32), "rank at least 2"),
                       (np.ones((3, 3), np.int32), "does not accept dtype int32")]:
        _raises_like(lambda: L.tridiagonal(bad), lambda: J.tridiagonal(bad), match)
    eye = np.eye(3, dtype=F32)
    _raises_like(lambda: xform.jvp(L.tridiagonal, (eye,), (eye,)),
                 lambda: jax.jvp(J.tridiagonal, (eye,), (eye,)), "Differentiation rule")


# ---- tridiagonal_solve ----

def _system(*batch, m=5, k=3, dtype=F32):
    dl, d, du = (_mat(*batch, m, dtype=dtype) for _ in range(3))
    return dl, d + 4, du, _mat(*batch, m, k, dtype=dtype)


@pytest.mark.parametrize("dtype", [F32, np.complex64])
def test_tridiagonal_solve_matches_jax(dtype):
    args = _system(2, dtype=dtype)
    want = J.tridiagonal_solve(*args)
    _same(L.tridiagonal_solve(*args), want)
    _same(xform.jit(L.tridiagonal_solve)(*args), want)
    singular = (np.zeros(3, F32), np.array([1, 0, 1], F32), np.zeros(3, F32),
                np.ones((3, 2), F32))
    ours = L.tridiagonal_solve(*singular, perturb_singular=True)
    _same(ours, J.tridiagonal_solve(*singular, perturb_singular=True))
    assert np.isfinite(np.asarray(ours)).all()


def test_tridiagonal_solve_thomas_fallback_matches_jax():
    # the lowering where no kernel is called (CUDA for m <= 2; JAX's scan there)
    from xform.lax.linalg_tridiagonal import _thomas
    for m in (1, 2, 5):
        args = _system(2, m=m)
        _same(xform.jit(_thomas)(*args), J.tridiagonal_solve(*args), tol=1e-4)


def test_tridiagonal_solve_vmap_both_rules_match_a_loop():
    dl, d, du, b = _system(3)
    # only b batched: the batch becomes more columns of one solve
    bs = _mat(5, 2, 4)
    got = xform.vmap(L.tridiagonal_solve, in_axes=(None, None, None, 2))(dl[0], d[0], du[0], bs)
    _same(got, np.stack([L.tridiagonal_solve(dl[0], d[0], du[0], bs[..., j])
                         for j in range(4)]))
    got = xform.vmap(L.tridiagonal_solve, in_axes=(0, None, 1, 0))(dl, d[0], du.T, b)
    _same(got, np.stack([L.tridiagonal_solve(dl[i], d[0], du[i], b[i]) for i in range(3)]))


def test_tridiagonal_solve_grad_matches_jax_and_finite_differences():
    args = _system(m=4, k=2)
    w = _mat(4, 2)

    def loss(lib):
        return lambda *a: (lib.tridiagonal_solve(*a) * w).sum()
    ours = xform.grad(loss(L), argnums=(0, 1, 2, 3))(*args)
    _same(ours, jax.grad(loss(J), argnums=(0, 1, 2, 3))(*args), tol=1e-4)
    # central differences in float64 (numpy) along a random direction of each argument
    f = lambda *a: (np.linalg.solve(np.diag(a[1]) + np.diag(a[0][1:], -1)  # noqa: E731
                                    + np.diag(a[2][:-1], 1), a[3]) * w).sum()
    x64 = [a.astype(np.float64) for a in args]
    for i, g in enumerate(ours):
        v = _mat(*args[i].shape).astype(np.float64)
        hi, lo = list(x64), list(x64)
        hi[i], lo[i] = x64[i] + 1e-6 * v, x64[i] - 1e-6 * v
        np.testing.assert_allclose((np.asarray(g) * v).sum(), (f(*hi) - f(*lo)) / 2e-6,
                                   rtol=1e-3, atol=1e-3)


def test_tridiagonal_solve_errors_as_jax():
    v, b = np.ones(3, F32), np.ones((3, 1), F32)
    for args, match in [((v, v, np.ones(4, F32), b), "same shape"),
                        ((v, v, v, np.ones((4, 1), F32)), "leading ndim-1 dimensions"),
                        ((v, v, v, np.ones(3, F32)), "rank at least 2"),
                        ((np.ones((2, 3), F32),) * 3 + (b,), "same number of batch"),
                        ((v.astype(np.int32),) * 3 + (b.astype(np.int32),),
                         "does not accept dtype int32")]:
        _raises_like(lambda: L.tridiagonal_solve(*args), lambda: J.tridiagonal_solve(*args),
                     match)


# ---- ormqr ----

def test_ormqr_matches_jax_and_the_explicit_q():
    for dtype, cases in [(F32, [(True, False), (False, True)]),
                         (np.complex64, [(True, True), (False, False)])]:
        a = _mat(2, 5, 3, dtype=dtype)
        h, taus = L.geqrf(a)
        q = np.asarray(xform.numpy.linalg.qr(a, mode="complete")[0])
        for left, transpose in cases:
            c = _mat(2, 5, 4, dtype=dtype) if left else _mat(2, 4, 5, dtype=dtype)
            want = J.ormqr(np.asarray(h), np.asarray(taus), c, left=left, transpose=transpose)
            _same(L.ormqr(h, taus, c, left=left, transpose=transpose), want, tol=1e-4)
            qq = np.conj(np.swapaxes(q, -1, -2)) if transpose else q
            _same(want, qq @ c if left else c @ qq, tol=1e-4)
    # vmap over a batch of c against one factorization
    c = _mat(3, 5, 2, dtype=dtype)
    got = xform.vmap(lambda c: L.ormqr(h[0], taus[0], c))(c)
    _same(got, np.stack([np.asarray(J.ormqr(np.asarray(h[0]), np.asarray(taus[0]), x))
                         for x in c]), tol=1e-4)


def test_ormqr_errors_as_jax():
    a, t = np.ones((3, 2), F32), np.ones(2, F32)
    _raises_like(lambda: L.ormqr(a, t, np.ones((4, 3), F32)),
                 lambda: J.ormqr(a, t, np.ones((4, 3), F32)), "left=True expects c")
    _raises_like(lambda: L.ormqr(a, t, np.ones((4, 4), F32), left=False),
                 lambda: J.ormqr(a, t, np.ones((4, 4), F32), left=False),
                 "left=False expects c")
    c = np.ones((3, 4), F32)
    _raises_like(lambda: xform.jvp(lambda c: L.ormqr(a, t, c), (c,), (c,)),
                 lambda: jax.jvp(lambda c: J.ormqr(a, t, c), (c,), (c,)),
                 "Differentiation rule for 'ormqr'")
    with pytest.raises(ValueError, match="at most min"):   # JAX hands it to the kernel
        L.ormqr(a, np.ones(3, F32), c)


# ---- symmetric_product ----

def test_symmetric_product_matches_jax_and_vmap():
    a, c = _mat(2, 3, 4), _mat(2, 3, 3)
    f = lambda lib, a, c, sym: lib.symmetric_product(  # noqa: E731
        a, c, alpha=2., beta=.5, symmetrize_output=sym)
    _same(f(L, a, c, False), f(J, a, c, False))
    _same(xform.jit(lambda a, c: f(L, a, c, True))(a, c), f(J, a, c, True))
    got = xform.vmap(lambda a: L.symmetric_product(a, c[0]), in_axes=1)(np.moveaxis(a, 0, 1))
    _same(got, J.symmetric_product(a, np.stack([c[0], c[0]])))


def test_symmetric_product_errors_as_jax():
    a, c = np.ones((3, 2), F32), np.ones((3, 3), F32)
    for args, match in [((a, np.ones((2, 2), F32)), "symmetric_update expects"),
                        ((a.astype(np.complex64), c.astype(np.complex64)),
                         "does not accept dtype complex64")]:
        _raises_like(lambda: L.symmetric_product(*args), lambda: J.symmetric_product(*args),
                     match)
    _raises_like(lambda: xform.jvp(lambda a: L.symmetric_product(a, c), (a,), (a,)),
                 lambda: jax.jvp(lambda a: J.symmetric_product(a, c), (a,), (a,)),
                 "Differentiation rule for 'symmetric_product'")


# ---- cholesky_update ----

def test_cholesky_update_matches_jax_and_the_refactorization():
    x = _mat(4, 4)
    r = np.linalg.cholesky(x @ x.T + 4 * np.eye(4)).T.astype(F32)
    w = _mat(4)
    w[1] = 0   # (a row the rotation leaves alone)
    want = J.cholesky_update(r, w)
    _same(L.cholesky_update(r, w), want)
    _same(xform.jit(L.cholesky_update)(r, w), want)
    got = np.asarray(want)
    np.testing.assert_allclose(got.T @ got, r.T @ r + np.outer(w, w), rtol=1e-4, atol=1e-4)


def test_cholesky_update_errors_and_missing_rules_as_jax():
    r, w = np.eye(3, dtype=F32), np.ones(3, F32)
    for args, match in [((r, np.ones(4, F32)), "Rank-1 update"),
                        ((r, w.astype(np.complex64)), "does not accept dtype complex64"),
                        ((np.ones((2, 3, 3), F32), np.ones((2, 3), F32)),
                         "rank of exactly 2")]:
        _raises_like(lambda: L.cholesky_update(*args), lambda: J.cholesky_update(*args),
                     match)
    rs, ws = np.stack([r, r]), np.stack([w, w])
    _raises_like(lambda: xform.vmap(L.cholesky_update)(rs, ws),
                 lambda: jax.vmap(J.cholesky_update)(rs, ws), "Batching rule")
    _raises_like(lambda: xform.jvp(L.cholesky_update, (r, w), (r, w)),
                 lambda: jax.jvp(J.cholesky_update, (r, w), (r, w)), "Differentiation rule")


# ---- lu_pivots_to_permutation_p ----

def test_lu_pivots_to_permutation_primitive():
    piv = np.array([[2, 2, 3], [1, 3, 3]], np.int32)
    want = J.lu_pivots_to_permutation(piv, 5)
    _same(L.lu_pivots_to_permutation_p.bind(piv, permutation_size=5), want)
    _same(xform.vmap(lambda p: L.lu_pivots_to_permutation(p, 5))(piv), want)
    _same(L.lu_pivots_to_permutation(np.zeros((2, 0), np.int32), 3),
          J.lu_pivots_to_permutation(np.zeros((2, 0), np.int32), 3))
    for args, match in [((piv, 2), "has to exceed"),
                        ((piv.astype(F32), 5), "does not accept dtype float32")]:
        _raises_like(lambda: L.lu_pivots_to_permutation(*args),
                     lambda: J.lu_pivots_to_permutation(*args), match)


# ---- qdwh ----

def test_qdwh_matches_jax():
    # complex, zero-padded up to its static shape (xform.scipy's polar tests the plain path)
    x = _mat(5, 3, dtype=np.complex64)
    padded = np.pad(x, ((0, 2), (0, 1)))
    u, h, iters, ok = L.qdwh(padded, dynamic_shape=(5, 3))
    ju, jh, jiters, jok = J.qdwh(padded, dynamic_shape=(5, 3))
    _same((u, h), (ju, jh), tol=1e-5)
    assert (int(iters), bool(ok)) == (int(jiters), bool(jok))
    np.testing.assert_allclose(np.asarray(u)[:5, :3] @ np.asarray(h)[:3, :3], x, rtol=1e-4,
                               atol=1e-4)
    _raises_like(lambda: L.qdwh(x.T), lambda: J.qdwh(x.T), "must have M >= N")


# ---- the algorithm enums ----

def test_enums_and_implementation_choices_as_jax_on_cpu():
    for name in ("EigImplementation", "EighImplementation", "SvdAlgorithm"):
        assert ({m.name: m.value for m in getattr(L, name)}
                == {m.name: m.value for m in getattr(J, name)})
    a = _mat(4, 4)
    a = a + a.T
    _same(L.eigh(a, implementation=L.EighImplementation.QR, subset_by_index=(0, 4)),
          J.eigh(a, implementation=J.EighImplementation.QR, subset_by_index=(0, 4)))
    for alg in ("QR", "DIVIDE_AND_CONQUER"):
        _same(L.svd(a, algorithm=L.SvdAlgorithm[alg]), J.svd(a, algorithm=J.SvdAlgorithm[alg]),
              tol=1e-4)
    _same(L.eig(a, implementation=L.EigImplementation.LAPACK)[0],
          J.eig(a, implementation=J.EigImplementation.LAPACK)[0], tol=1e-4)
    for ours, theirs, match in [
            (lambda: L.eigh(a, implementation=L.EighImplementation.JACOBI),
             lambda: J.eigh(a, implementation=J.EighImplementation.JACOBI), "Jacobi"),
            (lambda: L.eigh(a, implementation=L.EighImplementation.QDWH),
             lambda: J.eigh(a, implementation=J.EighImplementation.QDWH), "QDWH"),
            (lambda: L.svd(a, algorithm=L.SvdAlgorithm.POLAR),
             lambda: J.svd(a, algorithm=J.SvdAlgorithm.POLAR), "Jacobi and Polar"),
            (lambda: L.eig(a, implementation=L.EigImplementation.CUSOLVER),
             lambda: J.eig(a, implementation=J.EigImplementation.CUSOLVER), "lapack"),
            (lambda: L.eigh(a, subset_by_index=(0, 2)), lambda: J.eigh(a, subset_by_index=(0, 2)),
             "subset_by_index not supported"),
            (lambda: L.svd(a, subset_by_index=(0, 2)), lambda: J.svd(a, subset_by_index=(0, 2)),
             "cannot both be set")]:
        _raises_like(ours, theirs, match)


# ---- the kernels on CUDA (an export for platforms=("cuda",), checkable on the CPU) ----

_CUDA_CASES = {   # name -> (function of the linalg module, argument shapes)
    "tridiagonal": (lambda l: lambda a: l.tridiagonal(a, lower=False), [(2, 4, 4)]),
    "gtsv2": (lambda l: l.tridiagonal_solve, [(2, 5)] * 3 + [(2, 5, 3)]),
    "small_tsolve": (lambda l: l.tridiagonal_solve, [(2,)] * 3 + [(2, 3)]),
    "perturbed": (lambda l: lambda *a: l.tridiagonal_solve(*a, perturb_singular=True),
                  [(5,)] * 3 + [(5, 3)]),
    "ormqr": (lambda l: lambda a, t, c: l.ormqr(a, t, c, transpose=True),
              [(5, 3), (3,), (5, 2)]),
    "syrk": (lambda l: lambda a, c: l.symmetric_product(a, c, alpha=2., beta=3.),
             [(3, 2), (3, 3)]),
    "cholesky_update": (lambda l: l.cholesky_update, [(3, 3), (3,)]),
    "eigh_jacobi": (lambda l: lambda a: l.eigh(
        a, implementation=l.EighImplementation.JACOBI), [(4, 4)]),
    "svd_polar": (lambda l: lambda a: l.svd(a, full_matrices=False,
                                            algorithm=l.SvdAlgorithm.POLAR), [(5, 3)]),
    "svd_qr": (lambda l: lambda a: l.svd(a, algorithm=l.SvdAlgorithm.QR), [(3, 5)]),
    "eig_magma": (lambda l: lambda a: l.eig(a, compute_left_eigenvectors=False,
                                            implementation=l.EigImplementation.MAGMA),
                  [(4, 4)]),
}


def _calls(text):
    """(target, backend_config) of every custom call, and the count of while loops."""
    found = []
    for target, rest in re.findall(r"custom_call @(\w+)\((.*)", text):
        config = re.search(r"backend_config = (\{[^}]*\})", rest)
        found.append((target, config.group(1) if config else "{}"))
    return sorted(found), text.count("stablehlo.while")


def test_cuda_export_calls_jaxs_kernels():
    unguaranteed = ("cu_tridiagonal_solve_perturbed", "cu_cholesky_update_ffi",
                    "cusolver_syrk_ffi", "cusolver_gesvdp_ffi", "cusolver_ormqr_ffi",
                    "cuhybrid_eig_real")   # (JAX keeps no compatibility promise for these)
    for name, (fn, shapes) in _CUDA_CASES.items():
        ours = export.export(xform.jit(fn(L)), platforms=("cuda",), disabled_checks=[
            export.DisabledSafetyCheck.custom_call(t) for t in unguaranteed])(
            *[xform.ShapeDtypeStruct(s, F32) for s in shapes]).mlir_module()
        theirs = jax.export.export(jax.jit(fn(J)), platforms=("cuda",), disabled_checks=[
            jax.export.DisabledSafetyCheck.custom_call(t) for t in unguaranteed])(
            *[jax.ShapeDtypeStruct(s, F32) for s in shapes]).mlir_module()
        assert _calls(ours) == _calls(theirs), name
