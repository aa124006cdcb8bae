"""lax.scan, fori_loop, map, bounded while and associative_scan against jax: values
(eager and jit, dtypes and weak types), gradients vs jax and finite differences, second
order, every ordering of jit/vmap/grad, an RK4 ODE solve differentiated w.r.t. its
parameters, residual storage (grad does not re-run the forward body), errors."""
import itertools

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from jax import lax as jlax

import xform
import xform.numpy as xjnp
from xform import lax as xlax
from xform.test_util import arrays, check_grads

LIBS = {"xform": (xform, xlax, xjnp), "jax": (jax, jlax, jjnp)}


def assert_same(actual, expected, tol=2e-5, what=""):
    """Same pytree structure, shapes, dtypes, weak types, and close values."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree, f"{what}: tree {a_tree} but jax gives {e_tree}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        got = (np.shape(a), np.asarray(a).dtype, bool(getattr(a, "weak_type", False)))
        want = (np.shape(e), np.asarray(e).dtype, bool(getattr(e, "weak_type", False)))
        assert got == want, f"{what} leaf {i}: (shape, dtype, weak) {got} but jax {want}"
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=tol, atol=tol,
                                   err_msg=f"{what} leaf {i}")


def both(make, *args, transform=lambda api, f: f, tol=2e-5):
    """Run ``transform(api, make(api, lax, jnp))(*args)`` in xform and in jax; compare."""
    outs = {name: transform(api, make(api, L, N))(*args)
            for name, (api, L, N) in LIBS.items()}
    assert_same(outs["xform"], outs["jax"], tol)
    return outs["xform"]


rng = np.random.default_rng(0)
X = rng.standard_normal((5, 3)).astype(np.float32)
W = (0.5 * rng.standard_normal((3, 3))).astype(np.float32)


def rnn(api, L, N):
    """A small RNN: tanh(W h + x), emitting h . x; loss-like scalar output."""
    def f(w, xs, h0):
        def step(h, x):
            h = N.tanh(w @ h + x)
            return h, N.sum(h * x)
        h, ys = L.scan(step, h0, xs)
        return N.sum(h) + N.sum(ys * ys)
    return f


# ---- values ----

@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("jit", [False, True])
def test_scan_values_pytrees(reverse, jit):
    def make(api, L, N):
        def f(xs):
            def step(c, x):
                a, (b, n) = c["a"], c["bn"]
                a = a * 0.5 + N.sin(x["u"])
                return {"a": a, "bn": (b + x["v"], n + 1)}, (a.sum(), {"w": b * 2})
            init = {"a": N.zeros(3, np.float32), "bn": (1.0, 0)}
            return L.scan(step, init, xs, reverse=reverse)
        return f
    xs = {"u": X, "v": X[:, 0]}
    both(make, xs, transform=lambda api, f: api.jit(f) if jit else f)


def test_scan_xs_none_length_and_weak_carry():
    def make(api, L, N):
        # a weak Python-float carry that the body keeps weak, and one it promotes
        return lambda: L.scan(lambda c, _: ((c[0] * 2.0, c[1] + N.float32(1)), c[0]),
                              (1.0, 0.0), None, length=4)
    out = both(make)
    assert np.asarray(out[1]).tolist() == [1.0, 2.0, 4.0, 8.0]
    # a Python-int init summing floats (or int8s) takes the body's dtype, as in JAX
    for x in (X[:, 0], X[:, 0].astype(np.int8)):
        both(lambda api, L, N: lambda xs: L.scan(lambda c, x: (c + x, c), 0, xs), x)
    both(lambda api, L, N: lambda: L.fori_loop(0, 3, lambda i, c: c + 1.5, 0))


def test_scan_zero_length_and_consts():
    def make(api, L, N):
        w = N.asarray(W)
        return lambda xs: L.scan(lambda c, x: (w @ c + x, c), N.ones(3, np.float32), xs)
    both(make, X[:0])
    both(make, X)


def test_scan_unroll_accepted():
    def make(api, L, N):
        return lambda xs: L.scan(lambda c, x: (c + x, c * x), 0., xs, unroll=3)
    both(make, X[:, 0])
    both(make, X[:, 0], transform=lambda api, f: lambda xs: api.lax.scan(
        lambda c, x: (c + x, c), 0., xs, unroll=True))
    both(make, X[:, 0], transform=lambda api, f: api.grad(lambda xs: api.lax.scan(
        lambda c, x: (c * x, c), 1., xs, _split_transpose=True)[1].sum()))


def test_scan_jaxpr_prints_like_jax():
    text = str(xform.make_jaxpr(lambda xs: xlax.scan(lambda c, x: (c + x, c * x), 0., xs))(
        X[:, 0]))
    assert "scan[" in text and "length=5" in text and "num_carry=1" in text
    assert "jaxpr={ lambda ; " in text and "reverse=False" in text
    assert "linear=(False, False)" in text and "num_consts=0" in text


# ---- differentiation ----

def test_scan_grad_vs_jax():
    h0 = np.full(3, 0.1, np.float32)
    both(rnn, W, X, h0, transform=lambda api, f: api.grad(f, argnums=(0, 1, 2)), tol=1e-4)


def test_scan_reverse_and_nested_grad_vs_jax():
    def make(api, L, N):
        def f(w, xs):
            def outer(c, x):
                inner_c, ys = L.scan(lambda d, y: (N.sin(d * y + w), d), c, x, reverse=True)
                return inner_c, ys.sum()
            c, ys = L.scan(outer, 0.3, xs.reshape(5, 3, 1)[..., 0])
            return c + ys.sum()
        return f
    both(make, np.float32(0.7), X, transform=lambda api, f: api.grad(f, (0, 1)), tol=1e-4)


def test_scan_hessian_vs_jax():
    def make(api, L, N):
        def f(x):
            c, ys = L.scan(lambda c, x: (N.sin(c) * x + c * c * 0.1, c * x), 0.5, x)
            return c + N.sum(ys ** 2)
        return f
    both(make, X[:, 0], transform=lambda api, f: api.jit(api.hessian(f)), tol=1e-4)
    both(make, X[:, 0], transform=lambda api, f: api.jit(api.grad(
        lambda x: api.grad(f)(x).sum())), tol=1e-4)


@given(arrays((4, 2), np.float64), arrays((2,), np.float64))
def test_scan_check_grads(x64, xs, c0):
    def f(xs, c0):
        def step(c, x):
            c = xjnp.sin(c) * x + 0.3 * c[::-1]
            return c, c * x
        return xlax.scan(step, c0, xs, reverse=True)
    check_grads(f, (xs, c0), order=2, modes=("fwd", "rev"))


class _x64:
    def __enter__(self):
        self.old = xform.config.jax_enable_x64
        xform.config.update("jax_enable_x64", True)

    def __exit__(self, *exc):
        xform.config.update("jax_enable_x64", self.old)


@pytest.mark.parametrize("order", list(itertools.permutations(["jit", "vmap", "grad"])),
                         ids="-".join)
def test_every_ordering_of_jit_vmap_grad(order):
    h0 = np.full(3, 0.1, np.float32)
    xs_b = np.stack([X, 0.5 * X, -X])   # batch of 3 sequences

    def transform(api, f):
        g = lambda w, xs: f(w, xs, h0)  # noqa: E731
        for t in order:
            if t == "jit":
                g = api.jit(g)
            elif t == "vmap":
                g = api.vmap(g, in_axes=(None, 0))
            else:
                g = api.grad(lambda w, xs, g=g: api.numpy.sum(g(w, xs)))
        return g
    both(rnn, W, xs_b, transform=transform, tol=1e-4)


def test_vmap_batched_xs_at_other_axis_and_unbatched_init():
    def make(api, L, N):
        def f(xs, c):
            return L.scan(lambda c, x: (c * 0.9 + x, c + x), c, xs)
        return api.vmap(f, in_axes=(1, None), out_axes=(0, 1))
    both(make, X, np.float32(1.0))


def test_grad_stores_residuals_instead_of_recomputing():
    f = rnn(xform, xlax, xjnp)
    h0 = np.full(3, 0.1, np.float32)
    jaxpr = xform.make_jaxpr(xform.grad(f))(W, X, h0).jaxpr
    scans = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    assert len(scans) == 2, jaxpr   # the forward scan and the backward (transposed) scan
    fwd, bwd = scans
    assert not fwd.params["reverse"] and bwd.params["reverse"]
    # The backward body does no tanh: it uses stored residuals (stacked ys of the
    # forward scan), and the closed-over weights are a const, not stacked per step.
    names = {e.primitive.name for e in bwd.params["jaxpr"].eqns}
    assert "tanh" not in names and "dot_general" in names, names
    n_stacked = len(fwd.outvars) - 1 - 1   # minus the final carry and the ys
    assert n_stacked >= 1
    assert all(v.aval.shape[0] == 5 for v in fwd.outvars[1:])
    assert bwd.params["num_consts"] >= 1 and any(
        v.aval.shape == (3, 3) for v in bwd.invars[:bwd.params["num_consts"]])


def test_grad_hoists_loop_invariant_residuals():
    def f(w, xs):   # tanh(w) is the same every iteration: computed once, not stacked
        return xlax.scan(lambda h, x: (xjnp.tanh(w) @ xjnp.sin(h) + x, None),
                         np.zeros(3, np.float32), xs)[0].sum()
    jaxpr = xform.make_jaxpr(xform.grad(f))(W, X).jaxpr
    fwd, bwd = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    assert not any(v.aval.shape == (5, 3, 3) for v in fwd.outvars), fwd.outvars
    assert "tanh" not in {e.primitive.name for e in fwd.params["jaxpr"].eqns}
    consts = bwd.invars[:bwd.params["num_consts"]]
    assert any(v.aval.shape == (3, 3) for v in consts), consts
    assert_same(xform.grad(f)(W, X), jax.grad(lambda w, xs: jlax.scan(
        lambda h, x: (jjnp.tanh(w) @ jjnp.sin(h) + x, None), jjnp.zeros(3), xs)[0].sum())(W, X))


# ---- an ODE solve: 200 RK4 steps, differentiated w.r.t. the ODE parameters ----

def rk4_solve(api, L, N):
    def f(theta, y0):
        def rhs(y):   # damped, driven oscillator with parameters theta
            return N.stack([y[1], -theta[0] * y[0] - theta[1] * y[1] + theta[2] * N.sin(y[0])])

        def step(y, _):
            dt = 0.01
            k1 = rhs(y)
            k2 = rhs(y + dt / 2 * k1)
            k3 = rhs(y + dt / 2 * k2)
            k4 = rhs(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            return y, y[0]
        y, traj = L.scan(step, y0, None, length=200)
        return N.sum(y ** 2) + N.mean(traj ** 2)
    return f


def test_rk4_ode_solve_values_and_parameter_grads():
    theta = np.array([2.0, 0.3, 0.5], np.float32)
    y0 = np.array([1.0, 0.0], np.float32)
    both(rk4_solve, theta, y0, transform=lambda api, f: api.jit(f), tol=1e-4)
    both(rk4_solve, theta, y0, transform=lambda api, f: api.jit(api.grad(f, (0, 1))),
         tol=1e-4)


# ---- fori_loop, map, bounded while ----

def test_fori_loop_static_bounds_is_reverse_differentiable():
    def make(api, L, N):
        return lambda x: L.fori_loop(0, 5, lambda i, v: v * x + i, 1.0)
    both(make, np.float32(0.9))
    both(make, np.float32(0.9), transform=lambda api, f: api.grad(f))
    both(make, np.float32(0.9), transform=lambda api, f: api.jit(api.grad(f)))
    # the carry's cotangent stays weak through the backward loop: grad at 1.0 is weak
    both(lambda api, L, N: lambda x: L.fori_loop(0, 5, lambda i, v: N.sin(v) * i, x), 1.0,
         transform=lambda api, f: api.grad(f))


def test_fori_loop_dynamic_bounds_uses_while():
    def make(api, L, N):
        return lambda n, x: L.fori_loop(0, n, lambda i, v: v * x + i, 1.0)
    both(make, 5, np.float32(0.9), transform=lambda api, f: api.jit(f))
    # a Python-int bound keeps its weak type in the while carry, so an int sum is weak
    both(lambda api, L, N: lambda n: L.fori_loop(0, n, lambda i, v: v + i, 0), 5,
         transform=lambda api, f: api.jit(f))
    both(lambda api, L, N: lambda n: L.fori_loop(0, n, lambda i, v: v + i, 0),
         np.int32([0, 1, 3, -2]), transform=lambda api, f: api.vmap(f))
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        xform.jit(xform.grad(make(xform, xlax, xjnp), argnums=1))(5, np.float32(0.9))


def test_map_and_batch_size():
    def make(api, L, N):
        return lambda xs: L.map(lambda x: {"s": N.sin(x["a"]).sum(), "p": x["a"] * 2}, xs)
    both(make, {"a": X})
    for bs in (0, 2, 5, 7):
        def make_b(api, L, N, bs=bs):
            return lambda xs: L.map(lambda x: N.sin(x) * 2, xs, batch_size=bs)
        both(make_b, X)


def test_bounded_while_matches_while_and_differentiates():
    cond = lambda c: c[0] < 10  # noqa: E731
    body = lambda c: (c[0] + 1, c[1] * 1.1 + 0.5)  # noqa: E731
    init = (0, np.float32(0.5))
    want = xlax.while_loop(cond, body, init)
    got = xlax.while_loop(cond, body, init, max_steps=20)
    assert_same(got, want)
    got_short = xlax.while_loop(cond, body, init, max_steps=4)
    assert int(got_short[0]) == 4
    # reverse mode through the bounded loop vs finite differences (float64)
    with _x64():
        def f(x):
            return xlax.while_loop(lambda c: c[1] < 5.0,
                                   lambda c: (c[0] * x + 0.1, c[1] + c[0]),
                                   (x, 0.0), max_steps=30)[0]
        check_grads(f, (np.float64(1.3),), order=2, modes=("fwd", "rev"))
        np.testing.assert_allclose(float(xform.grad(f)(1.3)),
                                   (float(f(1.3 + 1e-6)) - float(f(1.3 - 1e-6))) / 2e-6,
                                   rtol=1e-5)


# ---- associative_scan ----

@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [1, 6, 7])
def test_associative_scan_vs_jax_and_numpy(reverse, n):
    x = rng.standard_normal((2, n)).astype(np.float32)
    jit = lambda api, f: api.jit(f)  # noqa: E731  (one compile instead of one per op)
    cs = both(lambda api, L, N: lambda x: L.associative_scan(L.add, x, reverse, axis=1), x,
              transform=jit)
    flip = (lambda a: a[:, ::-1]) if reverse else (lambda a: a)
    np.testing.assert_allclose(cs, flip(np.cumsum(flip(x), axis=1)), rtol=1e-5, atol=1e-5)
    xi = rng.integers(-9, 9, (n, 2)).astype(np.int32)
    cm = both(lambda api, L, N: lambda x: L.associative_scan(L.max, x, reverse), xi,
              transform=jit)
    flip0 = (lambda a: a[::-1]) if reverse else (lambda a: a)
    np.testing.assert_array_equal(cm, flip0(np.maximum.accumulate(flip0(xi), axis=0)))

    def affine(f, g):   # compose x -> g(f(x)): not commutative
        return {"a": f["a"] * g["a"], "b": g["a"] * f["b"] + g["b"]}
    ab = {"a": rng.standard_normal(n).astype(np.float32),
          "b": rng.standard_normal(n).astype(np.float32)}
    both(lambda api, L, N: lambda t: L.associative_scan(affine, t, reverse), ab, tol=1e-4,
         transform=jit)


def test_associative_scan_grad_and_vmap():
    def make(api, L, N):
        return lambda x: L.associative_scan(L.mul, x).sum()
    x = np.linspace(0.5, 1.5, 7).astype(np.float32)
    both(make, x, transform=lambda api, f: api.jit(api.grad(f)))
    both(make, np.stack([x, x * 0.9]), transform=lambda api, f: api.jit(api.vmap(f)))


# ---- errors ----

def test_errors_by_message():
    with pytest.raises(ValueError, match=r"different leading axis sizes: 5, 4"):
        xlax.scan(lambda c, x: (c, x), 0., (X, X[:4]))
    with pytest.raises(ValueError, match=r"`length` argument of 3 which disagrees"):
        xlax.scan(lambda c, x: (c, x), 0., X, length=3)
    with pytest.raises(ValueError, match="no values to scan over and `length` not provided"):
        xlax.scan(lambda c, x: (c, x), 0.)
    with pytest.raises(TypeError, match=r"input carry component carry\[1\] has type f32\[\] "
                       r"but the corresponding output carry component has type f32\[3\]"):
        xlax.scan(lambda carry, x: ((carry[0], x), x), (0, np.float32(0)), X)
    with pytest.raises(TypeError, match="same pytree structure"):
        xlax.scan(lambda c, x: ((c, c), x), 0., X)
    with pytest.raises(TypeError, match="must be a pair"):
        xlax.scan(lambda c, x: c, 0., X)
    with pytest.raises(ValueError, match="no leading axis"):
        xlax.scan(lambda c, x: (c, x), 0., np.float32(1))
    with pytest.raises(xform.errors.ConcretizationTypeError, match="concrete `int`"):
        xform.jit(lambda n: xlax.scan(lambda c, x: (c, x), 0., None, length=n))(3)
    with pytest.raises(TypeError, match="must have equal types"):
        xlax.fori_loop(np.int32(0), np.int16(3), lambda i, v: v, 0.)
    with pytest.raises(TypeError, match="boolean scalar"):
        xlax.while_loop(lambda v: v, lambda v: v, 1., max_steps=3)
    with pytest.raises(ValueError, match="same size along axis 0"):
        xlax.associative_scan(xlax.add, (X, X[:2]))


def test_docstring_examples_run():
    import doctest
    import importlib
    for name in ("xform.lax.control_flow.scan", "xform.lax.control_flow.scan_loops",
                 "xform.lax.control_flow.associative_scan"):
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, name
