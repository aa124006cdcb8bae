"""custom_jvp/custom_vjp with symbolic_zeros=True, linear_call and the
``xform.custom_derivatives`` module vs real JAX: which tangents/cotangents the rules see as
SymbolicZero (or fwd as perturbed) under grad/jvp/jit/vmap, values, and errors."""
import jax
import jax.custom_derivatives as jcd
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.custom_derivatives as xcd
import xform.numpy as jnp


def close(a, b, tol=1e-5):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def make_jvp_f(lib, cd, np_, seen):
    @lib.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    def f_jvp(primals, tangents):
        (x, y), (xd, yd) = primals, tangents
        zx, zy = type(xd) is cd.SymbolicZero, type(yd) is cd.SymbolicZero
        seen.append((zx, zy))
        if zx and zy:
            return f(x, y), cd.SymbolicZero.from_primal_value(f(x, y))
        t = 0. if zx else np_.cos(x) * xd * y
        return f(x, y), t + (0. if zy else np_.sin(x) * yd)
    f.defjvp(f_jvp, symbolic_zeros=True)
    return f


def make_vjp_f(lib, cd, np_, seen):
    @lib.custom_vjp
    def f(x, y):
        return np_.sin(x) * y, x * y

    def fwd(x, y):
        seen.append(("fwd", type(x).__name__, x.perturbed, y.perturbed))
        x, y = cd.custom_vjp_primal_tree_values((x, y))
        return f(x, y), (x, y)

    def bwd(res, g):
        (x, y), (ga, gb) = res, g
        za, zb = type(ga) is cd.SymbolicZero, type(gb) is cd.SymbolicZero
        seen.append(("bwd", za, zb))
        gx = (0. if za else np_.cos(x) * y * ga) + (0. if zb else y * gb)
        return gx, (None if zb else x * gb)   # a None cotangent is a zero
    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return f


X, Y = np.float32(0.7), np.float32(2.0)
XS = np.linspace(0.1, 1.0, 3, dtype=np.float32)

JVP_CASES = [
    ("grad_x", lambda T, f: T.grad(f)(X, Y)),
    ("grad_y", lambda T, f: T.grad(f, 1)(X, Y)),
    ("jit_grad", lambda T, f: T.jit(T.grad(f))(X, Y)),
    ("jvp_y", lambda T, f: T.jvp(lambda y: f(X, y), (Y,), (1.,))),
    ("vmap_grad", lambda T, f: T.vmap(T.grad(f))(XS, XS)),
    ("grad_vmap", lambda T, f: T.grad(lambda x: T.vmap(f, (0, None))(x, Y).sum())(XS)),
    ("jit_grad_vmap", lambda T, f: T.jit(T.grad(lambda y, xs: T.vmap(f, (0, None))(xs, y)
                                               .sum()))(Y, XS)),
]


@pytest.mark.parametrize("name,run", JVP_CASES, ids=[c[0] for c in JVP_CASES])
def test_custom_jvp_symbolic_zeros_matches_jax(name, run):
    xs_seen, jx_seen = [], []
    close(run(xform, make_jvp_f(xform, xcd, jnp, xs_seen)),
          run(jax, make_jvp_f(jax, jcd, jjnp, jx_seen)))
    assert xs_seen == jx_seen


VJP_CASES = [
    ("grad_out0", lambda T, f: T.grad(lambda x, y: f(x, y)[0])(X, Y)),
    ("grad_out1_y", lambda T, f: T.grad(lambda x, y: f(x, y)[1], 1)(X, Y)),
    ("jit_grad", lambda T, f: T.jit(T.grad(lambda x, y: f(x, y)[0]))(X, Y)),
    ("vmap_grad", lambda T, f: T.vmap(T.grad(lambda x, y: f(x, y)[1]))(XS, XS)),
    ("grad_vmap", lambda T, f: T.grad(lambda x: T.vmap(f, (0, None))(x, Y)[0].sum())(XS)),
    ("jit_grad_vmap_y", lambda T, f: T.jit(T.grad(
        lambda y, xs: T.vmap(f, (0, None))(xs, y)[1].sum()))(Y, XS)),
    ("jit", lambda T, f: T.jit(f)(X, Y)),
]


@pytest.mark.parametrize("name,run", VJP_CASES, ids=[c[0] for c in VJP_CASES])
def test_custom_vjp_symbolic_zeros_matches_jax(name, run):
    xs_seen, jx_seen = [], []
    close(run(xform, make_vjp_f(xform, xcd, jnp, xs_seen)),
          run(jax, make_vjp_f(jax, jcd, jjnp, jx_seen)))
    assert xs_seen == jx_seen


def _message(lib, cd, np_, bwd, **kw):
    @lib.custom_vjp
    def g(x):
        return x * 2.
    try:
        g.defvjp(lambda x: (g(x.value), None), bwd, symbolic_zeros=True, **kw)
        lib.grad(g)(np_.float32(1.))
    except Exception as e:
        return type(e), str(e).split("\n--------")[0]
    return None


@pytest.mark.parametrize("bwd,kw", [
    (lambda cd: lambda r, c: (cd.SymbolicZero.from_primal_value(np.ones(2, np.float32)),), {}),
    (lambda cd: lambda r, c: (None,), {"optimize_remat": True}),
], ids=["bad_symbolic_zero", "optimize_remat"])
def test_errors_match_jax(bwd, kw):
    got = _message(xform, xcd, jnp, bwd(xcd), **kw)
    assert got is not None and got == _message(jax, jcd, jjnp, bwd(jcd), **kw)


def test_bwd_may_return_none_or_symbolic_zero():
    for lib, cd in ((xform, xcd), (jax, jcd)):
        @lib.custom_vjp
        def g(x, y):
            return x * y
        g.defvjp(lambda x, y: (g(x.value, y.value), None),
                 lambda r, c: (None, cd.SymbolicZero.from_primal_value(Y)), symbolic_zeros=True)
        close(lib.grad(g, (0, 1))(X, Y), (0., 0.))


def test_helpers():
    tree = {"a": [xcd.CustomVJPPrimal(1., True)], "b": xcd.CustomVJPPrimal(2., False)}
    assert xcd.custom_vjp_primal_tree_values(tree) == {"a": [1.], "b": 2.}
    with pytest.raises(TypeError, match="unexpected leaf type"):
        xcd.custom_vjp_primal_tree_values({"a": 1.})
    z = xcd.zero_from_primal({"a": jnp.ones((2, 3))}, symbolic_zeros=True)["a"]
    assert type(z) is xcd.SymbolicZero and z.shape == (2, 3) and z.dtype == np.float32
    zj = jcd.zero_from_primal((jjnp.ones(2), np.int32(1)))
    zx = xcd.zero_from_primal((jnp.ones(2), np.int32(1)))
    assert [np.asarray(a).dtype for a in zx] == [np.asarray(a).dtype for a in zj]
    close(zx[0], zj[0])


def test_module_exports_jax_names():
    # remat_opt_p: JAX's primitive for custom_vjp(optimize_remat=True), which xform ignores
    public = {n for n in dir(jcd) if not n.startswith("_")} - {"remat_opt_p"}
    assert public - set(dir(xcd)) == set()
    assert {"custom_vmap", "sequential_vmap"} <= set(dir(xform.custom_batching))


def make_linear(lib):
    lc = lib.custom_derivatives.linear_call

    def f(x, r):
        return x + lc(lambda r, x: x / r, lambda r, t: 7. * t / r, r, x)
    return f


def test_linear_call():
    fx, fj = make_linear(xform), make_linear(jax)
    close(fx(1., 2.), fj(1., 2.))
    close(xform.grad(fx)(1., 2.), jax.grad(fj)(1., 2.))
    close(xform.jit(xform.grad(fx))(1., 2.), jax.jit(jax.grad(fj))(1., 2.))
    tx = xform.linear_transpose(lambda x: fx(x, 2.), 1.)
    close(tx(3.), jax.linear_transpose(lambda x: fj(x, 2.), 1.)(3.))
    # NB: JAX has no batching rule for linear_call; xform's vs a Python loop
    close(xform.vmap(xform.grad(fx), (0, None))(XS, 2.),
          np.stack([jax.grad(fj)(x, 2.) for x in XS]))
    close(xform.grad(lambda x: xform.vmap(fx)(x, XS + 1.).sum())(XS),
          np.stack([jax.grad(fj)(x, r + 1.) for x, r in zip(XS, XS)]))
    with pytest.raises(TypeError, match="transpose output pytree structure must match"):
        xform.grad(lambda x: xcd.linear_call(lambda _, x: x, lambda _, t: (t, t), (), x))(1.)


def test_lazy_mode_matches_eager():
    f = make_vjp_f(xform, xcd, jnp, [])
    fl = make_linear(xform)

    def run():
        return (xform.grad(lambda x: f(x, Y)[0])(X), xform.vmap(xform.grad(
            lambda x, y: f(x, y)[1]))(XS, XS), xform.vmap(xform.grad(fl), (0, None))(XS, 2.))
    eager = run()
    with xform.lazy():
        lazy = run()
    close(lazy, eager)
