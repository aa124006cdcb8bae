"""Transformations composed, against jax: every ordering of jit/vmap/grad on an MLP
loss, Jacobians and Hessians over pytrees, higher-order grad, the differentiation API's
options (has_aux, argnums, allow_int), linearize, make_jaxpr text, jit's static
arguments and cache, and the ahead-of-time stages (lower, compile, eval_shape)."""
import functools

import jax
import numpy as np
import pytest
from jax import lax as jlax

import xform
from xform import lax as xlax

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
FLOAT0 = np.dtype([("float0", np.void, 0)])
TOL = {F32: 2e-5, F64: 1e-12}
BATCH, D_IN, D_HID, D_OUT = 5, 3, 4, 2


def assert_tree_close(actual, expected, what="", tol=None):
    """Same pytree structure (jax's view of xform's containers), dtypes and values."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree, f"{what}: tree {a_tree} but jax gives {e_tree}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        a, e = np.asarray(a), np.asarray(e)
        assert (a.dtype, a.shape) == (e.dtype, e.shape), (
            f"{what} leaf {i}: {a.dtype}{a.shape} but jax gives {e.dtype}{e.shape}")
        if a.dtype == FLOAT0:
            continue
        t = tol if tol is not None else TOL.get(a.dtype, 0)
        np.testing.assert_allclose(a, e, rtol=t, atol=t, err_msg=f"{what} leaf {i}")


# ---- an MLP, written once over either library's lax ----

def _mm(L, x, w):
    """``x @ w`` for a vector or matrix ``x``."""
    return L.dot_general(x, w, (((x.ndim - 1,), (0,)), ((), ())))


def _bias(L, h, b):
    return L.add(h, L.broadcast_in_dim(b, h.shape, (h.ndim - 1,)))


def mlp_loss(L, params, x, y):
    """Squared error of a 2-layer tanh MLP on one example (x: [D_IN], y: [D_OUT])."""
    h = L.tanh(_bias(L, _mm(L, x, params["w1"]), params["b1"]))
    out = _bias(L, _mm(L, h, params["w2"]), params["b2"])
    d = L.sub(out, y)
    return L.reduce_sum(L.mul(d, d), (0,))


def batch_loss(L, vmap, loss, params, xs, ys):
    """Mean of the per-example ``loss`` over the batch, vectorized with ``vmap``."""
    losses = vmap(loss, in_axes=(None, 0, 0))(params, xs, ys)
    return L.mul(L.reduce_sum(losses, (0,)), 1.0 / xs.shape[0])


def make_data(dtype=F32, seed=0):
    rng = np.random.RandomState(seed)
    params = {"w1": rng.randn(D_IN, D_HID), "b1": rng.randn(D_HID) * 0.1,
              "w2": rng.randn(D_HID, D_OUT), "b2": rng.randn(D_OUT) * 0.1}
    params = {k: v.astype(dtype) for k, v in params.items()}
    return params, rng.randn(BATCH, D_IN).astype(dtype), rng.randn(BATCH, D_OUT).astype(dtype)


X_LOSS = functools.partial(mlp_loss, xlax)
J_LOSS = functools.partial(mlp_loss, jlax)


def _orderings(lib, L, loss):
    """The six nestings of jit, vmap and grad; all compute per-example or mean grads."""
    jit, vmap, grad = lib.jit, lib.vmap, lib.grad
    axes = (None, 0, 0)
    mean = functools.partial(batch_loss, L, vmap)
    return {
        "jit(vmap(grad))": jit(vmap(grad(loss), in_axes=axes)),
        "vmap(jit(grad))": vmap(jit(grad(loss)), in_axes=axes),
        "vmap(grad(jit))": vmap(grad(jit(loss)), in_axes=axes),
        "jit(grad(vmap))": jit(grad(functools.partial(mean, loss))),
        "grad(jit(vmap))": grad(jit(functools.partial(mean, loss))),
        "grad(vmap(jit))": grad(functools.partial(mean, jit(loss))),
    }


ORDERINGS = list(_orderings(xform, xlax, X_LOSS))


@pytest.mark.parametrize("order", ORDERINGS)
def test_jit_vmap_grad_orderings_match_jax(order):
    params, xs, ys = make_data()
    got = _orderings(xform, xlax, X_LOSS)[order](params, xs, ys)
    expected = _orderings(jax, jlax, J_LOSS)[order](params, xs, ys)
    assert_tree_close(got, expected, order)
    # Per-example gradients average to the batch gradient.
    if "vmap(" in order.split("grad")[0]:
        mean = {k: np.mean(np.asarray(v), 0) for k, v in got.items()}
        full = jax.grad(functools.partial(batch_loss, jlax, jax.vmap, J_LOSS))(
            params, xs, ys)
        assert_tree_close(mean, {k: np.asarray(v) for k, v in full.items()}, order, 1e-5)


def test_grad_of_batch_loss_changes_with_data():
    # Guard against a trivially-passing comparison (e.g. all-zero gradients).
    params, xs, ys = make_data()
    g = xform.grad(functools.partial(batch_loss, xlax, xform.vmap, X_LOSS))(params, xs, ys)
    assert all(np.abs(np.asarray(v)).max() > 1e-3 for v in g.values())


# ---- Jacobians and Hessians over pytrees ----

def layer(L, params, x):
    """A pytree-in, pytree-out function: {'h': tanh(x W1 + b1), 'sq': sum(h * h)}."""
    h = L.tanh(_bias(L, _mm(L, x, params["w1"]), params["b1"]))
    return {"h": h, "sq": L.reduce_sum(L.mul(h, h), (0,))}


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1,)], ids=str)
def test_jacobians_match_jax(jac, argnums):
    params, xs, _ = make_data()
    params = {"w1": params["w1"], "b1": params["b1"]}
    got = getattr(xform, jac)(functools.partial(layer, xlax), argnums)(params, xs[0])
    expected = getattr(jax, jac)(functools.partial(layer, jlax), argnums)(params, xs[0])
    assert_tree_close(got, expected, f"{jac} argnums={argnums}")


def test_jacfwd_and_jacrev_agree_on_matrix_input():
    x = np.random.RandomState(1).randn(3, 2).astype(np.float32)
    f = lambda x: xlax.sin(xlax.transpose(x, (1, 0)))  # noqa: E731
    assert_tree_close(xform.jacfwd(f)(x), xform.jacrev(f)(x), "jacfwd vs jacrev")
    assert_tree_close(xform.jacfwd(f)(x),
                      jax.jacfwd(lambda x: jlax.sin(jlax.transpose(x, (1, 0))))(x), "jacfwd")


@pytest.mark.parametrize("argnums", [0, (0, 2)], ids=str)
def test_hessian_matches_jax(argnums):
    # Under jit: one compile instead of hundreds of eager one-op programs (on both sides).
    params, xs, ys = make_data()
    got = xform.jit(xform.hessian(X_LOSS, argnums))(params, xs[0], ys[0])
    expected = jax.jit(jax.hessian(J_LOSS, argnums))(params, xs[0], ys[0])
    assert_tree_close(got, expected, f"hessian argnums={argnums}", 1e-4)


def test_hessian_eager_is_symmetric_in_x64(x64):
    params, xs, ys = make_data(F64)
    h = xform.hessian(X_LOSS, 1)(params, xs[0], ys[0])
    assert h.dtype == F64 and h.shape == (D_IN, D_IN)
    np.testing.assert_allclose(h, np.asarray(h).T, rtol=1e-12, atol=1e-12)
    assert_tree_close(h, jax.jit(jax.hessian(J_LOSS, 1))(params, xs[0], ys[0]), "hessian")


# ---- higher order ----

def _cubic_sin(L, x):
    return L.mul(L.sin(x), L.integer_pow(x, 3))


@pytest.mark.parametrize("x", [0.7, -1.3, 2.0])
def test_grad_of_grad_of_grad(x):
    g3 = xform.grad(xform.grad(xform.grad(functools.partial(_cubic_sin, xlax))))
    j3 = jax.grad(jax.grad(jax.grad(functools.partial(_cubic_sin, jlax))))
    x = np.float32(x)
    assert_tree_close(g3(x), j3(x), "grad^3", 1e-4)
    # Analytically: d^3/dx^3 [x^3 sin x] = (6 - 9x^2) sin x + (18x - x^3) cos x.
    exact = (6 - 9 * x ** 2) * np.sin(x) + (18 * x - x ** 3) * np.cos(x)
    np.testing.assert_allclose(g3(x), exact, rtol=1e-4)


def test_jit_of_grad_of_grad_and_vmap():
    f = functools.partial(_cubic_sin, xlax)
    xs = np.linspace(-2, 2, 7).astype(np.float32)
    got = xform.jit(xform.vmap(xform.grad(xform.grad(f))))(xs)
    expected = jax.vmap(jax.grad(jax.grad(functools.partial(_cubic_sin, jlax))))(xs)
    assert_tree_close(got, expected, "jit(vmap(grad(grad)))", 1e-4)


# ---- value_and_grad, vjp, linearize options ----

def _aux_loss(L, params, x, y):
    loss = mlp_loss(L, params, x, y)
    return loss, {"loss": loss, "twice": L.mul(loss, 2.0)}


def test_value_and_grad_has_aux_and_argnums():
    params, xs, ys = make_data()
    args = (params, xs[0], ys[0])
    (v, aux), g = xform.value_and_grad(functools.partial(_aux_loss, xlax), argnums=(0, 1),
                                       has_aux=True)(*args)
    (v_j, aux_j), g_j = jax.value_and_grad(functools.partial(_aux_loss, jlax),
                                           argnums=(0, 1), has_aux=True)(*args)
    assert_tree_close(v, v_j, "value")
    assert_tree_close(aux, aux_j, "aux")
    assert isinstance(g, tuple) and len(g) == 2
    assert_tree_close(g, g_j, "grads")
    g_only, aux2 = xform.grad(functools.partial(_aux_loss, xlax), argnums=2,
                              has_aux=True)(*args)
    assert_tree_close(g_only, jax.grad(functools.partial(_aux_loss, jlax), argnums=2,
                                       has_aux=True)(*args)[0], "grad argnums=2")
    assert_tree_close(aux2, aux_j, "aux from grad")


def test_grad_allow_int_gives_float0():
    def f(L, x, n):
        return L.reduce_sum(L.mul(L.sin(x), L.convert_element_type(n, np.float32)), (0,))
    x, n = np.array([0.5, 1.5], np.float32), np.array([2, 3], np.int32)
    g = xform.grad(functools.partial(f, xlax), argnums=(0, 1), allow_int=True)(x, n)
    g_j = jax.grad(functools.partial(f, jlax), argnums=(0, 1), allow_int=True)(x, n)
    assert_tree_close(g, g_j, "allow_int")
    assert np.asarray(g[1]).dtype == FLOAT0
    with pytest.raises(TypeError, match="int32"):
        xform.grad(functools.partial(f, xlax), argnums=1)(x, n)


def test_vjp_has_aux():
    params, xs, ys = make_data()
    out, f_vjp, aux = xform.vjp(functools.partial(_aux_loss, xlax), params, xs[0], ys[0],
                                has_aux=True)
    out_j, j_vjp, aux_j = jax.vjp(functools.partial(_aux_loss, jlax), params, xs[0], ys[0],
                                  has_aux=True)
    assert_tree_close((out, aux), (out_j, aux_j), "vjp primal/aux")
    ct = np.float32(0.75)
    assert_tree_close(f_vjp(ct), j_vjp(ct), "vjp cotangents")


def test_linearize_matches_jvp_and_jax():
    params, xs, ys = make_data()
    f_x = lambda p: X_LOSS(p, xs[0], ys[0])  # noqa: E731
    f_j = lambda p: J_LOSS(p, xs[0], ys[0])  # noqa: E731
    rng = np.random.RandomState(3)
    t = {k: rng.randn(*v.shape).astype(np.float32) for k, v in params.items()}
    y, f_lin = xform.linearize(f_x, params)
    y_j, j_lin = jax.linearize(f_j, params)
    assert_tree_close(y, y_j, "linearize primal")
    assert_tree_close(f_lin(t), j_lin(t), "linearize tangent")
    assert_tree_close(f_lin(t), xform.jvp(f_x, (params,), (t,))[1], "linearize vs jvp")
    # Linear in the tangent: f_lin(2t) == 2 f_lin(t).
    t2 = {k: 2 * v for k, v in t.items()}
    np.testing.assert_allclose(f_lin(t2), 2 * np.asarray(f_lin(t)), rtol=1e-6)


# ---- make_jaxpr ----

def test_make_jaxpr_text():
    def f(x, y):
        z = xlax.mul(xlax.sin(x), y)
        w = xlax.dot_general(z, x, (((0,), (0,)), ((), ())))
        return xlax.reduce_sum(xlax.max(xlax.mul(z, w), 0.5), (0,))
    x = np.ones(3, np.float32)
    expected = """\
{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = sin a
    d:f32[3] = mul c b
    e:f32[] = dot_general[dimension_numbers=(((0,), (0,)), ((), ())) precision=None preferred_element_type=None] d a
    f:f32[3] = mul d e
    g:f32[3] = max f 0.5:f32[]
    h:f32[] = reduce_sum[axes=(0,)] g
  in (h,) }"""
    assert str(xform.make_jaxpr(f)(x, x)) == expected


def test_make_jaxpr_of_grad_is_a_jaxpr_of_primitives():
    jaxpr = xform.make_jaxpr(xform.grad(lambda x: xlax.reduce_sum(xlax.sin(x), (0,))))(
        np.ones(3, np.float32))
    names = [str(e.primitive) for e in jaxpr.jaxpr.eqns]
    assert "cos" in names, names
    assert str(jaxpr).startswith("{ lambda ; a:f32[3]. let")


# ---- jit: static arguments, retracing, cache hits ----

def test_jit_static_argnums_retraces_only_on_new_static_values():
    traces = []

    def f(x, n):
        traces.append(n)
        return xlax.integer_pow(x, n)

    g = xform.jit(f, static_argnums=1)
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(g(x, 2), x ** 2)
    np.testing.assert_array_equal(g(x, 2), x ** 2)          # cache hit
    assert traces == [2]
    np.testing.assert_array_equal(g(x, 3), x ** 3)          # new static value: retrace
    assert traces == [2, 3]
    g(x + 1, 3)                                             # new values, same avals: hit
    assert traces == [2, 3]
    g(np.arange(4, dtype=np.float32), 3)                    # new shape: retrace
    assert traces == [2, 3, 3]
    g(x, 2)                                                 # earlier entry still cached
    assert traces == [2, 3, 3]


def test_jit_static_argnames():
    traces = []

    def f(x, *, axis, scale=1.0):
        traces.append((axis, scale))
        return xlax.mul(xlax.reduce_sum(x, (axis,)), scale)

    g = xform.jit(f, static_argnames=("axis", "scale"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(g(x, axis=0), x.sum(0))
    np.testing.assert_array_equal(g(x, axis=0), x.sum(0))
    np.testing.assert_array_equal(g(x, axis=1), x.sum(1))
    np.testing.assert_array_equal(g(x, axis=1, scale=2.0), 2 * x.sum(1))
    assert traces == [(0, 1.0), (1, 1.0), (1, 2.0)]


def test_jit_unhashable_static_arg_error():
    g = xform.jit(lambda x, dims: xlax.reduce_sum(x, dims), static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        g(np.ones((2, 2), np.float32), [0])


def test_jit_cache_hit_under_grad_and_vmap():
    traces = []

    @xform.jit
    def f(x):
        traces.append(1)
        return xlax.reduce_sum(xlax.sin(x), (0,))

    x = np.arange(3, dtype=np.float32)
    f(x)
    f(x)
    assert len(traces) == 1
    g = xform.grad(f)(x)
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-6)
    v = xform.vmap(f)(np.stack([x, x + 1]))
    np.testing.assert_allclose(v, [np.sin(x).sum(), np.sin(x + 1).sum()], rtol=1e-6)


# ---- ahead-of-time stages and eval_shape ----

def test_lower_as_text_and_compile():
    f = xform.jit(lambda x: xlax.mul(xlax.sin(x), 2.0))
    x = np.arange(4, dtype=np.float32)
    lowered = f.lower(x)
    text = lowered.as_text()
    assert "stablehlo" in text and "func.func public @main" in text
    assert "stablehlo.sine" in text and "tensor<4xf32>" in text
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(x), 2 * np.sin(x), rtol=1e-6)
    with pytest.raises(TypeError, match="compiled"):
        compiled(np.arange(5, dtype=np.float32))


def test_eval_shape_returns_shape_dtype_structs():
    params, xs, ys = make_data()
    grad_batch = xform.grad(functools.partial(batch_loss, xlax, xform.vmap, X_LOSS))
    out = xform.eval_shape(grad_batch, params, xs, ys)
    for k, v in out.items():
        assert isinstance(v, xform.ShapeDtypeStruct), type(v)
        assert (v.shape, v.dtype) == (params[k].shape, params[k].dtype)
    spec = xform.ShapeDtypeStruct((7, D_IN), np.float32)
    out = xform.eval_shape(lambda x: xlax.argmax(x, 1, np.int32), spec)
    expected = jax.eval_shape(lambda x: jlax.argmax(x, 1, np.int32),
                              jax.ShapeDtypeStruct((7, D_IN), np.float32))
    assert (out.shape, out.dtype) == (expected.shape, expected.dtype)


# ---- soundness regressions (issue 8) ----

def test_pad_gradient_wrt_padding_value_alone():
    # bug 2: deflinear's transpose saw the operand's zero tangent as a known value.
    g = xform.grad(lambda c: xlax.pad(np.ones(2, np.float32), c, [(1, 1, 0)]).sum())(3.0)
    assert float(g) == 2.0
    g = xform.grad(lambda c: xlax.pad(np.ones(3, np.float32), c, [(1, 2, 1)]).sum())(3.0)
    assert float(g) == 5.0   # 7 outputs, 2 of them operand (NB: JAX 0.10.2 crashes here)


def test_has_aux_keeps_outer_transformation_tracers():
    # bug 3: only the inner trace's tracers are stripped from aux.
    def f(x):
        return x ** 2, x ** 3

    def aux_of_grad(x):
        return xform.grad(f, has_aux=True)(x)[1]
    y, t = xform.jvp(aux_of_grad, (2.0,), (1.0,))
    assert (float(y), float(t)) == (8.0, 12.0)
    assert float(xform.grad(aux_of_grad)(2.0)) == 12.0
    _, t = xform.jvp(lambda x: xform.value_and_grad(f, has_aux=True)(x)[0][1], (2.0,), (1.0,))
    assert float(t) == 12.0
    _, t = xform.jvp(lambda x: xform.vjp(f, x, has_aux=True)[2], (2.0,), (1.0,))
    assert float(t) == 12.0


def test_integer_primals_get_symbolic_zero_tangents():
    # bug 6: an integer primal's float0 tangent was materialized and fed to mul.
    def f(x, n):
        return x * (n * 2)
    y, f_vjp = xform.vjp(f, 1.0, 3)
    ct_x, ct_n = f_vjp(1.0)
    _, j_vjp = jax.vjp(f, 1.0, 3)
    ct_xj, ct_nj = j_vjp(1.0)
    assert float(y) == 6.0 and float(ct_x) == float(ct_xj) == 6.0
    assert ct_n.dtype == ct_nj.dtype == jax.dtypes.float0 and ct_n.shape == ()
    float0 = np.zeros((), jax.dtypes.float0)
    y, f_lin = xform.linearize(f, 1.0, 3)
    assert float(f_lin(1.0, float0)) == 6.0
    assert float(xform.jvp(f, (1.0, 3), (1.0, float0))[1]) == 6.0
    g = xform.grad(f, argnums=(0, 1), allow_int=True)(1.0, 3)
    assert float(g[0]) == 6.0 and g[1].dtype == jax.dtypes.float0
