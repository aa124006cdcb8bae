"""Differentiation with integer values against jax (issue 22, item 7): float0 tangents
and cotangents eagerly, under jit, vmap and pmap (float0 is i1 inside a program and host
zeros outside it), and Jacobian blocks cast to the output's (jacfwd) or input's (jacrev)
dtype as JAX's."""
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
