"""lax.cond, lax.switch and lax.while_loop against jax: values (eager and jit, dtypes
and weak types), gradients through cond (closures, pytrees, integer operands, second
order, check_grads), every ordering of jit/vmap/grad over cond and jit/vmap/jvp over
while, batched predicates vs a Python loop, jacfwd through while, the reverse-mode
error, error messages for bad inputs, and the printed jaxpr structure."""
import itertools

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given, strategies as st
from jax import lax as jlax

import xform
import xform.numpy as xjnp
from xform import lax as xlax
from xform.test_util import check_grads

F32 = np.dtype(np.float32)
FLOAT0 = np.dtype([("float0", np.void, 0)])
LIBS = {"xform": (xform, xjnp, xlax), "jax": (jax, jjnp, jlax)}


def assert_tree_close(actual, expected, what="", tol=2e-5, weak=True):
    """Same structure, dtypes, weak types (of arrays) and values as jax's result."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree, f"{what}: tree {a_tree} but jax gives {e_tree}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if weak and hasattr(e, "weak_type"):
            assert a.weak_type == e.weak_type, f"{what} leaf {i}: weak_type {a.weak_type}"
        a, e = np.asarray(a), np.asarray(e)
        assert (a.dtype, a.shape) == (e.dtype, e.shape), (
            f"{what} leaf {i}: {a.dtype}{a.shape} but jax gives {e.dtype}{e.shape}")
        if a.dtype != FLOAT0:
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol, err_msg=f"{what} leaf {i}")


def pair(make, jit=False):
    """``make(lib, jnp, lax)`` (returning a function) built in xform and in jax."""
    fs = [make(*LIBS[name]) for name in ("xform", "jax")]
    return [LIBS[name][0].jit(f) if jit else f for name, f in zip(("xform", "jax"), fs)]


def both(make, *args, jit=False):
    """Run ``make(lib, jnp, lax)`` on ``args`` in both libraries."""
    return [f(*args) for f in pair(make, jit)]


def check_pair(fs, args, what, **kw):
    ours, theirs = fs
    assert_tree_close(ours(*args), theirs(*args), what, **kw)


# ---- values ----

def _pytree_cond(lib, jnp, lax):
    def f(pred, x, n):
        y = x["a"] * 2.0   # closed over by both branches

        def true_fun(ops, k):
            return {"s": jnp.sin(ops["a"]) + y, "n": k + 1}, ops["b"][0] * 3.0

        def false_fun(ops, k):
            return {"s": jnp.cos(ops["a"]) * y, "n": k * 2}, ops["b"][0] - ops["b"][1]
        return lax.cond(pred, true_fun, false_fun, x, n)
    return f


@pytest.mark.parametrize("pred", [True, False, 0, 3, 0.0, -2.5, np.bool_(True)],
                         ids=repr)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_cond_values_pytrees(pred, jit):
    x = {"a": np.float32([0.5, -1.0]), "b": (np.float32(2.0), np.float32(7.0))}
    got, want = both(_pytree_cond, pred, x, np.int32(4), jit=jit)
    assert_tree_close(got, want, f"cond pred={pred!r}")


def test_cond_weak_types_and_operand_keyword():
    def make(lib, jnp, lax):
        return lambda p, x: (lax.cond(p, lambda v: v + 1.0, lambda v: v * 2.0, operand=x),
                             lax.cond(p, lambda: 1.0, lambda: 2.0),
                             lax.cond(p, lambda v: v, lambda v: -v, 3))
    fs = pair(make)
    for p in (True, False):
        check_pair(fs, (p, 1.5), f"weak types pred={p}")


def test_cond_mixed_weak_branches_give_strong_output():
    # NB: JAX takes the false branch's weak type; xform is weak only if all branches are.
    for p in (True, False):
        for t, f in ((lambda: 1.0, lambda: np.float32(2)), (lambda: np.float32(2), lambda: 1.0)):
            out = xlax.cond(p, t, f)
            assert out.dtype == F32 and not out.weak_type


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_switch_values_clamped(jit):
    def make(lib, jnp, lax):
        return lambda i, x: lax.switch(i, [lambda v: v + 1.0, lambda v: v * v, jnp.sin], x)
    fs = pair(make, jit)
    for i in (-3, 0, 1, 2, 7):
        check_pair(fs, (np.int32(i), np.float32([1.5, 2.0])), f"switch index {i}")


def test_switch_single_branch_and_uint_index():
    def make(lib, jnp, lax):
        return lambda i, x: (lax.switch(i, [lambda v: v * 3.0], x),
                             lax.switch(i, [jnp.sin, jnp.cos], x))
    got, want = both(make, np.uint8(1), np.float32(0.3))
    assert_tree_close(got, want, "switch")


# ---- gradients ----

def test_grad_cond_closures_pytrees_int_operands():
    def make(lib, jnp, lax):
        def loss(x, w, pred):
            def true_fun(ops, n):
                return {"y": jnp.sin(ops["x"]) * w + n, "i": n + 1}

            def false_fun(ops, n):
                return {"y": ops["x"] * ops["x"] * w[0], "i": n}
            out = lax.cond(pred, true_fun, false_fun, {"x": x}, 3)
            return jnp.sum(out["y"]) * out["i"].astype(np.float32)
        return lib.grad(loss, argnums=(0, 1))
    x, w = np.float32([0.3, -1.2]), np.float32([2.0, 0.5])
    fs = pair(make)
    for pred in (True, False):
        check_pair(fs, (x, w, pred), f"grad pred={pred}")


def test_grad_switch_and_second_order():
    def make(lib, jnp, lax):
        def f(x, i):
            return lax.switch(i, [lambda v: jnp.sin(v) * v, lambda v: v ** 3, jnp.exp], x)
        return lib.jit(lambda x, i: (lib.grad(f)(x, i), lib.grad(lib.grad(f))(x, i),
                             lib.hessian(lambda v: lax.cond(v[0] > 0, lambda u: jnp.sum(
                                 jnp.sin(u) * u[::-1]), lambda u: jnp.sum(u ** 3), v))(
                                 jnp.stack([x, x * 2]))))
    fs = pair(make)
    for i in range(3):
        for x in (0.7, -0.4):
            check_pair(fs, (np.float32(x), i), f"branch {i} x={x}", tol=1e-4)


def test_grad_cond_with_integer_output_and_linearize():
    def make(lib, jnp, lax):
        def f(x):
            y, k = lax.cond(x > 1.0, lambda v: (v * v, 1), lambda v: (jnp.sin(v), 2), x)
            return y * k
        return lambda x: (lib.grad(f)(x), lib.linearize(f, x)[1](np.float32(2.0)))
    fs = pair(make)
    for x in (0.5, 3.0):
        check_pair(fs, (np.float32(x),), f"x={x}")


def test_grad_cond_of_python_float_is_weak():
    # the transposed branches take the cotangents' avals: a weak seed stays weak
    def make(lib, jnp, lax):
        return lambda x: (lib.grad(lambda v: lax.cond(v > 0, jnp.sin, lambda u: u ** 3, v))(x),
                          lib.grad(lambda v: lax.switch(1, [jnp.sin, jnp.cos], v))(x),
                          lib.grad(lambda v: lax.cond(True, lambda u: (u * 2, 1),
                                                      lambda u: (u, 2), v)[0])(x))
    fs = pair(make)
    for x in (0.5, -0.5):
        check_pair(fs, (x,), f"x={x}")


def _cond_fn(pred):
    def f(x, w):
        return xlax.cond(pred, lambda a, b: xjnp.sin(a) * b + a ** 2,
                         lambda a, b: xjnp.tanh(a * b) * a, x, w)
    return xform.jit(f)   # compiled once: finite differences and examples reuse it


_COND_FNS = {p: _cond_fn(p) for p in (True, False)}


@given(st.floats(-2, 2), st.floats(-2, 2), st.booleans())
def test_check_grads_cond(x64, x0, x1, pred):
    check_grads(_COND_FNS[pred], (np.float64([x0, x1]), np.float64([0.5, -1.5])), order=2,
                modes=("fwd", "rev"))


# ---- transformation orderings ----

def _orderings(kinds):
    return list(itertools.permutations(kinds))


def _compose(lib, jnp, order, f):
    wrap = {"jit": lib.jit, "vmap": lib.vmap,
            "grad": lambda h: lib.grad(lambda x: jnp.sum(h(x))),
            "jvp": lambda h: lambda x: lib.jvp(h, (x,), (jnp.ones_like(x) * 0.5,))[1]}
    for kind in reversed(order):
        f = wrap[kind](f)
    return f


@pytest.mark.parametrize("pred_kind", ["batched", "unbatched"])
@pytest.mark.parametrize("order", _orderings(("jit", "vmap", "grad")), ids="-".join)
def test_cond_every_ordering(order, pred_kind):
    def make(lib, jnp, lax):
        def f(x):
            pred = x > 0.2 if pred_kind == "batched" else True
            return lax.cond(pred, lambda v: jnp.sin(v) * v, lambda v: jnp.cos(v) + v * v, x)
        return _compose(lib, jnp, order, f)
    got, want = both(make, np.float32([-1.0, 0.1, 0.5, 2.0]))
    assert_tree_close(got, want, "-".join(order))


def _loop(lax, jnp, x, batched_pred):
    """A while loop whose trip count depends on x (batched) or not (unbatched)."""
    if batched_pred:
        return lax.while_loop(lambda c: c[1] < x * 3.0,
                              lambda c: (c[0] * jnp.sin(x) + x, c[1] + 1.0), (x, 0.0))[0]
    return lax.while_loop(lambda c: c[1] < 4,
                          lambda c: (c[0] * jnp.cos(c[0]) + x, c[1] + 1), (x, 0))[0]


@pytest.mark.parametrize("pred_kind", ["batched", "unbatched"])
@pytest.mark.parametrize("order", _orderings(("jit", "vmap", "jvp")), ids="-".join)
def test_while_every_ordering(order, pred_kind):
    def make(lib, jnp, lax):
        return _compose(lib, jnp, order, lambda x: _loop(lax, jnp, x, pred_kind == "batched"))
    got, want = both(make, np.float32([0.4, 1.0, 1.7]))
    assert_tree_close(got, want, "-".join(order), tol=1e-4)


# ---- batching vs a Python loop ----

def test_vmap_cond_batched_pred_and_switch_index_vs_loop():
    def f(p, x, y):
        return xlax.cond(p, lambda a, b: (a * b, a + 1.0), lambda a, b: (a - b, b * 2.0), x, y)

    def g(i, x):
        return xlax.switch(i, [lambda v: v + 1.0, xjnp.sin, lambda v: v * v], x)
    f_loop, g_loop = xform.jit(f), xform.jit(g)   # the per-lane reference, compiled once
    ps = np.array([True, False, True, False])
    xs = np.float32([[1., 2.], [3., 4.], [5., 6.], [7., 8.]])
    y = np.float32([0.5, -0.5])
    out = xform.vmap(f, in_axes=(0, 0, None))(ps, xs, y)
    for k in range(4):
        assert_tree_close(tuple(o[k] for o in out), f_loop(ps[k], xs[k], y), f"lane {k}")
    idx = np.int32([-1, 0, 1, 2, 5])
    xs = np.float32([0.1, 0.2, 0.3, 0.4, 0.5])
    out = xform.vmap(g)(idx, xs)
    np.testing.assert_allclose(np.asarray(out), [float(g_loop(i, x)) for i, x in zip(idx, xs)],
                               rtol=1e-6)
    # operands batched along axis 1, outputs along axis 1
    xs = np.float32([[1., 2.], [3., 4.], [5., 6.], [7., 8.]])
    out = xform.vmap(f, in_axes=(0, 1, None), out_axes=1)(ps, xs.T, y)
    for k in range(4):
        assert_tree_close(tuple(o[:, k] for o in out), f_loop(ps[k], xs[k], y), f"lane {k}")


def _newton_sqrt(lax, jnp, a):
    """sqrt(a) by Newton's method; also returns the iteration count."""
    def cond(c):
        x, _ = c
        return jnp.abs(x * x - a) > 1e-5 * a

    def body(c):
        x, n = c
        return 0.5 * (x + a / x), n + 1
    return lax.while_loop(cond, body, (a, 0))


def test_newton_sqrt_vmap_per_lane_iteration_counts():
    a = np.float32([1.0, 2.0, 16.0, 1e4, 0.25])
    roots, counts = xform.vmap(lambda v: _newton_sqrt(xlax, xjnp, v))(a)
    np.testing.assert_allclose(np.asarray(roots), np.sqrt(a), rtol=1e-5)
    one = xform.jit(lambda v: _newton_sqrt(xlax, xjnp, v))
    loop = [one(np.float32(v)) for v in a]
    np.testing.assert_array_equal(np.asarray(counts), [int(n) for _, n in loop])
    assert len(set(np.asarray(counts).tolist())) > 2   # lanes really differ
    jroots, jcounts = jax.vmap(lambda v: _newton_sqrt(jlax, jjnp, v))(a)
    assert_tree_close((roots, counts), (jroots, jcounts), "newton vs jax", tol=1e-5)


def test_vmap_while_unbatched_pred_batched_carry_and_consts():
    def f(x, w):
        return xlax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * w + x),
                               (0, x))
    xs, w = np.float32([1.0, 2.0, 3.0]), np.float32(0.5)
    out = xform.vmap(f, in_axes=(0, None))(xs, w)
    for k in range(3):
        assert_tree_close(tuple(o[k] for o in out), xform.jit(f)(xs[k], w), f"lane {k}")


# ---- while: values, jacfwd, reverse-mode error ----

@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_while_values_and_weak_promotion(jit):
    def make(lib, jnp, lax):
        def f(x):
            n = lax.while_loop(lambda i: i < 10, lambda i: i * 2, 1)
            s = lax.while_loop(lambda c: c < 3.0, lambda c: c + x, 0)   # weak int -> f32
            tree = lax.while_loop(lambda c: c["k"] < 3,
                                  lambda c: {"k": c["k"] + 1, "v": c["v"] * x}, {"k": 0, "v": x})
            return n, s, tree
        return f
    got, want = both(make, np.float32(1.25), jit=jit)
    assert_tree_close(got, want, "while values")


def test_jacfwd_jvp_and_linearize_through_while():
    def make(lib, jnp, lax):
        def f(x):
            return lax.while_loop(lambda c: c[1] < 3,
                                  lambda c: (jnp.sin(c[0]) * x + c[0], c[1] + 1),
                                  (x * x, 0))[0]
        return lambda x: (lib.jacfwd(f)(x), lib.jvp(f, (x,), (jnp.ones_like(x),)),
                          lib.linearize(f, x)[1](x * 2.0))
    got, want = both(make, np.float32([0.3, -0.7, 1.1]))
    assert_tree_close(got, want, "jacfwd", tol=1e-4)


def test_reverse_mode_through_while_raises_jax_error():
    def f(x):
        return xlax.while_loop(lambda c: c < 10.0, lambda c: c * x, 1.0)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for "
                       "lax.while_loop or lax.fori_loop with dynamic start/stop values. "
                       "Try using lax.scan"):
        xform.grad(f)(np.float32(2.0))
    # a loop whose carry doesn't depend on x is fine in reverse mode
    g = lambda x: x * xlax.while_loop(lambda i: i < 3, lambda i: i + 1, 0)  # noqa: E731
    assert float(xform.grad(g)(np.float32(2.0))) == 3.0


# ---- errors ----

@pytest.mark.parametrize("call, err, msg", [
    (lambda: xlax.cond(np.array([True, False]), lambda: 1.0, lambda: 2.0), TypeError,
     r"lax.cond: pred must be a scalar, got shape \(2,\)"),
    (lambda: xlax.cond([True], lambda: 1.0, lambda: 2.0), TypeError,
     "pred must be a scalar"),
    (lambda: xlax.cond(None, lambda: 1.0, lambda: 2.0), TypeError, "pred is None"),
    (lambda: xlax.cond(np.complex64(1), lambda: 1.0, lambda: 2.0), TypeError,
     "pred must be a boolean or real number, got dtype complex64"),
    (lambda: xlax.cond(True, 1.0, lambda: 2.0), TypeError,
     "true_fun and false_fun arguments should be callable"),
    (lambda: xlax.cond(True, lambda x: x, lambda x: x, 1.0, operand=2.0), TypeError,
     "if 'operand' keyword is passed then no positional operands"),
    (lambda: xlax.cond(True, lambda: np.float32([1, 2]), lambda: np.float32([1, 2, 3])),
     TypeError, r"true_fun \(.*\) and false_fun \(.*\) must have identical output types, "
     r"got\n  f32\[2\]\nand\n  f32\[3\]"),
    (lambda: xlax.cond(True, lambda: np.int32(1), lambda: np.float32(1)), TypeError,
     r"identical output types, got\n  i32\[\]\nand\n  f32\[\]"),
    (lambda: xlax.cond(True, lambda: (1.0, 2.0), lambda: [1.0, 2.0]), TypeError,
     "true_fun .* and false_fun .* must have the same output structure"),
    (lambda: xlax.switch(1.5, [lambda: 1.0, lambda: 2.0]), TypeError,
     "lax.switch: index must be an integer scalar, got dtype float32"),
    (lambda: xlax.switch(np.int32([0, 1]), [lambda: 1.0, lambda: 2.0]), TypeError,
     r"lax.switch: index must be a scalar, got shape \(2,\)"),
    (lambda: xlax.switch(True, [lambda: 1.0, lambda: 2.0]), TypeError,
     "lax.switch: index must be an integer scalar, got dtype bool"),
    (lambda: xlax.switch(0, []), ValueError, "empty branch sequence"),
    (lambda: xlax.switch(0, [lambda: 1.0, 2.0]), TypeError, "sequence of callables"),
    (lambda: xlax.switch(0, [lambda: 1.0, lambda: np.float32([1.0])]), TypeError,
     r"branch 0 \(.*\) and branch 1 \(.*\) must have identical output types"),
    (lambda: xlax.while_loop(lambda c: c, lambda c: c + 1.0, np.float32(0)), TypeError,
     r"cond_fun must return a boolean scalar, but got output type\(s\) f32\[\]"),
    (lambda: xlax.while_loop(lambda c: c < 1, lambda c: c, np.zeros(2)), TypeError,
     r"cond_fun must return a boolean scalar, but got output type\(s\) bool\[2\]"),
    (lambda: xlax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, np.float32([1, 2])),
                             (0, np.float32(1))), TypeError,
     r"body_fun \(<lambda>\) output must have the same types as init_val.*\n"
     r"  carry\[1\]: init_val has type f32\[\] but body_fun output has type f32\[2\]"),
    (lambda: xlax.while_loop(lambda c: c[0] < 1, lambda c: [c[0] + 1], (0,)), TypeError,
     r"body_fun \(<lambda>\) output and init_val must have the same pytree structure"),
    (lambda: xlax.while_loop(1, lambda c: c, 0), TypeError, "should be callable"),
])
def test_error_messages(call, err, msg):
    with pytest.raises(err, match=msg):
        call()


# ---- printing, structure, eager vs jit, disable_jit ----

def _eqn_prims(jaxpr):
    return [e.primitive.name for e in jaxpr.eqns]


def test_make_jaxpr_structure_matches_jax():
    def make(lib, jnp, lax):
        def f(p, x):
            y = lax.cond(p, lambda v: jnp.sin(v) * 2.0, jnp.cos, x)
            z = lax.switch(lax.convert_element_type(x, np.int32),
                           [jnp.sin, jnp.cos, lambda v: v * 3.0], y)
            w = lax.while_loop(lambda c: lax.lt(c[0], x), lambda c: (c[0] + 1.0, c[1] * x), (0.0, z))
            return w[1]
        return lib.make_jaxpr(f)
    ours, theirs = both(make, True, 1.0)
    assert [p for p in _eqn_prims(ours.jaxpr) if p in ("cond", "while")] == \
        ["cond", "cond", "while"]
    for mine, jaxs in zip([e for e in ours.jaxpr.eqns if e.primitive.name in ("cond", "while")],
                          [e for e in theirs.jaxpr.eqns if e.primitive.name in ("cond", "while")]):
        assert sorted(mine.params) == sorted(jaxs.params)
        for k, v in mine.params.items():
            if k == "branches":
                assert [_eqn_prims(b.jaxpr) for b in v] == \
                    [_eqn_prims(b.jaxpr) for b in jaxs.params[k]]
            elif k.endswith("_jaxpr"):
                assert _eqn_prims(v.jaxpr) == _eqn_prims(jaxs.params[k].jaxpr)
            else:
                assert v == jaxs.params[k], k
        assert len(mine.invars) == len(jaxs.invars)
    text = str(ours)
    assert "cond[\n      branches=(\n        { lambda ; " in text
    assert "\n      )\n    ]" in text
    for needle in ("while[", "body_jaxpr={ lambda ;", "cond_jaxpr={ lambda ;",
                   "body_nconsts=1", "cond_nconsts=1"):
        assert needle in text, needle


def test_eager_matches_jit_and_disable_jit_runs_one_branch():
    calls = []

    def t(x):
        calls.append("t")
        return x + 1.0

    def f(x):
        calls.append("f")
        return x - 1.0
    x = np.float32(2.0)
    assert float(xlax.cond(True, t, f, x)) == float(xform.jit(
        lambda v: xlax.cond(True, t, f, v))(x)) == 3.0
    assert calls == ["t", "f", "t", "f"]   # both traced, as in JAX
    calls.clear()
    with xform.disable_jit():
        assert float(xlax.cond(False, t, f, x)) == 1.0
        assert float(xlax.switch(7, [t, f], x)) == 1.0
        assert int(xlax.while_loop(lambda i: i < 3, lambda i: i + 1, 0)) == 3
    assert calls == ["f", "f"]
