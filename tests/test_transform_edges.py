"""Regressions from a differential sweep of transformation rules (jvp, vjp, vmap, jacobians,
linearize/linear_transpose, float0 and zero-size inputs) against JAX: one small case per
bug found, each compared with jax at run time.
"""
import jax
import numpy as np
import pytest

import xform
from optable import assert_tree_same

LIBS = ((jax, jax.numpy), (xform, xform.numpy))


def _both(fn, *args):
    """``fn(lib, jnp, *args)`` for xform and for jax."""
    (jl, jn), (xl, xn) = LIBS
    return fn(xl, xn, *args), fn(jl, jn, *args)


def test_pow_grad_at_zero_follows_exponent_dtype():
    # d x^y/dx at x = y = 0: nan for a float y (0 * 0^-1), 0 for an integer y.
    x = np.zeros(3, np.float32)
    yf, yi = np.array([0., 1., 2.], np.float32), np.array([0, 1, 2], np.int32)
    ours, want = _both(lambda L, J: (L.grad(lambda a, b: L.lax.pow(a, b).sum(), (0, 1))(x, yf),
                                     L.grad(lambda a: L.lax.pow(a, yi).sum())(x)))
    assert_tree_same(ours, want, 1e-6, "grad pow at 0")


@pytest.mark.parametrize("shape", [(0, 3), (2, 0)])
def test_sort_and_top_k_tangents_of_zero_size(shape):
    x = np.ones(shape, np.float32)

    def f(L, J):
        out = [L.jvp(lambda a: J.sort(a, 1), (x,), (x,)),
               L.grad(lambda a: J.sort(a, 0).sum())(x)]
        if shape[-1] == 0:
            out.append(L.jvp(lambda a: L.lax.top_k(a, 0)[0], (x,), (x,)))
        return out
    assert_tree_same(*_both(f), 0, "zero-size sort/top_k tangents")


def test_reduce_with_no_axes_and_top_k_types():
    # reduce_*(x, ()) gives an Array (not the NumPy input back); top_k a list, the
    # structure a VJP cotangent for it must have.
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod"):
        out = getattr(xform.lax, name)(x, ())
        assert isinstance(out, xform.Array), name
        assert_tree_same(out, getattr(jax.lax, name)(x, ()), 0, name)
    assert type(xform.lax.top_k(x, 2)) is type(jax.lax.top_k(x, 2)) is list
    ct = [np.ones((2, 2), np.float32), np.zeros((2, 2), xform.dtypes.float0)]
    ours, want = _both(lambda L, J: L.vjp(lambda a: L.lax.top_k(a, 2), x)[1](ct))
    assert_tree_same(ours, want, 0, "top_k vjp")


def test_frexp_mantissa_tangent():
    # the mantissa comes from bit manipulation: its tangent is dx * 2**-e, not zero
    x = np.array([3., -0.3, 0., np.inf, 1.], np.float32)
    ours, want = _both(lambda L, J: (L.jvp(J.frexp, (x,), (np.ones_like(x),)),
                                     L.grad(lambda a: J.frexp(a)[0].sum())(x)))
    assert_tree_same(ours, want, 1e-6, "frexp jvp/grad")


def test_betainc_under_x64(x64):
    a, x = np.full(3, 1.5), np.array([0.2, 0.5, 0.9])
    ours, want = _both(lambda L, J: (L.lax.betainc(a, a + 1, x),
                                     L.grad(lambda v: L.lax.betainc(a, a + 1, v).sum())(x)))
    assert_tree_same(ours, want, 1e-9, "betainc x64")


def test_vjp_cotangent_dtype_is_checked():
    x = np.ones((2, 3), np.float32)
    for L in (jax, xform):
        with pytest.raises(ValueError, match="unexpected JAX type"):
            L.vjp(L.numpy.sin, x)[1](x.astype(np.float16))
        # an integer output takes any cotangent of its shape (it stands for float0)
        L.vjp(lambda a: a.astype(np.int32), x)[1](np.ones((2, 3), np.int32))


def test_argsort_index_dtype_and_errors(x64):
    # JAX's indices are the default int (int64 under x64), or ``dtype``; kind/order are
    # TypeErrors.
    x = np.array([[3., 1., 2.], [0., 5., 1.]], np.float32)
    ours, want = _both(lambda L, J: (J.argsort(x), J.argsort(x + 1j, descending=True),
                                     J.argsort(x, dtype=np.int16)))
    assert_tree_same(ours, want, 0, "argsort")
    for L in (jax, xform):
        for kw in ({"kind": "quicksort"}, {"order": "a"}):
            with pytest.raises(TypeError):
                L.numpy.argsort(x, **kw)


def test_lax_zeta_is_not_differentiable_but_scipy_zeta_is():
    # JAX's zeta_p has no JVP rule; only scipy.special.zeta differentiates (a custom JVP)
    errors = []
    for L in (jax, xform):
        for argnum in (0, 1):
            with pytest.raises(NotImplementedError) as e:
                L.grad(L.lax.zeta, argnum)(3.0, 1.5)
            errors.append(str(e.value))
    assert errors[:2] == errors[2:], errors
    ours, want = _both(lambda L, J: L.jacfwd(L.scipy.special.zeta, (0, 1))(
        np.array([2., 4.], np.float32), np.array([1., .5], np.float32)))
    assert_tree_same(ours, want, 1e-5, "scipy zeta jacobian")


def test_jnp_power_int_exponent_grad_at_zero():
    # jnp.power(float, int array) keeps the int exponent (lax.pow's JVP is then 0 at
    # x = 0 where the exponent is 0); promoting it to float gave nan.
    x, n = np.zeros(3, np.float32), np.array([0, 1, 2], np.int32)
    ours, want = _both(lambda L, J: (L.grad(lambda a: J.power(a, n).sum())(x),
                                     L.jvp(lambda a: J.power(a, n), (x,), (x + 1,))))
    assert_tree_same(ours, want, 1e-6, "grad power(x, int) at 0")


def test_grad_of_python_scalar_output_and_float0_tangent_check():
    # a Python/NumPy scalar output is a scalar (zero gradient); a float0 tangent stands
    # only for an int/bool primal
    x = np.ones(2, np.float32)
    ours, want = _both(lambda L, J: (L.grad(lambda a: 0.)(x),
                                     L.value_and_grad(lambda a: np.float32(1.))(x)))
    assert_tree_same(ours, want, 0, "grad of a constant")
    for L in (jax, xform):
        with pytest.raises(TypeError, match="tangent dtype"):
            L.jvp(lambda a: a * 2, (x,), (np.zeros(2, jax.dtypes.float0),))
        with pytest.raises(TypeError, match="scalar-output functions. Output was"):
            L.grad(lambda a: [a.sum()])(x)


def test_nan_and_complex_zero_tangents_follow_jax():
    # sqrt at a complex 0: t * (0.5 / 0j) is nan (t / 0j was inf); cholesky of a matrix
    # that is not positive definite: the tangent's upper triangle stays 0, not NaN
    z = np.array([0j, 1 + 1j], np.complex64)
    s = np.array([[1., 2., 0.], [2., 1., 0.], [0., 0., 1.]], np.float32)
    ours, want = _both(lambda L, J: (L.jvp(J.sqrt, (z,), (z + 1,)),
                                     L.jvp(J.linalg.cholesky, (s,), (s,))))
    assert_tree_same(ours, want, 1e-6, "sqrt / cholesky tangents")
