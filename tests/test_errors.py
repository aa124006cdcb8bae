"""User-facing errors: each names the user's argument, shape or dtype and the fix."""
import numpy as np
import pytest

import xform
from xform import lax
from xform.errors import (ConcretizationTypeError, TracerArrayConversionError,
                          TracerBoolConversionError, TracerIntegerConversionError,
                          UnexpectedTracerError)


def f32(x):
    return xform.device_put(np.asarray(x, np.float32))


def test_if_on_traced_value_under_jit():
    @xform.jit
    def f(x):
        if lax.gt(x, 0.0):
            return x
        return lax.neg(x)

    with pytest.raises(TracerBoolConversionError, match="lax.cond") as e:
        f(1.0)
    assert "static_argnums" in str(e.value)
    assert isinstance(e.value, ConcretizationTypeError)


def test_python_control_flow_works_under_grad():
    # Under grad alone values are concrete, as in JAX.
    def f(x):
        return lax.sin(x) if lax.gt(x, 0.0) else lax.cos(x)
    assert float(xform.grad(f)(1.0)) == pytest.approx(np.cos(1.0))


def test_static_argnums_is_the_fix():
    @xform.jit
    def bad(x, n):
        return lax.mul(x, float(n))

    with pytest.raises(ConcretizationTypeError):
        bad(f32(1.0), 3)
    good = xform.jit(bad.__wrapped__, static_argnums=1)
    assert float(good(f32(1.0), 3)) == 3.0


def test_int_and_array_conversion_of_tracers():
    with pytest.raises(TracerIntegerConversionError):
        xform.jit(lambda x: list(range(x)))(3)
    with pytest.raises(TracerArrayConversionError, match="xform.numpy"):
        xform.jit(lambda x: np.sin(np.asarray(x)))(f32([1.0]))


def test_grad_of_non_scalar_output():
    with pytest.raises(TypeError, match=r"scalar-output functions. Output had shape: \(3,\)"):
        xform.grad(lax.sin)(f32([1., 2., 3.]))


def test_grad_wrt_integer_input_names_dtype():
    with pytest.raises(TypeError, match="int32") as e:
        xform.grad(lambda x: lax.convert_element_type(x, np.float32))(3)
    assert "allow_int" in str(e.value)
    g = xform.grad(lambda x, y: lax.mul(lax.convert_element_type(x, np.float32), y),
                   argnums=(0, 1), allow_int=True)(3, 2.0)
    assert g[0].dtype == xform.core.dtypes.float0 and float(g[1]) == 3.0


def test_grad_of_integer_output():
    with pytest.raises(TypeError, match="real-valued outputs"):
        xform.grad(lambda x: lax.convert_element_type(x, np.int32))(1.0)


def test_grad_argnums_out_of_range():
    with pytest.raises(TypeError, match="argnums"):
        xform.grad(lax.sin, argnums=2)(1.0)


def test_vmap_inconsistent_sizes_lists_each_argument():
    with pytest.raises(ValueError, match="inconsistent sizes") as e:
        xform.vmap(lax.add)(f32(np.ones(2)), f32(np.ones(3)))
    msg = str(e.value)
    assert "size 2" in msg and "size 3" in msg
    assert "args[0]" in msg and "args[1]" in msg


def test_vmap_axis_out_of_range():
    with pytest.raises(ValueError, match="rank should be at least 3"):
        xform.vmap(lax.sin, in_axes=2)(f32(np.ones((2, 2))))


def test_vmap_in_axes_length_mismatch():
    with pytest.raises(ValueError, match=r"len\(in_axes\)=1, len\(args\)=2"):
        xform.vmap(lax.add, in_axes=(0,))(f32(np.ones(2)), f32(np.ones(2)))


def test_vmap_needs_a_mapped_axis():
    with pytest.raises(ValueError, match="at least one non-None"):
        xform.vmap(lax.sin, in_axes=None)(1.0)


def test_binary_op_shape_mismatch_names_both_shapes():
    with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: "
                                        r"\(3,\), \(4,\)"):
        lax.add(f32(np.ones(3)), f32(np.ones(4)))
    with pytest.raises(TypeError, match=r"\(2, 3\), \(3, 2\)"):
        xform.jit(lax.mul)(f32(np.ones((2, 3))), f32(np.ones((3, 2))))


def test_binary_op_dtype_mismatch_suggests_jnp():
    with pytest.raises(TypeError, match="same dtypes, got float32, int32"):
        lax.add(f32([1.0]), xform.device_put(np.array([1], np.int32)))


def test_dot_general_contracting_mismatch():
    with pytest.raises(TypeError, match="contracting dimensions to have the same shape"):
        lax.dot_general(f32(np.ones((2, 3))), f32(np.ones((4, 2))), (((1,), (0,)), ((), ())))


def test_reshape_size_mismatch():
    with pytest.raises(TypeError, match="total size must be unchanged"):
        lax.reshape(f32(np.ones(6)), (4,))


def test_jit_non_array_argument_names_path():
    with pytest.raises(TypeError, match="static_argnums") as e:
        xform.jit(lambda d: d["a"])({"a": "not an array"})
    assert "['a']" in str(e.value)


def test_jit_unhashable_static_argument():
    f = xform.jit(lambda x, shape: lax.reshape(x, shape), static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        f(f32(np.ones(4)), [2, 2])
    assert f(f32(np.ones(4)), (2, 2)).shape == (2, 2)


def test_jvp_tangent_dtype_mismatch():
    with pytest.raises(TypeError, match="float0"):
        xform.jvp(lambda x: x, (np.int32(1),), (np.float32(1.0),))


def test_vjp_cotangent_shape_mismatch():
    _, f_vjp = xform.vjp(lax.sin, f32([1., 2.]))
    with pytest.raises(ValueError, match=r"\(3,\) must be the same as the shape"):
        f_vjp(f32([1., 2., 3.]))


def test_leaked_tracer_is_reported():
    leaked = []
    xform.vmap(lambda x: leaked.append(x) or x)(f32([1., 2.]))
    with pytest.raises(UnexpectedTracerError, match="Return such values as outputs"):
        lax.sin(leaked[0])
