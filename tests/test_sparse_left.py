"""xform.experimental.sparse's elementwise operators, comparisons and ``sparse.linalg``
(spsolve, lobpcg_standard) against jax.experimental.sparse: values, nse, dtypes and
JAX's errors, with jit and grad."""
import inspect

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import sparse as jsp
from jax.experimental.sparse import linalg as jspl

import xform
import xform.numpy as jnp
from xform.experimental import sparse as xsp
from xform.experimental.sparse import linalg as xspl

from sparse_util import dense

A = dense((3, 4))
C = (A + 1j * dense((3, 4), seed=1)).astype(np.complex64)


def both(f, x):
    """``f(sparse, M)`` for xform's and JAX's BCOO of ``x``."""
    return f(xsp, xsp.BCOO.fromdense(x)), f(jsp, jsp.BCOO.fromdense(jjnp.asarray(x)))


def check_same(xo, jo, tol=1e-5):
    assert isinstance(xo, xsp.BCOO) == isinstance(jo, jsp.BCOO)
    if isinstance(jo, jsp.BCOO):
        assert (xo.shape, xo.dtype, xo.nse) == (jo.shape, jo.dtype, jo.nse)
        xo, jo = xo.todense(), jo.todense()
    assert np.asarray(xo).dtype == np.asarray(jo).dtype
    np.testing.assert_allclose(np.asarray(xo), np.asarray(jo), rtol=tol, atol=tol)


def errors(f, x):
    out = []
    for sp, arr in ((xsp, x), (jsp, jjnp.asarray(x))):
        with pytest.raises(Exception) as e:
            f(sp, sp.BCOO.fromdense(arr))
        out.append((type(e.value), str(e.value)))
    return out


OPS = {
    "abs": lambda sp, M: abs(M), "neg": lambda sp, M: -M, "pow": lambda sp, M: M ** 3,
    "scale": lambda sp, M: 2 * M / 4, "sub_self": lambda sp, M: M - M,   # nse doubles
    "mul_self": lambda sp, M: M * M, "mul_dense": lambda sp, M: M * np.float32(3) * A,
    "real": lambda sp, M: sp.sparsify(lambda x: x.real * 2)(M),
    "conj_imag": lambda sp, M: sp.sparsify(lambda x: jnp.imag(x.conj()) if sp is xsp
                                           else jjnp.imag(x.conj()))(M),
}


@pytest.mark.parametrize("name", list(OPS))
def test_elementwise_ops_match_jax(name):
    x = C if name in ("real", "conj_imag") else A
    check_same(*both(OPS[name], x))


def test_jit_and_grad_of_operators_match_jax():
    f = lambda M: (abs(M) ** 2 * 3).sum()
    xg = xform.jit(xsp.grad(f))(xsp.BCOO.fromdense(A))
    jg = jax.jit(jsp.grad(f))(jsp.BCOO.fromdense(jjnp.asarray(A)))
    check_same(xg, jg)


@pytest.mark.parametrize("f", [lambda sp, M: M > 0, lambda sp, M: M <= M,
                               lambda sp, M: M == 0, lambda sp, M: M != M,
                               lambda sp, M: M ** 0, lambda sp, M: 1 / M,
                               lambda sp, M: sp.BCSR.fromdense(M.todense()) * 2,
                               lambda sp, M: sp.sparsify(lambda x: (
                                   jax if sp is jsp else xform).lax.div(x, np.int32(2)))(
                                   M.astype(np.int32)),
                               # a smaller dense addend would densify: JAX refuses it
                               lambda sp, M: M + np.ones((1, 4), np.float32)])
def test_errors_match_jax(f):
    (xt, xm), (jt, jm) = errors(f, A)
    assert xt is jt
    assert xm.replace("xform.experimental.sparse._bcsr", "") == \
        jm.replace("jax.experimental.sparse.bcsr", "").replace("jnp.multiply is a similar "
                   "function that does automatic type promotion on inputs).",
                   "jnp.multiply is a similar function that does automatic type "
                   "promotion on inputs.)")


def _system(dtype=np.float32):
    M = (dense((6, 6), seed=2) + 4 * np.eye(6)).astype(dtype)
    csr = xsp.BCSR.fromdense(M)
    return (np.asarray(csr.data), np.asarray(csr.indices), np.asarray(csr.indptr),
            dense((6,), seed=3, density=1.0).astype(dtype))


def test_spsolve_matches_jax():
    d, i, p, b = _system()
    check_same(xform.jit(xspl.spsolve)(d, i, p, b), jspl.spsolve(d, i, p, b), tol=1e-4)
    # gradients in data and b: JAX's JVP and transpose rules
    xg = xform.grad(lambda d, b: (xspl.spsolve(d, i, p, b) ** 2).sum(), (0, 1))(d, b)
    jg = jax.grad(lambda d, b: (jspl.spsolve(d, i, p, b) ** 2).sum(), (0, 1))(d, b)
    for a, e in zip(xg, jg):
        check_same(a, e, tol=1e-4)
    for bad in [dict(b=b[:3]), dict(b=b.astype(np.float16)), dict(data=d[None])]:
        args = dict(data=d, indices=i, indptr=p, b=b) | bad
        with pytest.raises(ValueError) as xe:
            xspl.spsolve(**args)
        with pytest.raises(ValueError) as je:
            jspl.spsolve(**args)
        assert str(xe.value) == str(je.value)
    # JAX's spsolve primitive has no batching rule: vmap over b or data raises
    for lib, solve in ((xform, xspl.spsolve), (jax, jspl.spsolve)):
        for f, xs in ((lambda bb: solve(d, i, p, bb), np.stack([b, b])),
                      (lambda dd: solve(dd, i, p, b), np.stack([d, d]))):
            with pytest.raises(NotImplementedError, match="Batching rule for 'spsolve'"):
                lib.vmap(f)(xs)


def test_lobpcg_standard_matches_jax():
    rng = np.random.RandomState(0)
    Q, _ = np.linalg.qr(rng.randn(12, 12))
    A = ((Q * np.arange(12, 0, -1) ** 2) @ Q.T).astype(np.float32)
    X0 = rng.randn(12, 2).astype(np.float32)
    xt, xu, xi = xspl.lobpcg_standard(A, X0, m=30)
    jt, ju, ji = jspl.lobpcg_standard(jjnp.asarray(A), X0, m=30)
    check_same(xt, jt, tol=1e-2)
    check_same(abs(xu), abs(ju), tol=5e-2)
    assert int(xi) == int(ji)
    with pytest.raises(ValueError, match=r"search dim \* 5 < matrix dim"):
        xspl.lobpcg_standard(A, rng.randn(12, 3).astype(np.float32))


# JAX's names xform leaves out on purpose: its primitives and the sparsify tracer (xform
# has no sparse primitives nor the tracer variant) and its implementation submodules.
NOT_PROVIDED = {"SparseTracer", "todense_p", "ad", "api", "bcoo", "bcsr", "coo", "csr",
                "random", "transform", "util"}


def test_public_names_and_signatures_match_jax():
    missing = {n for n in dir(jsp) if not n.startswith("_") and not hasattr(xsp, n)}
    assert {n for n in missing if not n.endswith("_p")} <= NOT_PROVIDED
    for name in ("spsolve", "lobpcg_standard"):
        xs, js = (inspect.signature(getattr(m, name)) for m in (xspl, jspl))
        assert [(p.name, p.default) for p in xs.parameters.values()] == \
            [(p.name, p.default) for p in js.parameters.values()]
