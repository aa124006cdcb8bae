"""Soundness of differentiation against jax (issue 22). Integer values (item 7): float0
tangents and cotangents eagerly, under jit, vmap, pmap and lazy mode (float0 is i1
inside a program and host zeros outside it), Jacobian blocks cast to the output's
(jacfwd) or input's (jacrev) dtype. linear_transpose (item 9): the transpose of the
traced jaxpr, so a non-linear function raises as in JAX instead of giving garbage."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xform
import xform.numpy as xnp

FLOAT0 = jax.dtypes.float0


def _leaf(a):
    arr = np.asarray(a)
    weak = getattr(a, "weak_type", False) if arr.dtype != FLOAT0 else None
    return arr.dtype, arr.shape, weak, (None if arr.dtype == FLOAT0 else arr.tolist())


def assert_same(actual, expected, what):
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree, what
    for a, e in zip(a_leaves, e_leaves):
        assert _leaf(a) == _leaf(e), f"{what}: {_leaf(a)} but jax gives {_leaf(e)}"


def _cases(lib, np_):
    to_int = lambda x: (x * 2).astype(np_.int32)            # noqa: E731
    mixed = lambda x: (x * 2, (x * 3).astype(np_.int32))    # noqa: E731
    mul = lambda a, b: a * b                                # noqa: E731
    ints = np_.arange(3)
    z0 = np.zeros(3, FLOAT0)
    return {
        "jacfwd int": (lib.jacfwd(to_int),),
        "jacfwd mixed": (lib.jacfwd(mixed),),
        "jacfwd f16": (lib.jacfwd(lambda x: (x * 2).astype(np_.float16)),),
        "jacrev f16": (lib.jacrev(lambda x: (x * 2).astype(np_.float16)),),
        "jacrev int in": (lambda x: lib.jacrev(mul, (0, 1), allow_int=True)(x, ints),),
        "jvp int out": (lambda x: lib.jvp(mixed, (x,), (x,)),),
        "jvp int in": (lambda x: lib.jvp(mul, (x, ints), (x, z0)),),
        "vjp int in": (lambda x: lib.vjp(mul, x, ints)[1](x),),
        "vjp float0 ct": (lambda x: lib.vjp(mixed, x)[1]((x, z0)),),
        "grad int in": (lambda x: lib.grad(lambda a, b: (a * b).sum(), (0, 1),
                                           allow_int=True)(x, ints),),
        "vmap grad int in": (lambda x: lib.vmap(lib.grad(mul, (0, 1), allow_int=True))(
            x, ints),),
        "linearize int out": (lambda x: lib.linearize(mixed, x)[1](x),),
        "identity float0": (lambda x: z0,),
    }


def test_integer_outputs_and_inputs_match_jax():
    x = np.arange(3.0, dtype=np.float32)
    ours, theirs = _cases(xform, xnp), _cases(jax, jnp)
    for name in ours:
        (f,), (g,) = ours[name], theirs[name]
        assert_same(f(x), g(x), name)
        assert_same(xform.jit(f)(x), jax.jit(g)(x), f"jit {name}")
    # float0 in and out of a jitted function; pmap's outputs too
    z = np.zeros((2,), FLOAT0)
    assert_same(xform.jit(lambda a, t: (a, t))(x, z), jax.jit(lambda a, t: (a, t))(x, z),
                "jit float0 argument")
    pg = xform.pmap(xform.grad(lambda a, b: a * b, (0, 1), allow_int=True))
    assert_same(pg(x[:2], np.arange(2)), jax.pmap(jax.grad(
        lambda a, b: a * b, (0, 1), allow_int=True))(x[:2], np.arange(2)), "pmap")
    with xform.lazy():
        assert_same(ours["jacfwd mixed"][0](x), theirs["jacfwd mixed"][0](x), "lazy jacfwd")


@pytest.mark.parametrize("name", ["jacrev", "hessian", "grad"])
def test_integer_output_errors_match_jax(name):
    f = lambda x: (x * 2).astype(jnp.int32).sum()   # noqa: E731
    fx = lambda x: (x * 2).astype(xnp.int32).sum()  # noqa: E731
    with pytest.raises(TypeError) as e_j:
        getattr(jax, name)(f)(np.ones(2, np.float32))
    with pytest.raises(TypeError) as e_x:
        getattr(xform, name)(fx)(np.ones(2, np.float32))
    assert str(e_x.value).replace("xform", "jax") == str(e_j.value)


def _lt_cases(lib, np_):
    x = np.ones(3, np.float32)
    return {  # name: (fun, primals, cotangent)
        "2x": (lambda x: 2.0 * x, (1.0,), 3.0),
        "affine": (lambda x: x + 1.0, (x,), x),
        "const out": (lambda x: np_.ones(3), (x,), x),
        "pytree": (lambda d: {"a": d["x"] * 2.0, "b": d["y"].sum()},
                   ({"x": x, "y": x},), {"a": x, "b": np.float32(1.0)}),
        "matmul": (lambda x: np_.ones((2, 3)) @ x, (x,), np.ones(2, np.float32)),
        "int": (lambda n: n * 2, (np.arange(3),), np.arange(3)),
        "struct": (lambda x: x / 2.0, (lib.ShapeDtypeStruct((3,), np.float32),), x),
    }


def _lt_bad(np_):
    return {"x*x": lambda x: x * x, "sin": np_.sin, "exp": np_.exp,
            "2/x": lambda x: 2.0 / x, "where": lambda x: np_.where(x > 0, x, 0.0),
            "x@x": lambda x: x @ x, "cos(sum)*x": lambda x: np_.cos(x.sum()) * x}


def _raised(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError("did not raise")


def test_linear_transpose_matches_jax():
    ours, theirs = _lt_cases(xform, xnp), _lt_cases(jax, jnp)
    for name in ours:
        (f, p, ct), (g, q, _) = ours[name], theirs[name]
        t = xform.linear_transpose(f, *p)
        expected = jax.linear_transpose(g, *q)(ct)
        assert_same(t(ct), expected, name)
        assert_same(xform.jit(lambda t, c: t(c))(t, ct), expected, f"{name} as jit arg")
    x = np.ones(3, np.float32)
    bad_x, bad_j = _lt_bad(xnp), _lt_bad(jnp)
    for name in bad_x:  # not linear: raises when called, with JAX's class
        e_x = _raised(lambda: xform.linear_transpose(bad_x[name], x)(x))
        e_j = _raised(lambda: jax.linear_transpose(bad_j[name], x)(x))
        assert type(e_x) is type(e_j), (name, e_x, e_j)
        if isinstance(e_j, NotImplementedError):
            assert str(e_x) == str(e_j)
    for args in [(lambda x: (x, x), (x,), x),                      # tree mismatch
                 (lambda x: x * 2.0, (x,), x.astype(np.float16)),  # dtype mismatch
                 (lambda x: x * 2.0, (x,), np.ones(2, np.float32)),  # shape mismatch
                 (lambda x: x.astype(np.int32), (x,), None)]:     # float -> int
        f, p, ct = args
        e_x = _raised(lambda: xform.linear_transpose(f, *p)(ct))
        e_j = _raised(lambda: jax.linear_transpose(f, *p)(ct))
        assert type(e_x) is type(e_j) is TypeError
        assert str(e_x).split(",")[0] == str(e_j).split(",")[0]


def test_grad_of_weak_scalar_and_full_like_keep_weak_type_as_jax():
    # grad seeds its cotangent like the output (lax.full_like keeps a weak type), so the
    # gradient at a Python float is weakly typed, as JAX's; it was a strong float32.
    cases = {
        "grad tanh": (lambda: xform.grad(xnp.tanh)(0.0), lambda: jax.grad(jnp.tanh)(0.0)),
        "jit grad": (lambda: xform.jit(xform.grad(lambda x: x * 2.0))(1.0),
                     lambda: jax.jit(jax.grad(lambda x: x * 2.0))(1.0)),
        "grad of array": (lambda: xform.grad(lambda x: xnp.sum(x * 2.0))(xnp.ones(2)),
                          lambda: jax.grad(lambda x: jnp.sum(x * 2.0))(jnp.ones(2))),
        "full_like": (lambda: xform.lax.full_like(1.0, 2, shape=(2,)),
                      lambda: jax.lax.full_like(1.0, 2, shape=(2,))),
        "full_like dtype": (lambda: xform.lax.full_like(1.0, 2, dtype=np.float32),
                            lambda: jax.lax.full_like(1.0, 2, dtype=np.float32)),
    }
    for what, (ours, theirs) in cases.items():
        assert_same(ours(), theirs(), what)


def _weak_cases(lib, np_, lax):
    xs = np.arange(3, dtype=np.float32)
    bf = np.array([1.0, 2.0], jnp.bfloat16)
    loop = lambda x: lax.while_loop(lambda s: s[0] < 3,          # noqa: E731
                                    lambda s: (s[0] + 1, s[1] * 2.0), (0, x))[1]
    fori = lambda x: lax.fori_loop(0, 3, lambda i, s: s * 2.0 + x, x)  # noqa: E731
    cnd = lambda x: lax.cond(x > 1, lambda v: v * 2.0, lambda v: v, x)  # noqa: E731
    scan_c = lambda c: lax.scan(lambda s, x: (s * c, x), 1.0, xs)[0]  # noqa: E731
    mix = lambda x, y: np_.sin(x) * y + 1.0                           # noqa: E731
    lin = lambda f, *a: (lambda y, f_jvp: (y, f_jvp(*a)))(*lib.linearize(f, *a))  # noqa
    return {  # (a weak primal's tangents are weak: the tangent aval keeps the weak type)
        "linearize while": lambda: lin(loop, 2.0),
        "linearize fori": lambda: lin(fori, 2.0),
        "linearize fori bf16": lambda: lin(fori, bf),
        "linearize cond": lambda: lin(cnd, 2.0),
        "linearize scan": lambda: lin(scan_c, 2.0),
        "jit linearize while": lambda: lib.jit(lambda x: lin(loop, x))(2.0),
        "jvp fori": lambda: lib.jvp(fori, (2.0,), (1.0,)),
        "grad scan const": lambda: lib.grad(scan_c)(2.0),
        "vmap grad scan const": lambda: lib.vmap(lib.grad(scan_c))(xs),
        "grad cond closure": lambda: lib.grad(
            lambda c: lax.cond(c > 1, lambda v: v * c, lambda v: v + c, 3.0))(2.0),
        "jit grad py*bf16": lambda: lib.jit(lib.grad(lambda x, y: mix(x, y).sum(), (0, 1)))(
            2.0, bf),
        "jit jacrev py*f32": lambda: lib.jit(lib.jacrev(mix, (0, 1)))(2.0, xs),
        "jit hessian py,bf16": lambda: lib.jit(lib.hessian(lambda x, y: mix(x, y).sum(),
                                                           (0, 1)))(2.0, bf),
        "vmap jvp py,bf16": lambda: lib.vmap(lambda y: lib.jvp(mix, (2.0, y), (1.0, y)))(bf),
    }


def test_weak_types_of_derivatives_match_jax():
    # tangent avals keep the primal's weak type (they were strong: linearize of a loop
    # of a Python float gave a strong tangent), so Python floats with f32/bf16 arrays,
    # loops' and conds' closed-over constants differentiate to JAX's dtypes/weak types
    ours, theirs = _weak_cases(xform, xnp, xform.lax), _weak_cases(jax, jnp, jax.lax)
    for name in ours:
        assert_same(ours[name](), theirs[name](), name)
