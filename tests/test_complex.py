"""Differentiation of complex functions against jax: grad of real-valued functions
of complex inputs (JAX's convention: the conjugate of the steepest-ascent
direction), holomorphic grad, and jvp/vjp through complex/real/imag/conj, where
every linear primitive's transpose is a plain (unconjugated) transpose.
"""
import jax
import numpy as np
import pytest
from jax import lax as jlax

import xform
from xform import lax as xlax
from optable import AD_TOL, assert_tree_same

C64, F32 = np.dtype(np.complex64), np.dtype(np.float32)


def _z(seed, shape=(3,)):
    rng = np.random.RandomState(seed)
    return (rng.uniform(0.5, 2, shape) + 1j * rng.uniform(-1, 1, shape)).astype(C64)


def _sum(L, x):
    return L.reduce_sum(x, (0,))


# Real-valued functions of one complex vector, written once for both libraries.
REAL_VALUED = {
    "abs": lambda L, z: _sum(L, L.abs(z)),
    "real_square": lambda L, z: _sum(L, L.real(L.mul(z, z))),
    "imag_exp": lambda L, z: _sum(L, L.imag(L.exp(z))),
    "abs_sq_via_conj": lambda L, z: _sum(L, L.real(L.mul(z, L.conj(z)))),
    "real_log_sin": lambda L, z: _sum(L, L.real(L.mul(L.log(z), L.sin(z)))),
    "abs_sqrt_div": lambda L, z: _sum(L, L.abs(L.div(L.sqrt(z), L.add(z, 1 + 0j)))),
    "tan_asinh": lambda L, z: _sum(L, L.imag(L.mul(L.tan(z), L.asinh(z)))),
    "pow_integer_pow": lambda L, z: _sum(L, L.real(L.add(L.pow(z, z),
                                                         L.integer_pow(z, -2)))),
    "convert_to_real": lambda L, z: _sum(L, L.convert_element_type(L.mul(z, z),
                                                                   np.float32)),
    "complex_of_parts": lambda L, z: _sum(L, L.abs(L.complex(L.imag(z),
                                                             L.mul(L.real(z), 2.0)))),
}


@pytest.mark.parametrize("name", sorted(REAL_VALUED))
def test_grad_of_real_valued_function_matches_jax(name):
    fn = REAL_VALUED[name]
    z = _z(hash(name) % 1000)
    expected = jax.grad(lambda z: fn(jlax, z))(z)
    got = xform.grad(lambda z: fn(xlax, z))(z)
    assert_tree_same(got, expected, AD_TOL, f"grad {name}")
    got_jit = xform.jit(xform.grad(lambda z: fn(xlax, z)))(z)
    assert_tree_same(got_jit, expected, AD_TOL, f"jit(grad) {name}")


def test_grad_of_abs_is_conjugate_direction():
    # f(z) = |z|: df/dx - i df/dy = conj(z) / |z|, JAX's convention.
    z = np.array([3 + 4j, -1 + 0j, 0j], C64)
    got = xform.grad(lambda z: _sum(xlax, xlax.abs(z)))(z)
    np.testing.assert_allclose(got, [0.6 - 0.8j, -1, 0], atol=1e-7)


def test_holomorphic_grad_matches_jax():
    z = _z(1, ())

    def f(L, z):
        return L.mul(L.sinh(z), L.exp(L.mul(z, z)))
    got = xform.grad(lambda z: f(xlax, z), holomorphic=True)(z)
    expected = jax.grad(lambda z: f(jlax, z), holomorphic=True)(z)
    assert_tree_same(got, expected, AD_TOL, "holomorphic grad")


def test_second_order_matches_jax():
    z = _z(2)

    def f(L, z):
        return _sum(L, L.abs(L.mul(L.exp(z), z)))
    t = _z(3)
    got = xform.jvp(xform.grad(lambda z: f(xlax, z)), (z,), (t,))
    expected = jax.jvp(jax.grad(lambda z: f(jlax, z)), (z,), (t,))
    assert_tree_same(got, expected, 1e-4, "jvp of grad")


LINEAR_OPS = {
    "complex": (lambda L, x, y: L.complex(x, y), (F32, F32)),
    "complex_scalar_y": (lambda L, x, y: L.complex(x, y), (F32, "scalar")),
    "real": (lambda L, z: L.real(z), (C64,)),
    "imag": (lambda L, z: L.imag(z), (C64,)),
    "conj": (lambda L, z: L.conj(z), (C64,)),
    "conj_of_real": (lambda L, x: L.conj(x), (F32,)),
    "mul_conj": (lambda L, z, w: L.mul(L.conj(z), w), (C64, C64)),
    "convert_to_complex": (lambda L, x: L.convert_element_type(x, C64), (F32,)),
    "convert_to_real": (lambda L, z: L.convert_element_type(z, F32), (C64,)),
}


def _arg(rng, kind):
    if kind == "scalar":
        return np.float32(rng.standard_normal())
    x = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    return x.astype(kind) if kind == C64 else x.real.astype(kind)


@pytest.mark.parametrize("name", sorted(LINEAR_OPS))
def test_jvp_vjp_match_jax(name):
    fn, kinds = LINEAR_OPS[name]
    rng = np.random.RandomState(len(name))
    args = tuple(_arg(rng, k) for k in kinds)
    tangents = tuple(_arg(rng, k) for k in kinds)
    fx, fj = (lambda *a: fn(xlax, *a)), (lambda *a: fn(jlax, *a))
    assert_tree_same(xform.jvp(fx, args, tangents), jax.jvp(fj, args, tangents),
                     AD_TOL, f"{name} jvp")
    y, x_vjp = xform.vjp(fx, *args)
    _, j_vjp = jax.vjp(fj, *args)
    ct = _arg(rng, np.asarray(y).dtype)
    ct = ct.reshape(np.shape(y)) if np.shape(y) == ct.shape else ct
    assert_tree_same(x_vjp(ct), j_vjp(ct), AD_TOL, f"{name} vjp")


def test_vmap_of_complex_grad():
    zs = np.stack([_z(s) for s in range(4)])
    fn = REAL_VALUED["real_log_sin"]
    got = xform.vmap(xform.grad(lambda z: fn(xlax, z)))(zs)
    expected = jax.vmap(jax.grad(lambda z: fn(jlax, z)))(zs)
    assert_tree_same(got, expected, AD_TOL, "vmap(grad)")


def test_complex_dtype_errors():
    with pytest.raises(TypeError, match="complex does not accept dtype int32"):
        xlax.complex(np.int32(1), np.int32(2))
    with pytest.raises(TypeError, match="complex does not accept dtype float16"):
        xlax.complex(np.float16(1), np.float16(2))
    with pytest.raises(TypeError, match="real does not accept dtype float32"):
        xlax.real(np.float32(1))
    with pytest.raises(TypeError, match="conj does not accept dtype int32"):
        xlax.conj(np.int32(1))
    with pytest.raises(TypeError, match="lt does not accept dtype complex64"):
        xlax.lt(np.complex64(1), np.complex64(2))   # complex numbers are not ordered
