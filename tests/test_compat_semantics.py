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
    for p in (pull, jpull):   # (a ValueError, as JAX's)
        with pytest.raises(ValueError, match="unexpected tree structure"):
            p(ct[0])


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


# ---- 5: custom pytree nodes with unhashable aux data as jit arguments ----

class _Node:
    def __init__(self, value, meta):
        self.value, self.meta = value, meta


for _api in (xform, jax):
    _api.tree_util.register_pytree_node(_Node, lambda n: ((n.value,), n.meta),
                                        lambda meta, kids: _Node(kids[0], meta))


def test_unhashable_aux_data_as_jit_argument():
    counts = {}

    def f(n, api):
        counts[api] = counts.get(api, 0) + 1
        return n.value * n.meta["scale"]
    outs = {}
    for api in (xform, jax):
        g = api.jit(lambda n, api=api: f(n, api))
        outs[api.__name__] = [g(_Node(np.float32(2.0), {"scale": s})) for s in (3.0, 3.0, 4.0)]
    _close(outs["xform"], outs["jax"])
    assert counts[xform] == counts[jax] == 2  # equal aux data (a dict) hits the cache


# ---- 9: ShapeDtypeStruct.like, xform.experimental ----

def test_shape_dtype_struct_like_and_update():
    for x, jx in ((np.zeros((2, 3), np.int32),) * 2, (1.0, 1.0), (xnp.ones(3), jnp.ones(3))):
        got, want = xform.ShapeDtypeStruct.like(x), jax.ShapeDtypeStruct.like(jx)
        assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype,
                                                         want.weak_type)
    s = xform.ShapeDtypeStruct((2,), np.float32).update(shape=(4,))
    assert (s.shape, s.dtype) == ((4,), np.float32)


def test_io_callback_effect_under_jit_and_vmap():
    from xform.experimental import io_callback
    log = []

    def record(x):
        log.append(np.asarray(x).copy())
        return np.asarray(x * 2, np.float32)

    f = xform.jit(lambda x: (io_callback(record, xform.ShapeDtypeStruct.like(x), x), x + 1)[1])
    _close(f(xnp.ones(2)), np.full(2, 2.0, np.float32))  # result unused: still runs
    f(xnp.ones(2))
    assert len(log) == 2
    out = xform.vmap(lambda x: io_callback(record, xform.ShapeDtypeStruct((), np.float32),
                                           x))(xnp.arange(3.0))
    _close(out, np.arange(3.0, dtype=np.float32) * 2)
    assert len(log) == 5
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        xform.vmap(lambda x: io_callback(record, xform.ShapeDtypeStruct((), np.float32), x,
                                         ordered=True))(xnp.arange(3.0))
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        xform.grad(lambda x: io_callback(record, xform.ShapeDtypeStruct((), np.float32), x))(1.)


def test_experimental_x64_context_managers_and_shard_map():
    from xform.experimental import disable_x64, enable_x64
    from xform.experimental.shard_map import shard_map
    assert shard_map is xform.shard_map
    before = xform.config.jax_enable_x64
    with enable_x64():
        assert xnp.arange(3.0).dtype == np.float64
        with disable_x64():
            assert xnp.arange(3.0).dtype == np.float32
    assert xform.config.jax_enable_x64 == before
