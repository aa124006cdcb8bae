"""xform.experimental.jet against jax.experimental.jet (and, where JAX's jet fails, against
derivatives of nested jax.jvp)."""
import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import jet as jax_jet

import xform
import xform.numpy as jnp
from xform.experimental import jet as xjet

X = np.float32(0.7)
SERIES = (np.float32(1.0), np.float32(0.3), np.float32(-0.2))

UNARY = {  # name: (jax function, xform function)
    "sin": (jjnp.sin, jnp.sin), "cos": (jjnp.cos, jnp.cos), "exp": (jjnp.exp, jnp.exp),
    "log": (jjnp.log, jnp.log), "tanh": (jjnp.tanh, jnp.tanh), "sqrt": (jjnp.sqrt, jnp.sqrt),
    "sigmoid": (jax.nn.sigmoid, xform.nn.sigmoid), "cube": (lambda v: v ** 3, lambda v: v ** 3),
    "pow": (lambda v: v ** 2.5, lambda v: v ** 2.5),
    "recip": (lambda v: 1 / (1 + v), lambda v: 1 / (1 + v)),
    "erf": (jax.scipy.special.erf, xform.scipy.special.erf),
    "erfinv": (jax.scipy.special.erfinv, xform.scipy.special.erfinv),
    "atan2": (lambda v: jjnp.arctan2(v, 2 * v + 1), lambda v: jnp.arctan2(v, 2 * v + 1)),
    "sinh": (jjnp.sinh, jnp.sinh), "expm1": (jjnp.expm1, jnp.expm1),
    "log1p": (jjnp.log1p, jnp.log1p), "abs": (lambda v: jjnp.abs(-v), lambda v: jnp.abs(-v)),
    "max": (lambda v: jjnp.maximum(v, 0.5), lambda v: jnp.maximum(v, 0.5)),
    "rsqrt": (jax.lax.rsqrt, xform.lax.rsqrt), "gelu": (jax.nn.gelu, xform.nn.gelu),
    "mix": (lambda v: jjnp.sin(v) * jjnp.exp(v) / jjnp.cos(v) - jjnp.arcsinh(v),
            lambda v: jnp.sin(v) * jnp.exp(v) / jnp.cos(v) - jnp.arcsinh(v)),
}


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_jax(name):
    fj, fx = UNARY[name]
    (p, terms), (q, want) = xjet.jet(fx, (X,), (SERIES,)), jax_jet.jet(fj, (X,), (SERIES,))
    close(p, q)
    for t, w in zip(terms, want, strict=True):
        close(t, w)


def _nested_jvp_derivatives(f, x, v, order):
    """d^k/dt^k f(x + t v) at t = 0, k = 1..order, by nesting jax.jvp."""
    g = lambda t: f(x + t * v)
    out = []
    for _ in range(order):
        g = (lambda h: lambda t: jax.jvp(h, (t,), (jjnp.ones_like(t),))[1])(g)
        out.append(g(np.float32(0.0)))
    return out


@pytest.mark.parametrize("fx, fj", [(xform.nn.softplus, jax.nn.softplus),
                                    (xform.nn.relu, jax.nn.relu),
                                    (xform.nn.silu, jax.nn.silu)])
def test_custom_jvp_functions_are_traced_through(fx, fj):
    # JAX's own jet raises UnexpectedTracerError on these custom_jvp functions.
    _, terms = xjet.jet(fx, (X,), ((np.float32(1), np.float32(0), np.float32(0)),))
    for t, w in zip(terms, _nested_jvp_derivatives(fj, X, np.float32(1), 3), strict=True):
        close(t, w)


def test_arrays_structure_and_unscaled_terms():
    rng = np.random.RandomState(0)
    w, v = rng.randn(3, 4).astype(np.float32), rng.randn(4).astype(np.float32)

    def f(lib):
        return lambda z: {"h": lib.tanh(w @ z), "s": (lib.cumprod(z[:3]) * z[1:]).sum(),
                          "m": lib.max(z), "g": z[lib.array([2, 0, 2])] ** 2}
    for scaled in (True, False):
        got = xjet.jet(f(jnp), (v,), ((v, 0.5 * v),), factorial_scaled=scaled)
        want = jax_jet.jet(f(jjnp), (v,), ((v, 0.5 * v),), factorial_scaled=scaled)
        for k in want[0]:
            close(got[0][k], want[0][k])
            for t, u in zip(got[1][k], want[1][k], strict=True):
                close(t, u)
    # an output that does not depend on the input gets zero terms
    p, terms = xjet.jet(lambda z: jnp.ones(2) * 3, (v,), ((v, v),))
    assert [np.asarray(t).tolist() for t in terms] == [[0, 0], [0, 0]]


def test_composes_with_jit_vmap_grad():
    a = np.linspace(0.1, 1.0, 3, dtype=np.float32)
    f = lambda x: xjet.jet(jnp.sin, (x,), ((1.0, 1.0),))[1][1]  # -sin x + cos x
    close(xform.jit(f)(a), -np.sin(a) + np.cos(a))
    close(xform.vmap(f)(a), -np.sin(a) + np.cos(a))
    close(xform.grad(f)(a[0]), -np.cos(a[0]) - np.sin(a[0]))
    vm = xform.custom_batching.custom_vmap(jnp.sin)
    vm.def_vmap(lambda n, batched, x: (jnp.sin(x), batched[0]))
    close(xjet.jet(vm, (X,), ((1.0, 0.0),))[1][1], -np.sin(X))
    inner = xform.jit(lambda z: jnp.sin(z) ** 2)  # a jit call inside is traced through
    close(xjet.jet(inner, (X,), ((1.0, 0.0),))[1][1],
          jax_jet.jet(lambda z: jjnp.sin(z) ** 2, (X,), ((1.0, 0.0),))[1][1])


def test_errors():
    with pytest.raises(ValueError, match="inconsistent lengths"):
        xjet.jet(jnp.sin, (X, X), ((1.0,), (1.0, 2.0)))
    with pytest.raises(ValueError, match="primal value at position 0 is not an array"):
        xjet.jet(jnp.sin, ([X],), ((1.0,),))
    with pytest.raises(ValueError, match="term 0 for argument 0 is not an array"):
        xjet.jet(jnp.sin, (X,), (([1.0],),))
    with pytest.raises(NotImplementedError, match="Jet rule for 'sort' not implemented"):
        xjet.jet(jnp.sort, (np.ones(3, np.float32),), ((np.ones(3, np.float32),),))
