"""custom_jvp / custom_vjp / closure_convert vs real JAX: values, custom rules actually
used under every ordering of jit/vmap/grad, Jacobians, and error messages."""
import functools

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform.test_util import check_grads


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def same(a, b, tol=1e-5, weak=True):
    """Values, dtypes and (if ``weak``) weak types equal to jax's."""
    close(a, b, tol)
    assert np.asarray(a).dtype == np.asarray(b).dtype
    if weak:
        assert getattr(a, "weak_type", False) == getattr(b, "weak_type", False)


def make_log1pexp(lib, np_):
    """JAX's docs example: a numerically stable gradient for log(1 + exp(x))."""
    @lib.custom_jvp
    def log1pexp(x):
        return np_.log(1. + np_.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        return log1pexp(x), x_dot * (1. - 1. / (1. + np_.exp(x)))
    return log1pexp


xf_log1pexp = make_log1pexp(xform, jnp)
jx_log1pexp = make_log1pexp(jax, jjnp)


def test_log1pexp_stable_grad_at_extreme_inputs():
    naive = xform.grad(lambda x: jnp.log(1. + jnp.exp(x)))(100.)
    assert np.isnan(np.asarray(naive))
    for x in (100., -100., 0., 3.):
        g = xform.grad(xf_log1pexp)(x)
        assert np.isfinite(np.asarray(g))
        same(g, jax.grad(jx_log1pexp)(x))
        same(xf_log1pexp(x), jx_log1pexp(x), weak=True)


@pytest.mark.parametrize("name,transform", [
    ("grad", lambda T, f: T.grad(f)),
    ("jit_grad", lambda T, f: T.jit(T.grad(f))),
    ("grad_jit", lambda T, f: T.grad(T.jit(f))),
    ("vmap_grad", lambda T, f: T.vmap(T.grad(f))),
    ("grad_vmap_sum", lambda T, f: T.grad(lambda x: T.vmap(f)(x).sum())),
    ("jit_vmap_grad", lambda T, f: T.jit(T.vmap(T.grad(f)))),
    ("vmap_jit_grad", lambda T, f: T.vmap(T.jit(T.grad(f)))),
    ("jacfwd", lambda T, f: T.jacfwd(T.vmap(f))),
    ("jacrev", lambda T, f: T.jacrev(T.vmap(f))),
    ("hessian", lambda T, f: T.vmap(T.hessian(f))),
    ("jvp", lambda T, f: lambda x: T.jvp(T.vmap(f), (x,), (x * 0 + 1,))[1]),
    ("vjp", lambda T, f: lambda x: T.vjp(T.vmap(f), x)[1](x)[0]),
])
def test_custom_jvp_every_ordering(name, transform):
    x = np.array([-100., -1., 0., 2., 100.], np.float32)
    if name in ("grad", "jit_grad", "grad_jit"):
        for xi in x:
            same(transform(xform, xf_log1pexp)(float(xi)), transform(jax, jx_log1pexp)(float(xi)))
    else:
        close(transform(xform, xf_log1pexp)(x), transform(jax, jx_log1pexp)(x))


def make_wrong(lib, np_):
    """A deliberately wrong rule (d sin = 3 dx): proves the custom rule is used."""
    @lib.custom_jvp
    def f(x, y):
        return np_.sin(x) * y
    f.defjvp(lambda p, t: (f(*p), 3. * t[0] * p[1] + t[1]))
    return f


def test_custom_jvp_rule_is_used_everywhere():
    xf, jf = make_wrong(xform, jnp), make_wrong(jax, jjnp)
    x, y = np.float32(0.5), np.float32(2.)
    for T, f in ((xform, xf), (jax, jf)):
        assert np.allclose(T.grad(f)(x, y), 6.)
        assert np.allclose(T.grad(T.jit(f), argnums=1)(x, y), 1.)
        assert np.allclose(T.jacfwd(f)(x, y), 6.)
    same(xform.jit(xform.grad(xf, argnums=(0, 1)))(x, y)[1],
         jax.jit(jax.grad(jf, argnums=(0, 1)))(x, y)[1])
    assert xform.make_jaxpr(xf)(x, y).eqns[0].primitive.name == "custom_jvp_call"


def test_defjvps_pytrees_and_kwargs():
    def build(lib, np_):
        @lib.custom_jvp
        def f(a, b):
            return {"s": np_.sin(a["x"]) * b, "c": np_.cos(a["x"])}
        f.defjvps(lambda ta, out, a, b: {"s": np_.cos(a["x"]) * ta["x"] * b,
                                         "c": -np_.sin(a["x"]) * ta["x"]},
                  lambda tb, out, a, b: {"s": np_.sin(a["x"]) * tb,
                                         "c": np_.zeros_like(out["c"])})
        return lambda x, b: (lambda o: o["s"] + 2 * o["c"])(f({"x": x}, b=b))
    xf, jf = build(xform, jnp), build(jax, jjnp)
    for argnums in (0, 1):
        same(xform.grad(xf, argnums)(1.5, 2.), jax.grad(jf, argnums)(1.5, 2.))
    check_grads(xf, (1.5, 2.), order=2, modes=("fwd", "rev"))


def test_custom_jvp_nondiff_argnums_with_callable_and_tracer():
    def build(lib, np_):
        @functools.partial(lib.custom_jvp, nondiff_argnums=(0, 2))
        def app(fn, x, scale):
            return fn(x) * scale

        @app.defjvp
        def app_jvp(fn, scale, primals, tangents):
            x, = primals
            return app(fn, x, scale), 10. * tangents[0] * scale
        return app
    xf, jf = build(xform, jnp), build(jax, jjnp)
    for T, f, np_ in ((xform, xf, jnp), (jax, jf, jjnp)):
        g = T.grad(lambda x, s: f(np_.sin, x, s))(1., 2.)
        assert np.allclose(g, 20.)
    xs = np.array([1., 2., 3.], np.float32)
    close(xform.vmap(xform.grad(lambda x, s: xf(jnp.sin, x, s)))(xs, xs),
          jax.vmap(jax.grad(lambda x, s: jf(jjnp.sin, x, s)))(xs, xs))
    close(xform.jit(xform.vmap(xform.grad(lambda x, s: xf(jnp.sin, x, s)), (0, None)))(xs, 2.),
          10. * 2. * np.ones(3))


def test_custom_jvp_rule_output_errors():
    @xform.custom_jvp
    def f(x):
        return x * 2.
    f.defjvp(lambda p, t: (p[0] * 2., t[0].astype(jnp.int32)))
    with pytest.raises(TypeError, match=r"Custom JVP rule must produce primal and tangent "
                       r"outputs with corresponding shapes and dtypes. Expected f32\[\] "
                       r"\(tangent type of f32\[\]\) but got i32\[\]"):
        xform.grad(f)(1.)

    f.defjvp(lambda p, t: ((p[0], p[0]), (t[0], t[0])))
    # NB: on concrete values the rule runs as is (JAX checks nothing more either); traced
    # initial style, xform checks its primal output against the function's (JAX doesn't)
    close(xform.jvp(f, (1.,), (1.,)), ((1., 1.), (1., 1.)))
    with pytest.raises(TypeError, match="first element represents the primal output"):
        xform.jit(lambda x: xform.jvp(f, (x,), (x,)))(1.)

    f.defjvp(lambda p, t: p[0])
    with pytest.raises(TypeError, match="must produce a pair"):
        xform.grad(f)(1.)

    g = xform.custom_jvp(lambda x: x)
    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function"):
        g(1.)


def test_custom_jvp_integer_output_with_jnp_float0_tangent():
    def run(lib, np_):
        @lib.custom_jvp
        def f(x):
            return x * 2., (x > 0).astype(np.int32)

        @f.defjvp
        def f_jvp(p, t):   # the int output's tangent made by jnp.zeros(..., float0)
            return f(p[0]), (t[0] * 3., np_.zeros((), lib.dtypes.float0))
        (y, k), (ty, tk) = lib.jvp(f, (np.float32(1.5),), (np.float32(1.),))
        return y, k, ty, tk, lib.grad(lambda x: f(x)[0])(np.float32(1.5))
    ours, theirs = run(xform, jnp), run(jax, jjnp)
    for a, b in zip(ours, theirs):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        if np.asarray(b).dtype != jax.dtypes.float0:
            close(a, b)


def test_custom_jvp_low_precision_array_with_python_float_argument():
    # the rule's tangent for a Python float is weakly typed (as JAX's), so sin(x) * ty
    # stays bf16/f16 (it was f32 and the tangent-type check raised)
    def run(lib, np_):
        @lib.custom_jvp
        def f(x, y):
            return np_.sin(x) * y

        @f.defjvp
        def f_jvp(p, t):
            (x, y), (tx, ty) = p, t
            return f(x, y), 3. * np_.cos(x) * y * tx + np_.sin(x) * ty
        xb, xh = np_.bfloat16(0.5), np_.float16(0.5)
        return (lib.grad(f)(xb, 2.), lib.jit(lib.grad(f))(xb, 2.), lib.grad(f, 1)(xh, 2.),
                lib.vmap(f, (0, None))(np_.ones(3, np_.bfloat16), 2.), lib.grad(f)(.5, 2.))
    for a, b in zip(run(xform, jnp), run(jax, jjnp)):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        if b.weak_type:   # (the weak tangent's cast transposes to no cast: still weak)
            assert a.weak_type
        close(np.asarray(a, np.float32), np.asarray(b, np.float32), 1e-2)


def test_custom_jvp_rule_types_are_checked_only_when_differentiated():
    # vmap alone never runs the rule (optax's sparsemax loss on bf16 scores: an f32
    # primal with a bf16 tangent); grad of it raises the tangent-type error, as JAX's
    def run(lib, np_):
        @lib.custom_jvp
        def f(x):
            return np_.sin(x).astype(np.float32)

        @f.defjvp
        def f_jvp(p, t):
            return f(p[0]), np_.cos(p[0]) * t[0]
        x = np_.ones(3, np_.bfloat16)
        with pytest.raises(TypeError, match="Custom JVP rule must produce"):
            lib.grad(lambda x: lib.vmap(f)(x).sum())(x)
        return lib.vmap(f)(x), lib.jit(lib.vmap(f))(x)
    for a, b in zip(run(xform, jnp), run(jax, jjnp)):
        assert a.dtype == b.dtype
        close(a, b)


def test_custom_jvp_closure_over_differentiated_value_errors():
    def f(x):
        @xform.custom_jvp
        def g(y):
            return x + y
        g.defjvp(lambda p, t: (g(p[0]), 2. * t[0]))
        return g(1.)
    with pytest.raises(xform.errors.UnexpectedTracerError):
        xform.grad(f)(3.)
    # Closing over a value that is only staged (jit) or batched (vmap) is fine.
    close(xform.jit(f)(3.), 4.)
    close(xform.vmap(f)(np.arange(3.)), np.arange(3.) + 1)


# ---- custom_vjp ----

def make_clip(lib, np_):
    @lib.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, (lo, hi)

    def bwd(res, g):
        lo, hi = res
        return (None, None, np_.clip(g, lo, hi))
    clip_gradient.defvjp(fwd, bwd)
    return lambda x: np_.sum(clip_gradient(-0.5, 0.5, x) * np_.arange(4.))


xf_clip, jx_clip = make_clip(xform, jnp), make_clip(jax, jjnp)


@pytest.mark.parametrize("name,transform", [
    ("grad", lambda T, f: T.grad(f)),
    ("jit_grad", lambda T, f: T.jit(T.grad(f))),
    ("grad_jit", lambda T, f: T.grad(T.jit(f))),
    ("vmap_grad", lambda T, f: T.vmap(T.grad(f))),
    ("jit_vmap_grad", lambda T, f: T.jit(T.vmap(T.grad(f)))),
    ("grad_vmap", lambda T, f: T.grad(lambda xs: T.vmap(f)(xs).sum())),
    ("jacrev", lambda T, f: T.jacrev(T.vmap(f))),
])
def test_custom_vjp_gradient_clipping_every_ordering(name, transform):
    x = np.linspace(-1., 1., 4).astype(np.float32)
    xs = np.stack([x, 2 * x, -x])
    arg = x if name in ("grad", "jit_grad", "grad_jit") else xs
    got, want = transform(xform, xf_clip)(arg), transform(jax, jx_clip)(arg)
    same(got, want)
    if name == "grad":
        close(got, [0., 0.5, 0.5, 0.5])  # clipped, where plain autodiff gives [0, 1, 2, 3]


def test_custom_vjp_pytree_residuals_nondiff_and_nesting():
    def build(lib, np_):
        @functools.partial(lib.custom_vjp, nondiff_argnums=(0,))
        def f(fn, x, y):
            return fn(x) * y["w"]

        def fwd(fn, x, y):
            return f(fn, x, y), {"cos": np_.cos(x), "y": (y, [x])}

        def bwd(fn, res, g):
            y, (x,) = res["y"]
            return (res["cos"] * g * y["w"] * 2., {"w": fn(x) * g})
        f.defvjp(fwd, bwd)
        return lambda x, w: f(np_.sin, x, {"w": w})
    xf, jf = build(xform, jnp), build(jax, jjnp)
    for argnums in (0, 1, (0, 1)):
        got = xform.grad(xf, argnums)(0.7, 3.)
        want = jax.grad(jf, argnums)(0.7, 3.)
        for g, w in zip(np.atleast_1d(got), np.atleast_1d(want)):
            same(g, w)
    # grad of grad: differentiates through bwd and fwd
    same(xform.grad(xform.grad(xf))(0.7, 3.), jax.grad(jax.grad(jf))(0.7, 3.))
    same(xform.jit(xform.grad(xform.jit(xf), 1))(0.7, 3.), jax.grad(jf, 1)(0.7, 3.))


def test_custom_vjp_errors():
    @xform.custom_vjp
    def f(x, y):
        return x * y
    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda res, g: (g * res[1],))
    with pytest.raises(TypeError, match=r"Custom VJP bwd rule must produce an output with the "
                       r"same container \(pytree\) structure as the args tuple"):
        xform.grad(f)(1., 2.)
    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda res, g: (g * res[1], jnp.ones(3)))
    with pytest.raises(ValueError, match=r"at output\[1\] the bwd rule produced an output of "
                       r"type float32\[3\] corresponding to an input of type float32\[\], so the shapes "
                       "do not match"):
        xform.grad(f, 1)(1., 2.)
    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda res, g: (g * res[1], g * res[0]))
    for fwd_mode in (lambda: xform.jvp(f, (1., 2.), (1., 1.)),
                     lambda: xform.jacfwd(f)(1., 2.),
                     lambda: xform.jit(lambda x: xform.jvp(f, (x, 2.), (1., 1.)))(1.)):
        with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a "
                           "custom_vjp function."):
            fwd_mode()
    f.defvjp(lambda x, y: f(x, y), lambda res, g: (g, g))
    with pytest.raises(TypeError, match="must produce a pair"):
        xform.grad(f)(1., 2.)


def test_custom_vjp_closure_and_closure_convert():
    def outer(lib, np_):
        def loss(x):
            def inner(y):
                return np_.sin(x * y)
            conv, consts = lib.closure_convert(inner, 1.0)

            @lib.custom_vjp
            def apply(fn_args, y):
                return conv(y, *fn_args)

            def fwd(fn_args, y):
                return apply(fn_args, y), (fn_args, y)

            def bwd(res, g):
                fn_args, y = res
                _, vjp = lib.vjp(lambda a, y: conv(y, *a), fn_args, y)
                return vjp(g)
            apply.defvjp(fwd, bwd)
            return apply(tuple(consts), 2.0)
        return loss
    same(xform.grad(outer(xform, jnp))(0.3), jax.grad(outer(jax, jjnp))(0.3))
    close(xform.grad(outer(xform, jnp))(0.3), 2. * np.cos(0.6))
    close(xform.jit(xform.grad(outer(xform, jnp)))(0.3), 2. * np.cos(0.6))

    def closes_over(x):
        @xform.custom_vjp
        def g(y):
            return x * y
        g.defvjp(lambda y: (g(y), y), lambda y, ct: (x * ct,))
        return g(2.)
    with pytest.raises(Exception, match="closed-over value"):
        xform.grad(closes_over)(1.)
    close(xform.jit(closes_over)(3.), 6.)  # no differentiation: fine


def test_custom_vjp_under_vmap_with_unbatched_argument_and_remat():
    def build(lib, np_):
        @lib.custom_vjp
        def f(x, y):
            return np_.sin(x) * y
        f.defvjp(lambda x, y: (f(x, y), (np_.cos(x), np_.sin(x), y)),
                 lambda r, g: (r[0] * g * r[2], r[1] * g))
        return f
    xf, jf = build(xform, jnp), build(jax, jjnp)
    xs = np.linspace(0., 1., 3).astype(np.float32)
    # y is unbatched: its cotangent is the sum over the batch of bwd's per-example ones
    # (weak=False: bwd's strong cotangent for the weak y stays strong in JAX; xform's vjp
    # makes a weak input's cotangent weak, see transforms/ad.py _as_input_ct)
    same(xform.grad(lambda y: xform.vmap(xf, (0, None))(xs, y).sum())(2.),
         jax.grad(lambda y: jax.vmap(jf, (0, None))(xs, y).sum())(2.), weak=False)
    close(xform.vmap(xform.grad(lambda y: xform.vmap(xf, (0, None))(xs, y).sum()))(xs),
          jax.vmap(jax.grad(lambda y: jax.vmap(jf, (0, None))(xs, y).sum()))(xs))
    same(xform.grad(xform.checkpoint(lambda y: xf(0.3, y) * xf(y, y)))(2.),
         jax.grad(jax.checkpoint(lambda y: jf(0.3, y) * jf(y, y)))(2.))
