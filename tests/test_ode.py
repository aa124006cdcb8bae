"""xform.experimental.ode.odeint against jax.experimental.ode at run time: pytree state
with args and a time-dependent field, gradients (adjoint) in every argument, a closure
over a differentiated array, jit/vmap, and the argument errors."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental.ode import odeint as jax_odeint

import xform
import xform.numpy as jnp
from xform.experimental.ode import odeint

TS = np.linspace(0, 3, 7).astype(np.float32)
Y0 = {"p": np.float32(1.0), "v": np.float32(0.0)}


def pendulum(np_):
    return lambda y, t, a, b: {"p": y["v"], "v": -a * np_.sin(y["p"]) - b * y["v"] + 0.1 * t}


def leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def test_values_and_adjoint_gradients_match_jax():
    ours = odeint(pendulum(jnp), Y0, jnp.asarray(TS), 2.0, 0.3)
    theirs = jax_odeint(pendulum(jjnp), Y0, jjnp.asarray(TS), 2.0, 0.3)
    for a, b in zip(leaves(ours), leaves(theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)

    def loss(lib, np_, solve):
        return lib.grad(lambda y0, ts, a, b: (solve(pendulum(np_), y0, ts, a, b, rtol=1e-6,
                                                    atol=1e-6)["p"] ** 2).sum(),
                        argnums=(0, 1, 2, 3))
    ours = loss(xform, jnp, odeint)(Y0, jnp.asarray(TS), 2.0, 0.3)
    theirs = loss(jax, jjnp, jax_odeint)(Y0, jjnp.asarray(TS), 2.0, 0.3)
    for a, b in zip(leaves(ours), leaves(theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_closure_gradient_jit_and_vmap():
    w = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32) * 0.3
    ts = np.linspace(0, 1, 4).astype(np.float32)
    ours = xform.grad(lambda w: odeint(lambda y, t: jnp.tanh(w @ y), jnp.ones(3),
                                       jnp.asarray(ts)).sum())(jnp.asarray(w))
    theirs = jax.grad(lambda w: jax_odeint(lambda y, t: jjnp.tanh(w @ y), jjnp.ones(3),
                                           jjnp.asarray(ts)).sum())(jjnp.asarray(w))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)
    decay = lambda y, t: -y  # noqa: E731
    got = xform.jit(xform.vmap(lambda y: odeint(decay, y, jnp.array([0., 1., 2.]))))(
        jnp.array([1., 2.]))
    want = jax.vmap(lambda y: jax_odeint(decay, y, jjnp.array([0., 1., 2.])))(
        jjnp.array([1., 2.]))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("case", ["int_times", "string_arg"])
def test_errors_match_jax(case):
    def call(np_, solve):
        if case == "int_times":
            return solve(lambda y, t: -y, 1., np_.array([0, 1]))
        return solve(lambda y, t, s: -y, 1., np_.array([0., 1.]), "s")
    with pytest.raises(TypeError) as want:
        call(jjnp, jax_odeint)
    with pytest.raises(TypeError) as got:
        call(jnp, odeint)
    assert str(got.value) == str(want.value)
