"""xform.scipy's signal, fft, ndimage, integrate, optimize, interpolate and cluster against
jax.scipy at run time: values, dtypes, shapes, errors, and a grad / jit / vmap check each
where meaningful."""
import importlib

import jax
import jax.numpy as jnp
import jax.scipy.optimize  # noqa: F401  (jax.scipy's submodules load lazily)
import jax.scipy.spatial.transform  # noqa: F401
import numpy as np
import pytest
from jax._src.scipy.optimize.line_search import line_search as jax_line_search

import xform
import xform.numpy as xnp
import xform.scipy as xsp
from test_numpy import check as _check

R = np.random.RandomState(0)
A = R.randn(5, 4).astype(np.float32)
B = R.randn(2, 3).astype(np.float32)
C = (R.randn(3, 2) + 1j * R.randn(3, 2)).astype(np.complex64)
I = np.arange(6, dtype=np.int32)


def check(got, expected, tol=None, weak=False):
    """test_numpy's check, with complex outputs compared as (real, imag)."""
    if isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected)
        return [check(g, e, tol, weak) for g, e in zip(got, expected)]
    if np.iscomplexobj(expected):
        assert got.dtype == expected.dtype
        return _check([xnp.real(got), xnp.imag(got)], [jnp.real(expected), jnp.imag(expected)],
                      tol, weak)
    return _check(got, expected, tol, weak)


def _mod(lib, sub):
    return importlib.import_module(f"{'jax' if lib is jnp else 'xform'}.scipy.{sub}")


def _both(sub, fn, tol=1e-4):
    """``fn(module, numpy)`` with jax.scipy.<sub> and xform.scipy.<sub>: the same outputs
    (shapes, dtypes, values); where JAX raises, xform raises the same class. Both run
    under their jit (one compile per call, not one per op)."""
    try:
        expected = jax.jit(lambda: fn(_mod(jnp, sub), jnp))()
    except (TypeError, ValueError, NotImplementedError) as e:
        with pytest.raises(type(e)):
            xform.jit(lambda: fn(_mod(xnp, sub), xnp))()
        return
    got = xform.jit(lambda: fn(_mod(xnp, sub), xnp))()
    as_list = lambda t: list(t) if isinstance(t, (list, tuple)) else t
    check(as_list(got), as_list(expected), tol, weak=False)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_signal_convolve_correlate(mode):
    _both("signal", lambda s, m: (
        s.convolve(A, B, mode), s.convolve(B, A, mode), s.correlate(A, B, mode),
        s.correlate(C, B[:2, :1], mode), s.convolve(I, I[:3], mode, method="fft"),
        s.fftconvolve(A, B, mode), s.fftconvolve(C, C[:2], mode), s.convolve2d(A, B, mode),
        s.correlate2d(A, B, mode), s.correlate2d(B, A, mode), s.correlate2d(C, C, mode),
        s.fftconvolve(A, A[:, :2], mode, axes=1)))


@pytest.mark.parametrize("fn", [
    lambda s, m: s.convolve(A, B[0]),                       # ranks differ
    lambda s, m: s.convolve(A, np.zeros((0, 1), np.float32)),
    lambda s, m: s.convolve(A, B, method="nope"), lambda s, m: s.convolve(A, B, "bad"),
    lambda s, m: s.convolve(A[:2], A[:, :1].T),             # neither input is larger
    lambda s, m: s.convolve2d(A, B, boundary="wrap"), lambda s, m: s.correlate2d(A[0], B[0]),
    lambda s, m: s.fftconvolve(A, B, axes=0),               # mapped axes differ
    lambda s, m: s.detrend(A, type="quadratic"), lambda s, m: s.detrend(A, bp=[9]),
])
def test_signal_errors(fn):
    _both("signal", fn)


def test_signal_detrend_and_transforms():
    x = R.randn(3, 12).astype(np.float32)
    _both("signal", lambda s, m: (s.detrend(x, axis=0, type="constant"),
                                  s.detrend(x[0], bp=[4, 7])))
    f = lambda s, m: lambda a: m.sum(s.convolve(a, B, "same") ** 2) + s.correlate2d(a, B)[1, 2]
    check(xform.jit(xform.grad(f(xsp.signal, xnp)))(A), jax.grad(f(jax.scipy.signal, jnp))(A),
          1e-4)
    g = lambda s: lambda a: s.fftconvolve(a, B[0], "same")
    check(xform.jit(xform.vmap(g(xsp.signal)))(A), jax.vmap(g(jax.scipy.signal))(A), 1e-4)


def test_signal_spectral():
    x, y = R.randn(2, 40).astype(np.float32), R.randn(2, 30).astype(np.float32)
    z = np.asarray(jax.scipy.signal.stft(x[0], nperseg=8)[2])
    _both("signal", lambda s, m: [
        *s.stft(x.T, nperseg=9, noverlap=3, nfft=12, boundary="odd", padded=False, axis=0),
        *s.welch(x, nperseg=10, noverlap=2, average="median"),
        *s.csd(x, y, nperseg=8, scaling="spectrum", fs=2., return_onesided=False),
        *s.istft(z, window=np.hanning(8).astype(np.float32), boundary=False)], tol=2e-4)
    for bad in (lambda s, m: s.istft(z[0]), lambda s, m: s.istft(z, time_axis=0, freq_axis=0),
                lambda s, m: s.istft(z, nfft=4), lambda s, m: s.stft(x, nperseg=0),
                lambda s, m: s.stft(x, nperseg=8, noverlap=8), lambda s, m: s.stft(x, boundary="x"),
                lambda s, m: s.welch(x, average="x", nperseg=8), lambda s, m: s.csd(x, x[0]),
                lambda s, m: s.welch(x, window=np.ones(8), nperseg=4)):
        _both("signal", bad)
    f = lambda s: lambda a: s.welch(a, nperseg=8)[1].sum()
    check(xform.jit(xform.grad(f(xsp.signal)))(x[0]), jax.grad(f(jax.scipy.signal))(x[0]), 1e-4)


def test_fft_dct():
    x = R.randn(4, 5, 3).astype(np.float32)
    _both("fft", lambda f, m: (
        f.dct(I, n=3, norm="ortho"), f.idct(C, n=4, axis=0), f.dctn(x, s=(3, 6), norm="ortho"),
        f.idctn(x, s=[2, 2, 2])), tol=2e-4)
    for bad in (lambda f, m: f.dct(x, type=3), lambda f, m: f.idctn(x, norm="forward"),
                lambda f, m: f.dctn(x, s=(1, 1, 1, 1)),
                lambda f, m: f.idctn(x, axes=(1, -2))):
        _both("fft", bad)
    f = lambda s: lambda a: s.idct(s.dct(a, n=7, axis=1) ** 2, axis=0).sum()
    check(xform.jit(xform.grad(f(xsp.fft)))(x), jax.grad(f(jax.scipy.fft))(x), 1e-4)



def test_fft_of_int64_under_x64_is_complex128(x64):
    # JAX's wrapper casts to to_inexact_dtype(x): int64 -> float64 -> complex128 under x64
    # (xform used complex64 for every non-float64 input: silently single precision).
    a = np.arange(5)
    for name in ("fft", "rfft", "ihfft", "irfft", "fftn"):
        r, e = getattr(xnp.fft, name)(a), getattr(jnp.fft, name)(a)
        assert r.dtype == e.dtype, name
        np.testing.assert_allclose(np.asarray(r), np.asarray(e), rtol=1e-12, atol=1e-12)


def test_rfftfreq_integer_dtype_divides_truly():
    # JAX: arange(dtype) / array(d * n, dtype), a true division (xform divided integers)
    for n, d, dt in ((8, 1.0, np.int32), (5, 2.5, np.uint8), (5, 0.5, np.float16)):
        r, e = xnp.fft.rfftfreq(n, d, dtype=dt), jnp.fft.rfftfreq(n, d, dtype=dt)
        assert r.dtype == e.dtype, (n, d, dt)
        np.testing.assert_array_equal(np.asarray(r), np.asarray(e))

def test_ndimage_map_coordinates():
    coords = [R.uniform(-2, 7, (3, 4)).astype(np.float32) for _ in range(2)]
    for x in (A, np.arange(20).reshape(5, 4)):
        for order in (0, 1):
            _both("ndimage", lambda nd, m: [
                nd.map_coordinates(x, coords, order, mode, cval=1.5)
                for mode in ("constant", "nearest", "wrap", "mirror", "reflect")], tol=1e-5)
    for bad in (lambda nd, m: nd.map_coordinates(A, coords[:1], 1),
                lambda nd, m: nd.map_coordinates(A, coords, 3),
                lambda nd, m: nd.map_coordinates(A, coords, 1, mode="grid-wrap")):
        _both("ndimage", bad)
    f = lambda nd: lambda a, c: nd.map_coordinates(a, c, 1).sum()
    check(xform.jit(xform.grad(f(xsp.ndimage), (0, 1)))(A, coords),
          jax.grad(f(jax.scipy.ndimage), (0, 1))(A, coords), 1e-5)


def test_integrate_trapezoid():
    y = R.randn(3, 6).astype(np.float32)
    _both("integrate", lambda i, m: (i.trapezoid(y), i.trapezoid(y, dx=0.5, axis=0),
                                     i.trapezoid(y, x=np.linspace(0, 1, 6)), i.trapezoid(I)))


def _objective(m):
    c, w = np.array([1., -2., .5], np.float32), np.array([1., 3., .5], np.float32)
    return lambda x, a: m.sum(w * (x - c) ** 2) + a * m.sum(x ** 4) + m.sin(x[0])


def test_optimize_minimize():
    x0, a = np.zeros(3, np.float32), np.array([0., 1.], np.float32)
    opts = {"maxiter": 6, "gtol": 1e-2, "norm": 2}   # a=0 converges in 4, a=1 runs out

    def run(o, m):
        solve = lambda a: o.minimize(_objective(m), x0, (a,), method="BFGS", options=opts)
        return (jax.vmap if m is jnp else xform.vmap)(solve)(a)
    expected = jax.jit(lambda: run(jax.scipy.optimize, jnp))()
    got = xform.jit(lambda: run(xsp.optimize, xnp))()
    assert type(got).__name__ == "OptimizeResults" and got._fields == expected._fields
    check(list(got), list(expected), 1e-4, weak=False)
    assert np.asarray(got.status).tolist() == [0, 1]
    for bad in (lambda o, m: o.minimize(_objective(m), x0, 0.1, method="BFGS"),
                lambda o, m: o.minimize(_objective(m), x0, (0.1,), method="Nelder-Mead")):
        _both("optimize", bad)


def test_optimize_lbfgs():
    x0, method = np.zeros(3, np.float32), "l-bfgs-experimental-do-not-rely-on-this"
    run = lambda o, m: o.minimize(_objective(m), x0, (0.1,), method=method,
                                  options={"maxcor": 2})
    expected = jax.jit(lambda: run(jax.scipy.optimize, jnp))()
    got = xform.jit(lambda: run(xsp.optimize, xnp))()
    assert got.hess_inv is None and expected.hess_inv is None
    check([v for v in got if v is not None], [v for v in expected if v is not None], 1e-4)


def test_optimize_counters_are_weak_default_ints_also_under_x64(x64):
    # BFGS raised a while_loop carry mismatch under x64 (int32 counters, int64 status);
    # JAX's counters start as Python ints: weak, int64 under x64
    for method in ("BFGS", "l-bfgs-experimental-do-not-rely-on-this"):
        run = lambda o, m: o.minimize(_objective(m), np.zeros(3), (0.1,), method=method,
                                      options={"maxiter": 3})
        got, want = run(xsp.optimize, xnp), run(jax.scipy.optimize, jnp)
        check([v for v in got if v is not None], [v for v in want if v is not None], 1e-6,
              weak=True)


def test_optimize_line_search():
    f = lambda m: lambda x: m.sum(100. * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    x0 = np.array([-1.2, 1., .5], np.float32)
    g0 = np.asarray(jax.grad(f(jnp))(x0))
    kw = dict(old_fval=f(np)(x0), gfk=g0, old_old_fval=np.float32(30.))
    p = np.array([1., -2., .5], np.float32)
    run = lambda ls, m: [list(ls(f(m), x0, p)), list(ls(f(m), x0, -g0, **kw))]
    check(xform.jit(lambda: run(xsp.optimize.line_search, xnp))(),
          jax.jit(lambda: run(jax_line_search, jnp))(), 1e-4)


def test_interpolate_regular_grid():
    grid = (np.array([0., 1., 2.5, 4.], np.float32), np.array([-1., 0., 2.], np.float32))
    v = R.randn(4, 3, 2).astype(np.float32)
    pts = R.uniform(-1.5, 4.5, (6, 2)).astype(np.float32)
    _both("interpolate", lambda ip, m: [
        ip.RegularGridInterpolator(grid, v, "linear")(pts),
        ip.RegularGridInterpolator(grid, v, "nearest", fill_value=None)(pts),
        ip.RegularGridInterpolator(grid, v, fill_value=0.)(pts[:3]),
        ip.RegularGridInterpolator(grid, v[..., 0])((pts[:, 0], pts[:, 1])),
        ip.RegularGridInterpolator(grid, v[..., 0])(pts[:2], method="nearest")], tol=1e-5)
    for bad in (lambda ip, m: ip.RegularGridInterpolator(grid, v, "cubic"),
                lambda ip, m: ip.RegularGridInterpolator(grid, v, bounds_error=True),
                lambda ip, m: ip.RegularGridInterpolator(grid * 4, v),
                lambda ip, m: ip.RegularGridInterpolator(grid, v)(pts[:, :1]),
                lambda ip, m: ip.RegularGridInterpolator(grid, v, fill_value=1j)):
        _both("interpolate", bad)
    # the interpolator is a pytree argument of jit; its gradient in the points
    interp = lambda ip: ip.RegularGridInterpolator(grid, v[..., 0], fill_value=None)
    run = lambda grad: lambda f, p: (f(p), grad(lambda p: f(p).sum())(p))
    check(list(xform.jit(run(xform.grad))(interp(xsp.interpolate), pts)),
          list(jax.jit(run(jax.grad))(interp(jax.scipy.interpolate), pts)), 1e-5)


def test_cluster_vq():
    obs, book = R.randn(6, 3).astype(np.float32), R.randn(4, 3).astype(np.float32)
    _both("cluster.vq", lambda q, m: (q.vq(obs, book), q.vq(obs[:, 0], book[:, 0]),
                                      q.vq(I, I[:2])), tol=1e-6)
    for bad in (lambda q, m: q.vq(obs, book[0]), lambda q, m: q.vq(obs[None], book[None])):
        _both("cluster.vq", bad)


def test_spatial_transform():
    q, v = R.randn(4, 4).astype(np.float32), R.randn(4, 3).astype(np.float32)
    t = np.array([0., 1., 3., 4.], np.float32)

    def run(tr, m):
        Rot, r = tr.Rotation, tr.Rotation.from_quat(q)
        out = [r.quat, r.as_matrix(), Rot.from_matrix(r.as_matrix()).as_quat(canonical=True),
               r.as_rotvec(degrees=True), Rot.from_rotvec(v).quat, r.as_mrp(),
               Rot.from_mrp(v).quat, r.apply(v, inverse=True), (r * r[::-1]).quat,
               r.magnitude(), r.mean(np.arange(4.)).as_quat(canonical=True),
               r.as_quat(scalar_first=True), Rot.identity().quat,
               Rot.concatenate([r, r[:2]]).quat, Rot.from_euler("XY", v[:, :2], True).quat,
               Rot.from_euler("xyz", np.array([.3, np.pi / 2, .2], np.float32)).as_euler("xyz"),
               Rot.from_euler("ZXZ", np.array([.3, 0., .2], np.float32)).as_euler("ZXZ"),
               tr.Slerp.init(t, r)(np.array([.2, 1.5, 3.9, 4.], np.float32)).quat]
        return out + [r.as_euler("zyx", degrees=True)]
    _both("spatial.transform", run, tol=2e-4)
    r = lambda tr: tr.Rotation.from_quat(q)
    for bad in (lambda tr, m: tr.Rotation.from_euler("xxz", v[0]),
                lambda tr, m: tr.Rotation.from_euler("xYz", v[0]),
                lambda tr, m: r(tr).as_euler("xy"), lambda tr, m: r(tr)[0][0],
                lambda tr, m: r(tr).mean(np.ones(3)), lambda tr, m: tr.Slerp.init(t, r(tr)[0]),
                lambda tr, m: tr.Slerp.init(t[:3], r(tr)), lambda tr, m: tr.Slerp.init(t, q)):
        _both("spatial.transform", bad)
    f = lambda tr: lambda v: tr.Rotation.from_rotvec(v).apply(v[::-1]).sum()
    check(xform.jit(xform.vmap(xform.grad(f(xsp.spatial.transform))))(v[None]),
          jax.vmap(jax.grad(f(jax.scipy.spatial.transform)))(v[None]), 1e-4)


def test_scipy_names():
    for sub, names in {"signal": ["convolve", "convolve2d", "correlate", "correlate2d",
                                  "detrend", "fftconvolve", "stft", "istft", "csd", "welch"],
                       "fft": ["dct", "dctn", "idct", "idctn"],
                       "ndimage": ["map_coordinates"], "integrate": ["trapezoid"],
                       "optimize": ["OptimizeResults", "minimize", "line_search"],
                       "interpolate": ["RegularGridInterpolator"], "cluster.vq": ["vq"],
                       "spatial.transform": ["Rotation", "Slerp"]}.items():
        mod = importlib.import_module(f"xform.scipy.{sub}")
        assert all(hasattr(mod, n) for n in names), (sub, names)


def test_docstring_examples():
    import doctest
    from xform.scipy.spatial.transform import Rotation, Slerp
    glob = {"jnp": xnp, "np": np, "xform": xform, "Rotation": Rotation, "Slerp": Slerp}
    for sub in ("signal", "_spectral", "fft", "ndimage", "optimize._line_search",
                "optimize._minimize", "interpolate", "cluster.vq", "spatial.transform"):
        with xform.lazy():   # (one compile per printed value, not one per op)
            result = doctest.testmod(importlib.import_module(f"xform.scipy.{sub}"),
                                     extraglobs=glob, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0, sub
