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
