"""JAX semantics the tutorials rely on (issue 15's list), each checked against real JAX."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xform
import xform.numpy as xnp
from xform.tree_util import Partial


def _close(got, want, rtol=1e-5, atol=1e-6):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g, w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# ---- 4: static out-of-bounds ints clamp (more in test_indexing.py) ----

def test_static_out_of_bounds_int_clamps():
    _close(xnp.arange(10)[11], jnp.arange(10)[11])
    _close(xnp.arange(10)[-11], jnp.arange(10)[-11])
    _close(xform.jit(lambda x: x[11])(xnp.arange(10)), jnp.arange(10)[11])


# ---- 6: complex: non-holomorphic functions built with x + y * 1j, allclose ----

def _cookbook_fun(m):
    def u(x, y):
        return 0.3 * x + 0.7 * y ** 2

    def v(x, y):
        return 0.2 * x * y + 0.9 * y

    def fun(z):
        x, y = m.real(z), m.imag(z)
        return u(x, y) + v(x, y) * 1j
    return fun


def test_non_holomorphic_jvp_vjp_and_allclose_on_complex():
    outs = []
    for api, m in ((xform, xnp), (jax, jnp)):
        fun = _cookbook_fun(m)
        z = 0.4 + 0.6j
        _, t = api.jvp(fun, (z,), (0.5 + 0.25j,))
        _, pull = api.vjp(fun, z)
        ct, = pull(0.3 + 0.8j)
        outs.append((t, ct, m.allclose(t, t * (1 + 1e-7)), m.isclose(t, ct),
                     m.isclose(m.array([complex(np.inf, 0), complex(np.nan, 1), 1j]),
                               m.array([complex(np.inf, 0), complex(np.nan, 1), 1j + 1e-3]),
                               equal_nan=True)))
    _close(*outs)


def test_jacobian_dtype_checks_match_jax():
    cases = [lambda api: api.jacfwd(lambda z: z * 2)(1 + 1j),
             lambda api: api.jacrev(lambda x: x * 1j)(1.0),
             lambda api: api.jacrev(lambda x: x.real, holomorphic=True)(1.0 + 0j),
             lambda api: api.jacfwd(lambda x: x.real, holomorphic=True)(1.0 + 0j)]
    for case in cases:
        with pytest.raises(TypeError) as want:
            case(jax)
        with pytest.raises(TypeError) as got:
            case(xform)
        assert str(got.value).split(".")[0] == str(want.value).split(".")[0]
    _close(xform.jacrev(lambda x: x * 1j, holomorphic=True)(1.0 + 0j),
           jax.jacrev(lambda x: x * 1j, holomorphic=True)(1.0 + 0j))


# ---- 7: runtime errors are xform's own JaxRuntimeError ----

def test_runtime_errors_are_xform_jax_runtime_error():
    assert issubclass(xform.errors.JaxRuntimeError, RuntimeError)
    with pytest.raises(jax.errors.JaxRuntimeError, match="RESOURCE_EXHAUSTED"):
        jnp.zeros((1 << 42,), "uint8").block_until_ready()
    with pytest.raises(xform.errors.JaxRuntimeError, match="RESOURCE_EXHAUSTED"):
        xnp.zeros((1 << 42,), "uint8").block_until_ready()
    with pytest.raises(xform.errors.JaxRuntimeError, match="RESOURCE_EXHAUSTED"):
        xform.jit(lambda x: xnp.broadcast_to(x, (1 << 42,)))(xnp.uint8(1)).block_until_ready()


# ---- 2: vjp's pullback is a pytree (Partial) ----

def test_vjp_pullback_is_a_pytree_through_jit():
    def f(x):
        return xnp.sin(x) * x, xnp.cos(x)

    x = np.arange(3.0, dtype=np.float32)
    ct = (np.ones(3, np.float32), np.full(3, 2.0, np.float32))
    _, pull = xform.vjp(f, x)
    assert isinstance(pull, Partial) and len(xform.tree_util.tree_leaves(pull)) > 0
    got_jit = xform.jit(lambda p, c: p(c))(pull, ct)
    made = xform.jit(lambda x: xform.vjp(f, x)[1])(x)  # returned from jit
    assert isinstance(made, Partial)
    _, jpull = jax.vjp(lambda x: (jnp.sin(x) * x, jnp.cos(x)), x)
    want = jpull(ct)
    _close(pull(ct), want)
    _close(got_jit, want)
    _close(made(ct), want)
    with pytest.raises(TypeError, match="Tree structure of cotangent input"):
        pull(ct[0])


# ---- 3: nested checkpoint, and control flow inside checkpoint, under grad ----

def _recursive_checkpoint(api, funs):
    if len(funs) == 1:
        return funs[0]
    if len(funs) == 2:
        return lambda x: funs[0](funs[1](x))
    f1 = _recursive_checkpoint(api, funs[:len(funs) // 2])
    f2 = _recursive_checkpoint(api, funs[len(funs) // 2:])
    return lambda x: f1(api.checkpoint(f2)(x))


def _checkpoint_cases(api, m):
    f = _recursive_checkpoint(api, [m.sin] * 8)
    g = api.checkpoint(lambda x: api.jit(lambda y: m.sin(y) * y)(x) * 2)
    c = api.checkpoint(lambda x: api.lax.cond(x > 0, m.sin, m.cos, x) * x)
    s = api.checkpoint(lambda x: api.lax.scan(lambda a, _: (m.sin(a) * x, a), x, None,
                                              length=3)[1].sum())
    return (f(3.0), api.grad(f)(3.0), api.jit(api.grad(f))(3.0), api.grad(api.grad(f))(3.0),
            api.vmap(api.grad(g))(m.arange(3.0)), api.grad(c)(1.0), api.grad(c)(-1.0),
            api.jit(api.grad(s))(1.0))


def test_nested_checkpoint_matches_jax():
    _close(_checkpoint_cases(xform, xnp), _checkpoint_cases(jax, jnp))


# ---- 1: custom_jvp / custom_vjp rules branch on values outside jit ----

def _custom_rules(api, m):
    @api.custom_jvp
    def f(x):
        if x > 0:
            return m.sin(x)
        return m.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        if x > 0:
            return f(x), 2.0 * m.cos(x) * t
        return f(x), -3.0 * m.sin(x) * t

    @api.custom_vjp
    def g(x, y):
        return x * y if x > 0 else x + y

    def g_fwd(x, y):
        return g(x, y), (x, y)

    def g_bwd(res, ct):
        x, y = res
        return (ct * y, ct * x) if x > 0 else (ct, 2 * ct)

    g.defvjp(g_fwd, g_bwd)
    return f, g


def test_custom_rules_use_python_control_flow_on_values():
    outs = []
    for api, m in ((xform, xnp), (jax, jnp)):
        f, g = _custom_rules(api, m)
        outs.append((api.grad(f)(1.0), api.grad(f)(-1.0), api.jvp(f, (1.0,), (1.0,)),
                     api.grad(api.grad(f))(1.0), api.vjp(f, 0.5)[1](1.0),
                     api.grad(g, (0, 1))(1.0, 2.0), api.grad(g, (0, 1))(-1.0, 2.0),
                     api.grad(lambda x: g(x, x) * f(x))(0.7)))
    _close(*outs)
    f, _ = _custom_rules(xform, xnp)
    with pytest.raises(xform.errors.TracerBoolConversionError):  # as JAX: traced under jit
        xform.jit(xform.grad(f))(1.0)
