"""Regressions from a third differential sweep of ``xform.lax`` against JAX: one small
case per bug class, compared with jax at run time.
"""
import jax
import numpy as np
import pytest
from jax import lax as jlax

import xform
from xform import lax as xlax
from optable import assert_tree_same

A13 = np.array([[0.5, 1.25, 2.0]], np.float32)
B21 = np.array([[1.5], [0.75]], np.float32)


@pytest.mark.parametrize("name", ["add", "mul", "max", "atan2", "igamma", "lt"])
def test_binary_ops_broadcast_size_1_dims(name):
    # lax's shape rule (JAX's): equal ranks, each dimension equal or 1 on one side.
    jf, xf = getattr(jlax, name), getattr(xlax, name)
    if name == "igamma":   # (its lowering broadcasts too; lowered only: compiling is slow)
        lowered = xform.jit(xf).lower(A13, B21)
        lowered.as_text()
        assert lowered.out_info.shape == jax.eval_shape(jf, A13, B21).shape
        return
    assert_tree_same(xf(A13, B21), jf(A13, B21), 1e-6, name)
    assert_tree_same(xform.jit(xf)(A13, B21), jf(A13, B21), 1e-6, "jit " + name)
    stack = np.stack([A13, 2 * A13])
    assert_tree_same(xform.vmap(xf, (0, None))(stack, B21),
                     jax.vmap(jf, (0, None))(stack, B21), 1e-6, "vmap " + name)
    if name == "lt":
        return
    for argnum in (0, 1):
        want = jax.grad(lambda x, y: jf(x, y).sum(), argnum)(A13, B21)
        got = xform.grad(lambda x, y: xf(x, y).sum(), argnum)(A13, B21)
        assert_tree_same(got, want, 1e-5, f"grad {name} {argnum}")


@pytest.mark.parametrize("shapes", [((3,), (2, 3)), ((3,), (2,)), ((1, 3), (2, 3), ())])
def test_shape_errors_as_jax(shapes):
    xs = [np.ones(s, np.float32) for s in shapes]
    name = "add" if len(xs) == 2 else "clamp"
    with pytest.raises(TypeError) as want:
        getattr(jlax, name)(*xs)
    with pytest.raises(TypeError) as got:
        getattr(xlax, name)(*xs)
    assert str(got.value) == str(want.value)


def test_identity_reshape_and_concatenate_of_numpy_give_arrays():
    # JAX returns only its own Arrays as they are: a float64 NumPy operand became a
    # float32 Array there, and came back as the NumPy array itself here
    a = np.arange(3.0)
    for f, jf in ((lambda a: xlax.reshape(a, (3,)), lambda a: jax.lax.reshape(a, (3,))),
                  (lambda a: xlax.concatenate([a], 0), lambda a: jax.lax.concatenate([a], 0))):
        got, want = f(a), jf(a)
        assert isinstance(got, xform.Array) and got.dtype == want.dtype
        x = xform.numpy.ones(3)
        assert f(x) is x
