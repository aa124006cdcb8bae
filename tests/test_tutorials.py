"""Tutorial-style programs (written for xform, in the manner of JAX's tutorials) run end to
end on xform and on JAX with ``import ... as jax`` swapped: values must agree."""
import functools

import jax as real_jax
import jax.numpy as real_jnp
import jax.scipy.stats as real_stats
import numpy as np
import pytest

import xform
import xform.numpy as xnp
import xform.scipy.stats as xstats

LIBS = {"xform": (xform, xnp, xstats), "jax": (real_jax, real_jnp, real_stats)}


def _both(snippet):
    got, want = (snippet(*LIBS[name]) for name in ("xform", "jax"))
    got_l, want_l = real_jax.tree_util.tree_leaves(got), real_jax.tree_util.tree_leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g, w)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def autodiff_cookbook(jax, jnp, _):
    def loss(w):
        x = jnp.arange(6.0).reshape(2, 3) / 5
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w = jnp.array([0.5, -0.3, 0.8])
    v = jnp.array([1.0, 0.0, -1.0])
    hvp = jax.jvp(jax.grad(loss), (w,), (v,))[1]          # forward-over-reverse
    hvp_rev = jax.grad(lambda w: jnp.vdot(jax.grad(loss)(w), v))(w)
    jac = jax.jacfwd(lambda w: jnp.sin(w) * w[0])(w), jax.jacrev(lambda w: jnp.sin(w) * w[0])(w)

    def f_c(z):                                           # C -> R
        x, y = jnp.real(z), jnp.imag(z)
        return x ** 2 + y ** 2
    z = 3.0 + 4.0j
    holo = jax.grad(lambda z: jnp.sin(z) * z, holomorphic=True)(z)

    def fun(z):                                           # non-holomorphic C -> C
        x, y = jnp.real(z), jnp.imag(z)
        return (0.3 * x + 0.7 * y) + (0.2 * x * y) * 1j
    _, jvp_out = jax.jvp(fun, (0.4 + 0.6j,), (0.5 + 0.25j,))
    expected = 0.3 * 0.5 + 0.7 * 0.25 + (0.2 * 0.6 * 0.5 + 0.2 * 0.4 * 0.25) * 1j
    _, pull = jax.vjp(fun, 0.4 + 0.6j)
    return (hvp, hvp_rev, jac, jax.hessian(loss)(w), jax.grad(f_c)(z), holo, jvp_out,
            jnp.allclose(jvp_out, expected), pull(1.0 + 0.0j))


def custom_derivatives(jax, jnp, _):
    @jax.custom_jvp
    def log1pexp(x):
        return jnp.log(1.0 + jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return log1pexp(x), t * (1.0 - 1.0 / (1.0 + jnp.exp(x)))

    @jax.custom_jvp
    def f(x):
        if x > 0:                                         # Python control flow on values
            return x ** 2
        return -x

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), (2 * x if x > 0 else -1.0) * t

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def clip_gradient(bound, x):
        return x

    clip_gradient.defvjp(lambda bound, x: (x, None),
                         lambda bound, _, g: (jnp.clip(g, -bound, bound),))
    xs = jnp.array([-2.0, 0.0, 100.0])
    return (jax.vmap(jax.grad(log1pexp))(xs), jax.jit(jax.grad(log1pexp))(100.0),
            jax.grad(f)(3.0), jax.grad(f)(-3.0), jax.grad(jax.grad(f))(2.0),
            jax.grad(lambda x: clip_gradient(0.5, 3.0 * x))(1.0))


def vmapped_log_probs(jax, jnp, stats):
    xs = jnp.linspace(-2.0, 2.0, 8).reshape(4, 2)
    ys = jnp.array([1.0, 0.0, 1.0, 1.0])

    def log_joint(beta):                                  # Bayesian logistic regression
        logits = xs @ beta[:2] + beta[2]
        lik = jnp.sum(-jnp.log1p(jnp.exp(-jnp.where(ys == 1, logits, -logits))))
        return lik + jnp.sum(stats.norm.logpdf(beta, 0.0, 2.0))

    betas = jnp.arange(9.0).reshape(3, 3) / 10
    batched = jax.vmap(log_joint)(betas)
    grads = jax.jit(jax.vmap(jax.grad(log_joint)))(betas)
    mvn = jax.vmap(lambda b: stats.multivariate_normal.logpdf(b, jnp.zeros(3),
                                                              jnp.eye(3) * 2.0))(betas)
    return batched, grads, mvn, stats.poisson.logpmf(jnp.arange(4.0), 2.0)


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


for _lib in (xform, real_jax):
    _lib.tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
                                        lambda _, kids: Pair(*kids))


def pytrees(jax, jnp, _):
    params = {"layers": [Pair(jnp.ones((2, 2)), jnp.zeros(2)), Pair(jnp.eye(2), jnp.ones(2))]}

    def forward(params, x):
        for layer in params["layers"]:
            x = jnp.tanh(x @ layer.a + layer.b)
        return jnp.sum(x ** 2)

    x = jnp.array([0.5, -1.0])
    g = jax.jit(jax.grad(forward))(params, x)
    new = jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g)
    leaves, tree = jax.tree_util.tree_flatten(new)
    return g, forward(new, x), len(leaves), jax.tree_util.tree_unflatten(tree, leaves)


def checkpoint_nesting(jax, jnp, _):
    def recursive_checkpoint(funs):
        if len(funs) == 1:
            return funs[0]
        if len(funs) == 2:
            return lambda x: funs[0](funs[1](x))
        f1, f2 = recursive_checkpoint(funs[:len(funs) // 2]), \
            recursive_checkpoint(funs[len(funs) // 2:])
        return lambda x: f1(jax.checkpoint(f2)(x))

    f = recursive_checkpoint([jnp.sin] * 8)
    g = jax.checkpoint(lambda x: jnp.sum(jnp.cos(x) ** 2),
                       policy=jax.checkpoint_policies.dots_saveable)
    return jax.grad(f)(3.0), jax.jit(jax.grad(f))(3.0), jax.grad(g)(jnp.arange(3.0))


def control_flow(jax, jnp, _):
    lax = jax.lax
    x = jnp.arange(5.0)
    cumsum = lax.scan(lambda c, v: (c + v, c + v), 0.0, x)
    fori = lax.fori_loop(0, 4, lambda i, c: c * 1.5 + i, 1.0)
    wl = lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1), (0, 1.0))
    cond = jax.vmap(lambda v: lax.cond(v > 2, jnp.sin, jnp.cos, v))(x)
    grad_scan = jax.grad(lambda w: lax.scan(lambda c, v: (jnp.tanh(c * w + v), c), 0.0, x)[0])(
        0.7)
    sw = lax.switch(1, [lambda v: v, lambda v: v * 2, lambda v: v * 3], 1.0)
    return cumsum, fori, wl, cond, grad_scan, sw


@pytest.mark.parametrize("snippet", [autodiff_cookbook, custom_derivatives, vmapped_log_probs,
                                     pytrees, checkpoint_nesting, control_flow],
                         ids=lambda f: f.__name__)
def test_tutorial_snippet(snippet):
    _both(snippet)
