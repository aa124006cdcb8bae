"""``lax.composite`` against JAX's: values eagerly and under jit, the
``stablehlo.composite`` op (name, version, attributes, decomposition) in the lowered
program, pytrees and closed-over constants, and JAX's errors under grad, vmap and
traced attributes."""
import re
from functools import partial

import jax
import jax.numpy as jnp_ref
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import lax


def _tangent(lax_mod):
    return lax_mod.composite(lambda x: lax_mod.sin(x) / lax_mod.cos(x), name="my.tangent")


def _scaled_pair(lax_mod, np_mod):
    scale = np.float32(3.0)   # a closed-over constant: a leading operand

    @partial(lax_mod.composite, name="my.pair", version=2)
    def pair(d, /, *, axis, eps=None, tag="t", table=None, ints=(), flag=False, rate=0.5):
        return {"s": np_mod.sum(d["a"] * scale, axis=axis), "b": d["b"] + rate}
    return pair


def _composite_ops(text):
    return [line.strip() for line in text.splitlines() if "stablehlo.composite" in line]


def test_values_and_lowering_match_jax():
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(_tangent(lax)(jnp.asarray(x)), _tangent(jax.lax)(x), rtol=1e-6)
    np.testing.assert_allclose(xform.jit(_tangent(lax))(x), jax.jit(_tangent(jax.lax))(x),
                               rtol=1e-6)
    d = {"a": np.ones((2, 3), np.float32), "b": np.float32(1.5)}
    got = xform.jit(lambda d: _scaled_pair(lax, jnp)(d, axis=1))(d)
    want = jax.jit(lambda d: _scaled_pair(jax.lax, jnp_ref)(d, axis=1))(d)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    # the op as JAX writes it: operands (constant first), name, version, attributes
    attrs = dict(axis=1, eps=None, tag="t", table=np.arange(3, dtype=np.int32),
                 ints=(1, 2), flag=True, rate=0.5)
    ours = _composite_ops(xform.jit(lambda d: _scaled_pair(lax, jnp)(d, **attrs))
                          .lower(d).as_text())
    theirs = _composite_ops(jax.jit(lambda d: _scaled_pair(jax.lax, jnp_ref)(d, **attrs))
                            .lower(d).as_text())
    assert len(ours) == len(theirs) == 1
    assert re.sub(r"%\w+", "%", ours[0]) == re.sub(r"%\w+", "%", theirs[0])
    assert "eps" not in ours[0] and "flag = true" in ours[0] and "rate = 5.0" in ours[0]
    jaxpr = str(xform.make_jaxpr(_tangent(lax))(x))
    assert "composite[" in jaxpr and "name=my.tangent" in jaxpr


def test_errors_match_jax():
    x = np.float32(0.3)
    for lib, lax_mod in ((jax, jax.lax), (xform, lax)):
        with pytest.raises(ValueError, match="JVP rule for composite not implemented"):
            lib.grad(_tangent(lax_mod))(x)
        with pytest.raises(NotImplementedError):
            lib.vmap(_tangent(lax_mod))(np.ones(3, np.float32))
        bad = lax_mod.composite(lambda x, *, k: x * k, name="my.bad")
        with pytest.raises(lib.errors.UnexpectedTracerError, match="as an attribute"):
            lib.jit(lambda x: bad(x, k=x))(x)


def _mx_operands(seed=0):
    rng = np.random.default_rng(seed)
    f8, e8 = jnp_ref.float8_e4m3fn, jnp_ref.float8_e8m0fnu
    return (np.asarray(rng.standard_normal((2, 4, 64)), f8),
            np.asarray(rng.standard_normal((2, 64, 3)), f8),
            np.asarray(2.0 ** rng.integers(-3, 3, (2, 4, 2)), e8),
            np.asarray(2.0 ** rng.integers(-3, 3, (2, 2, 3)), e8))


def _scaled(lax_mod, pet=np.float32):
    return lambda l, r, ls, rs: lax_mod.scaled_dot(l, r, lhs_scale=ls, rhs_scale=rs,
                                                   preferred_element_type=pet)


def test_scaled_dot_matches_jax_eagerly_jitted_vmapped_and_lowered():
    ops = _mx_operands()
    for pet in (None, np.float32):
        got, want = _scaled(lax, pet)(*ops), _scaled(jax.lax, pet)(*ops)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    np.testing.assert_array_equal(xform.jit(_scaled(lax))(*ops), jax.jit(_scaled(jax.lax))(*ops))
    np.testing.assert_array_equal(xform.vmap(_scaled(lax))(*ops),
                                  jax.vmap(_scaled(jax.lax))(*ops))
    np.testing.assert_array_equal(np.asarray(lax.scaled_dot(ops[0][0], ops[1][0]), np.float32),
                                  np.asarray(jax.lax.scaled_dot(ops[0][0], ops[1][0]), np.float32))
    ours = _composite_ops(xform.jit(_scaled(lax)).lower(*ops).as_text())
    theirs = _composite_ops(jax.jit(_scaled(jax.lax)).lower(*ops).as_text())
    assert ours == theirs and '"xla.scaled_dot"' in ours[0]


def test_scaled_dot_errors_match_jax():
    lhs, rhs, ls, rs = _mx_operands()
    bad = [dict(lhs_scale=ls[..., :1].repeat(64, -1)),      # subchannel of 1
           dict(lhs_scale=ls[:, :2]),                        # a kept dim differs
           dict(lhs_scale=ls[0])]                            # rank
    for kw in bad:
        with pytest.raises(TypeError) as want:
            jax.lax.scaled_dot(lhs, rhs, **kw)
        with pytest.raises(TypeError) as got:
            lax.scaled_dot(lhs, rhs, **kw)
        assert str(got.value) == str(want.value)
    with pytest.raises(TypeError, match="0-rank and 1-rank"):
        lax.scaled_dot(lhs[0, 0], rhs[0, :, 0])
    f = lambda x: lax.scaled_dot(x, rhs[0], preferred_element_type=np.float32).sum()  # noqa: E731
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'scaled_dot'"):
        xform.grad(f)(np.ones((4, 64), np.float32))
