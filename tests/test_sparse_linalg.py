"""xform.scipy.sparse.linalg (cg, bicgstab, gmres) and xform.typing against JAX:
values, pytrees, options and gradients."""
import jax
import jax.numpy as jjnp
import jax.scipy.sparse.linalg as jsl
import numpy as np
import pytest

import xform
import xform.numpy as jnp
import xform.scipy.sparse.linalg as xsl

_rng = np.random.RandomState(0)
_Q = _rng.randn(4, 4).astype(np.float32)
SPD = (_Q @ _Q.T + 4 * np.eye(4)).astype(np.float32)
GEN = (_Q + 4 * np.eye(4)).astype(np.float32)
B = _rng.randn(4).astype(np.float32)


def _close(a, b, tol=2e-4):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,A", [("cg", SPD), ("bicgstab", GEN)])
def test_solvers_match_jax(name, A):
    xs, js = getattr(xsl, name), getattr(jsl, name)
    # a matrix, then a function with a preconditioner and options
    _close(xs(A, B)[0], js(A, B)[0])
    diag = 1.0 / np.diag(A)
    kw = dict(tol=1e-6, atol=1e-7, maxiter=3, x0=np.ones(4, np.float32))
    got = xs(lambda v: jnp.dot(A, v), B, M=lambda v: diag * v, **kw)[0]
    want = js(lambda v: jjnp.dot(A, v), B, M=lambda v: diag * v, **kw)[0]
    _close(got, want)
    # a pytree right-hand side with an operator acting per leaf
    b = {"a": B[:2], "b": B[2:].reshape(1, 2)}
    A2 = A[:2, :2] + 0 * np.eye(2, dtype=np.float32)
    op = lambda t, m: {"a": m.dot(t["a"]), "b": 2.0 * t["b"]}
    _close(xs(lambda t: op(t, jnp.asarray(A2)), b)[0]["a"],
           js(lambda t: op(t, jjnp.asarray(A2)), b)[0]["a"])
    _close(xs(lambda t: op(t, jnp.asarray(A2)), b)[0]["b"], B[2:].reshape(1, 2) / 2)
    # gradients (implicit, through custom_linear_solve), w.r.t. b and A
    loss_x = lambda m, v: jnp.sum(xs(lambda u: jnp.dot(m, u), v)[0] ** 2)
    loss_j = lambda m, v: jjnp.sum(js(lambda u: jjnp.dot(m, u), v)[0] ** 2)
    gx = xform.grad(loss_x, argnums=(0, 1))(A, B)
    gj = jax.grad(loss_j, argnums=(0, 1))(A, B)
    _close(gx[0], gj[0], 2e-3)
    _close(gx[1], gj[1], 2e-3)


def test_gmres_and_errors():
    # gmres compiles slowly (in JAX too): one batched solve with a function, a
    # preconditioner and options, one incremental solve under jit with its gradient
    diag = 1.0 / np.diag(GEN)
    kw = dict(tol=1e-6, restart=3, maxiter=2, x0=np.ones(4, np.float32))
    x, info = xsl.gmres(lambda v: jnp.dot(GEN, v), B, M=lambda v: diag * v, **kw)
    _close(x, jsl.gmres(lambda v: jjnp.dot(GEN, v), B, M=lambda v: diag * v, **kw)[0])
    assert int(info) == 0
    inc = dict(solve_method="incremental", restart=2)
    f = xform.jit(xform.value_and_grad(
        lambda b: jnp.sum(xsl.gmres(GEN, b, **inc)[0] ** 2)))
    v, g = f(B)
    vj, gj = jax.value_and_grad(lambda b: jjnp.sum(jsl.gmres(GEN, b, **inc)[0] ** 2))(B)
    _close(v, vj)
    _close(g, gj, 2e-3)
    with pytest.raises(ValueError, match="invalid solve_method"):
        xsl.gmres(GEN, B, solve_method="lu")
    with pytest.raises(ValueError, match="matching shapes"):
        xsl.cg(SPD, B, x0=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="square matrix"):
        xsl.cg(np.ones((4, 3), np.float32), B)


def test_complex_solves_match_jax():
    # GMRES projected and rotated without conjugates (nan or a wrong x for complex A;
    # incremental: a complex norm broke its loop carry); cg's steps and tolerances use
    # JAX's real-part dot products (a non-Hermitian complex A gave another x)
    A = (GEN * (1 + 0.5j)).astype(np.complex64)
    b = (B + 0.3j).astype(np.complex64)
    for method in ("batched", "incremental"):
        got = xsl.gmres(A, b, solve_method=method, restart=2, maxiter=3)
        want = jsl.gmres(A, b, solve_method=method, restart=2, maxiter=3)
        _close(got[0], want[0], 1e-3)
        assert int(got[1]) == int(want[1]) == 0
    _close(xsl.cg(A, b, maxiter=3)[0], jsl.cg(A, b, maxiter=3)[0], 1e-3)


def test_typing_names():
    import jax.typing as jt
    import xform.typing as xt
    assert set(jt.__all__ if hasattr(jt, "__all__") else ["ArrayLike", "DTypeLike"]) >= {
        "ArrayLike", "DTypeLike"}
    for x in (jnp.ones(2), np.ones(2), np.float32(1), 1, 2.0, True):
        assert isinstance(x, xt.ArrayLike)
    assert not isinstance("a", xt.ArrayLike) and not isinstance([1], xt.ArrayLike)
    assert xform.jit(lambda x: jnp.float32(isinstance(x, xt.ArrayLike)))(1.0) == 1.0
    # as `jax.typing` after `import jax`, `xform.typing` is there after `import xform`
    import subprocess
    import sys
    code = "import jax, xform; print(hasattr(jax, 'typing'), hasattr(xform, 'typing'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "True"]


def test_docstring_examples():
    import doctest
    import importlib
    for name in ("xform.scipy.sparse.linalg", "xform.typing"):
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, name
