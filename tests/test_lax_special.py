"""Edge cases of the special, rounding and bitwise primitives that the op table does
not reach: float0 tangents of integer ops, errors by message, clamp gradients with
respect to rank-0 bounds (which jax cannot take), CHLO in the lowered module.
"""
import jax
import numpy as np
import pytest
from jax import lax as jlax

import xform
from xform import lax as xlax
from xform import test_util
from optable import FLOAT0, assert_tree_same

I32, U32 = np.dtype(np.int32), np.dtype(np.uint32)

INTEGER_OPS = {
    "bitwise_not": lambda L, x, y: L.bitwise_not(x),
    "bitwise_and": lambda L, x, y: L.bitwise_and(x, y),
    "bitwise_or": lambda L, x, y: L.bitwise_or(x, y),
    "bitwise_xor": lambda L, x, y: L.bitwise_xor(x, y),
    "shift_left": lambda L, x, y: L.shift_left(x, y),
    "shift_right_logical": lambda L, x, y: L.shift_right_logical(x, y),
    "shift_right_arithmetic": lambda L, x, y: L.shift_right_arithmetic(x, y),
    "population_count": lambda L, x, y: L.population_count(x),
    "clz": lambda L, x, y: L.clz(x),
}


@pytest.mark.parametrize("name", sorted(INTEGER_OPS))
def test_integer_ops_have_float0_tangents_like_jax(name):
    fn = INTEGER_OPS[name]
    x = np.array([-7, 0, 5], I32)
    y = np.array([1, 31, 2], I32)
    t = (np.zeros(3, FLOAT0), np.zeros(3, FLOAT0))
    got = xform.jvp(lambda a, b: fn(xlax, a, b), (x, y), t)
    expected = jax.jvp(lambda a, b: fn(jlax, a, b), (x, y), t)
    assert_tree_same(got, expected, 0, f"{name} jvp")


def test_unsigned_bitwise_values():
    x = np.array([0, 1, 2**31, 2**32 - 1], U32)
    for name in ("bitwise_not", "population_count", "clz"):
        np.testing.assert_array_equal(getattr(xlax, name)(x), getattr(jlax, name)(x))
    s = np.array([1, 31, 32, 0], U32)
    for name in ("shift_left", "shift_right_logical", "shift_right_arithmetic"):
        np.testing.assert_array_equal(getattr(xlax, name)(x, s), getattr(jlax, name)(x, s))


def test_clamp_grads_wrt_scalar_bounds(x64):
    x = np.array([-1.5, -0.5, 0.5, 1.5, 2.5])
    test_util.check_grads(xlax.clamp, (-1.0, x, 1.0), order=2, modes=("fwd", "rev"))
    grads = xform.grad(lambda lo, x, hi: xlax.reduce_sum(xlax.clamp(lo, x, hi), (0,)),
                       (0, 1, 2))(-1.0, x, 1.0)
    np.testing.assert_array_equal(grads[0], 1.0)   # one element below the lower bound
    np.testing.assert_array_equal(grads[1], [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(grads[2], 2.0)


def test_nextafter_is_not_differentiable_as_jax():
    x, y = np.float32([1, 2]), np.float32([2, 0])
    for lib in (jax, xform):
        with pytest.raises(NotImplementedError, match="nextafter"):
            lib.jvp(lib.lax.nextafter, (x, y), (np.float32([1, 1]), np.float32([1, 1])))
    # a constant operand still evaluates under a transformation
    _, t = xform.jvp(lambda a: xlax.nextafter(xlax.stop_gradient(a), y) * a, (x,), (x,))
    np.testing.assert_array_equal(t, jax.jvp(
        lambda a: jax.lax.nextafter(jax.lax.stop_gradient(a), y) * a, (x,), (x,))[1])


def test_special_functions_lower_to_chlo():
    text = xform.jit(lambda x: xlax.lgamma(xlax.erf(x))).lower(np.float32(0.5)).as_text()
    assert "chlo.erf" in text and "chlo.lgamma" in text


def test_errors_name_the_op_and_dtype():
    cases = [
        (lambda: xlax.erf(np.int32(1)), TypeError, "erf does not accept dtype int32"),
        (lambda: xlax.tan(np.int32(1)), TypeError, "tan does not accept dtype int32"),
        (lambda: xlax.shift_left(np.float32(1), np.float32(1)), TypeError,
         "shift_left does not accept dtype float32"),
        (lambda: xlax.bitwise_and(np.float32(1), np.float32(1)), TypeError,
         "and does not accept dtype float32"),
        (lambda: xlax.floor(np.int32(1)), TypeError, "floor does not accept dtype int32"),
        (lambda: xlax.is_finite(np.int32(1)), TypeError, "is_finite does not accept"),
        (lambda: xlax.rem(np.float32(1), np.int32(1)), TypeError,
         "rem requires arguments to have the same dtypes"),
        (lambda: xlax.clamp(np.zeros(2, np.float32), np.zeros(3, np.float32), 1.0),
         TypeError, r"clamp requires min.shape == operand.shape or min.shape == \(\), got "
                    r"min.shape=\(2,\), operand.shape=\(3,\)"),
        (lambda: xlax.clamp(np.int32(0), np.float32(1), np.float32(2)), TypeError,
         "clamp requires arguments to have the same dtypes"),
        (lambda: xlax.round(np.float32(1), 2), ValueError,
         "rounding_method must be a lax.RoundingMethod"),
        (lambda: xform.grad(lambda m: xlax.polygamma(m, 2.0))(1.0), ValueError,
         "polygamma is not differentiable with respect to its order m"),
    ]
    for thunk, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            thunk()


def test_round_accepts_int_rounding_method():
    x = np.float32([0.5, 1.5, 2.5, -0.5])
    np.testing.assert_array_equal(xlax.round(x, 1), jlax.round(x, 1))
    np.testing.assert_array_equal(xlax.round(x, xlax.RoundingMethod.AWAY_FROM_ZERO),
                                  jlax.round(x, jlax.RoundingMethod.AWAY_FROM_ZERO))


def test_docstring_examples():
    import doctest
    import importlib
    for name in ["xform.lax.special", "xform.lax.bitwise", "xform.lax.rounding",
                 "xform.lax.complex"]:
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, name
