"""custom_vmap / sequential_vmap vs real JAX: the rule used under vmap (any in_axes, nested,
jit either side), its JVP, reverse mode, lazy mode, a Python loop, and error messages."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp


def close(a, b, tol=1e-5):
    a, b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(a) == len(b)
    for x, y in zip(map(np.asarray, a), map(np.asarray, b)):
        assert x.dtype == y.dtype and x.shape == y.shape, (x, y)
        if x.dtype != jax.dtypes.float0:
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def make_f(lib, np_, calls=None):
    """sin(x) * y, whose vmap rule (deliberately different: cos) records its in_batched."""
    @lib.custom_batching.custom_vmap
    def f(x, y):
        return np_.sin(x) * y

    @f.def_vmap
    def f_vmap(axis_size, in_batched, xs, ys):
        if calls is not None:
            calls.append((axis_size, in_batched))
        assert all(not b or v.shape[0] == axis_size for b, v in zip(in_batched, (xs, ys)))
        return np_.cos(xs) * ys, any(in_batched)
    return f


X = np.linspace(0.1, 1.2, 6, dtype=np.float32).reshape(2, 3)
Y = np.float32(1.5)

T0 = np.full(3, 0.5, np.float32)
CASES = [
    ("call", lambda T, f: lambda x: f(x, Y)),
    ("jit", lambda T, f: T.jit(lambda x: f(x, Y))),
    ("vmap", lambda T, f: lambda x: T.vmap(f, (1, None))(x, Y)),
    ("vmap_both", lambda T, f: lambda x: T.vmap(f)(x[0], x[1])),
    ("vmap_y", lambda T, f: lambda x: T.vmap(f, (None, 0))(x[0, 0], x[1])),
    ("nested", lambda T, f: lambda x: T.vmap(T.vmap(f, (0, None)), (1, None))(x, Y)),
    ("jit_vmap", lambda T, f: lambda x: T.jit(T.vmap(f, (0, None)))(x, Y)),
    ("vmap_jit", lambda T, f: lambda x: T.vmap(T.jit(f), (0, None))(x, Y)),
    ("jvp", lambda T, f: lambda x: T.jvp(lambda x: f(x, Y), (x,), (2. * x,))),
    ("vmap_jvp", lambda T, f: T.vmap(lambda x: T.jvp(lambda x: f(x, Y), (x,), (T0,)))),
    ("vmap_jvp_t", lambda T, f: lambda x: T.vmap(
        lambda t: T.jvp(lambda x: f(x, Y), (x[0, 0],), (t,)))(x[1])),
    ("jvp_vmap", lambda T, f: lambda x: T.jvp(T.vmap(f, (0, None)), (x, Y), (x, Y))),
    ("grad_vmap", lambda T, f: T.grad(lambda x: T.vmap(f, (0, None))(x, Y).sum())),
    ("jit_grad_vmap", lambda T, f: T.jit(T.grad(lambda x: T.vmap(f)(x, x).sum()))),
]


@pytest.mark.parametrize("name,transform", CASES, ids=[c[0] for c in CASES])
def test_custom_vmap_matches_jax(name, transform):
    xs_calls, jx_calls = [], []
    got = transform(xform, make_f(xform, jnp, xs_calls))(X)
    want = transform(jax, make_f(jax, jjnp, jx_calls))(jjnp.asarray(X))
    close(got, want)
    assert xs_calls == jx_calls


def test_grad_differentiates_the_function():
    """NB: JAX's grad of a custom_vmap function fails ("Linearization failed"); xform's
    differentiates the underlying function, and under vmap the rule's derivative."""
    f = make_f(xform, jnp)
    x = np.float32(0.7)
    close(xform.grad(f)(x, Y), jax.grad(lambda x, y: jjnp.sin(x) * y)(x, Y))
    close(xform.jit(xform.grad(f, 1))(x, Y), np.sin(x))
    # vmap outside grad: grad's linear program is plain ops (no rule); vs a Python loop
    g = xform.vmap(xform.grad(f), (0, None))(X[0], Y)
    close(g, np.stack([jax.grad(lambda x: jjnp.sin(x) * Y)(x) for x in X[0]]))


def test_custom_vjp_of_custom_vmap():
    """JAX's docstring example: custom_vjp outside, custom_vmap inside."""
    def make(lib, np_):
        @lib.custom_vjp
        @lib.custom_batching.custom_vmap
        def f(x, y):
            return np_.sin(x) * y

        @f.def_vmap
        def f_vmap_rule(axis_size, in_batched, xs, ys):
            return np_.cos(xs) * ys, True

        f.defvjp(lambda x, y: (f(x, y), (np_.cos(x), np_.sin(x), y)),
                 lambda res, g: (res[0] * g * res[2], res[1] * g))
        return f
    fx, fj = make(xform, jnp), make(jax, jjnp)
    close(xform.vmap(fx)(jnp.zeros(3), jnp.ones(3)), jax.vmap(fj)(jjnp.zeros(3), jjnp.ones(3)))
    close(xform.grad(fx)(0.3, 2.), jax.grad(fj)(0.3, 2.))
    close(xform.vmap(xform.grad(fx))(X[0], X[1]), jax.vmap(jax.grad(fj))(X[0], X[1]))


def test_pytree_arguments_and_outputs():
    def make(lib, np_, calls):
        @lib.custom_batching.custom_vmap
        def f(d, s):
            return {"p": d["a"] * s, "q": (d["b"] + 1.,)}

        @f.def_vmap
        def rule(axis_size, in_batched, d, s):
            calls.append(in_batched)
            return ({"p": d["a"] * s * 2., "q": (d["b"] - 1.,)},
                    {"p": in_batched[0]["a"] or in_batched[1], "q": (in_batched[0]["b"],)})
        return f
    xc, jc = [], []
    d = {"a": X[0], "b": X[1]}
    got = xform.vmap(make(xform, jnp, xc), ({"a": 0, "b": None}, None))(d, Y)
    want = jax.vmap(make(jax, jjnp, jc), ({"a": 0, "b": None}, None))(d, Y)
    close(got, want)
    assert xc == jc


def test_integer_argument_and_output():
    """float0 tangents: an int input has none (the rule's JVP sees it unbatched, inner-
    vmapped, as JAX's), an int output's is symbolically zero."""
    def make(lib, np_):
        @lib.custom_batching.custom_vmap
        def h(x, n):
            return np_.sin(x) * n, n + 1

        h.def_vmap(lambda s, b, x, n: ((np_.cos(x) * n, n + 1), (b[0] or b[1], b[1])))
        return h
    for T, np_ in ((xform, jnp), (jax, jjnp)):
        h = make(T, np_)
        runs = [T.vmap(lambda x, n: T.jvp(lambda x: h(x, n), (x,), (1.,)))(X[0], np_.arange(3)),
                T.vmap(lambda x: T.jvp(lambda x: h(x, 3), (x,), (1.,)))(X[0])]
        if T is xform:
            got = runs
        else:
            close(got, runs)


def test_lazy_mode_matches_eager():
    f = make_f(xform, jnp)
    eager = (f(X[0], Y), xform.vmap(f, (1, None))(X, Y), xform.grad(f)(X[0, 0], Y))
    with xform.lazy():
        lazy = (f(X[0], Y), xform.vmap(f, (1, None))(X, Y), xform.grad(f)(X[0, 0], Y))
    close(lazy, eager)


def test_sequential_vmap_is_a_loop():
    def make(lib, np_):
        @lib.custom_batching.sequential_vmap
        def f(x, w):
            return {"y": np_.dot(w["m"], x), "n": np_.sum(x)}
        return f
    fx, fj = make(xform, jnp), make(jax, jjnp)
    m = np.arange(6, dtype=np.float32).reshape(3, 2)
    xs = X.T  # batch on axis 1 of X
    got = xform.vmap(fx, (1, None))(X, {"m": m})
    loop = [fx(x, {"m": m}) for x in xs]
    close(got, {k: np.stack([o[k] for o in loop]) for k in got})
    close(got, jax.vmap(fj, (1, None))(X, {"m": m}))
    assert "scan" in str(xform.make_jaxpr(xform.vmap(fx, (1, None)))(X, {"m": m}))
    close(xform.jit(xform.vmap(fx, (1, None)))(X, {"m": m}), got)


def _error(lib, np_, rule_out, arg=1.):
    @lib.custom_batching.custom_vmap
    def g(x):
        return x * 2.

    @g.def_vmap
    def g_rule(axis_size, in_batched, xs):
        return rule_out(xs)
    with pytest.raises(Exception) as info:
        lib.vmap(g)(np_.ones(3) * arg)
    return type(info.value), str(info.value).split("\n--------")[0]


@pytest.mark.parametrize("rule_out", [
    lambda xs: ((xs, xs), True),            # values and batching spec differ
    lambda xs: ((xs, xs), (True, True)),    # rule output differs from the function's
], ids=["spec_tree", "out_tree"])
def test_rule_tree_errors_match_jax(rule_out):
    assert _error(xform, jnp, rule_out) == _error(jax, jjnp, rule_out)


def test_misuse_errors():
    with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap "
                       "function <lambda> using def_vmap"):
        xform.custom_batching.custom_vmap(lambda x: x)(1.)
    # xform checks shapes too (JAX would return a wrongly shaped value)
    typ, msg = _error(xform, jnp, lambda xs: (xs[0], True))
    assert typ is ValueError and "g_rule" in msg and "(3,) was expected" in msg

    def closes_over(v):
        @xform.custom_batching.custom_vmap
        def h(y):
            return v * y
        h.def_vmap(lambda n, b, ys: (ys, True))
        return h(1.)
    with pytest.raises(ValueError, match="closes over a value batched by this vmap"):
        xform.vmap(closes_over)(jnp.ones(3))


@pytest.mark.parametrize("name", ["xform.custom_batching", "xform.transforms.custom_batching",
                                  "xform.transforms.custom_linear"])
def test_docstring_examples_run(name):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
