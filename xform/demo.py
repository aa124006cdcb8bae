"""A short tour of xform: ``python -m xform.demo``.

Prints a jaxpr, its StableHLO, then per-example gradients of a small MLP with
``jit(vmap(grad(loss)))``, checked against a Python loop of ``grad`` and timed eager vs
compiled. Written the way JAX code is written (``import xform as jax``); runs in seconds.
"""
import time

import numpy as np

import xform as jax
import xform.numpy as jnp

SIZES, BATCH = (8, 32, 32, 1), 64


def init_params(rng):
    """Dense layers {w0, b0, w1, b1, w2, b2}, scaled for unit-variance activations."""
    params = {}
    for i, (m, n) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        params[f"w{i}"] = jnp.asarray((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32))
        params[f"b{i}"] = jnp.asarray(np.full((n,), 0.1, np.float32))
    return params


def predict(params, x):
    h = jnp.tanh(x @ params["w0"] + params["b0"])
    h = jnp.maximum(h @ params["w1"] + params["b1"], 0.0)  # relu
    return h @ params["w2"] + params["b2"]


def loss(params, x, y):
    """Squared error of one example: x [8], y [1]."""
    return jnp.sum((predict(params, x) - y) ** 2)


def _time_ms(fn, reps):
    fn()  # warm-up (and compile, for jit)
    t0 = time.perf_counter()
    for _ in range(reps):
        jax.block_until_ready(fn())
    return (time.perf_counter() - t0) / reps * 1e3


def _section(title):
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def main():
    rng = np.random.default_rng(0)

    _section("1. make_jaxpr: the IR every transformation interprets")
    def f(x):
        return jnp.sum(jnp.tanh(x) * 2.0 + 1.0)
    x = jnp.asarray(np.linspace(-1, 1, 4, dtype=np.float32))
    print("f(x) = sum(tanh(x) * 2 + 1)")
    print(jax.make_jaxpr(f)(x))
    print("grad(f) = linearize + transpose, again a jaxpr:")
    print(jax.make_jaxpr(jax.grad(f))(x))

    _section("2. jit(f).lower(x).as_text(): StableHLO handed to XLA")
    print(jax.jit(f).lower(x).as_text())

    _section("3. per-example gradients: jit(vmap(grad(loss), in_axes=(None, 0, 0)))")
    params = init_params(rng)
    xs_np = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    ys_np = rng.standard_normal((BATCH, SIZES[-1])).astype(np.float32)
    xs, ys = jnp.asarray(xs_np), jnp.asarray(ys_np)
    eager_fn = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))
    jit_fn = jax.jit(eager_fn)
    grads = jit_fn(params, xs, ys)
    print(f"MLP {'-'.join(map(str, SIZES))} (tanh, relu), batch {BATCH}; per-example grads:")
    for k in sorted(grads):
        print(f"  {k}: {params[k].shape} -> {grads[k].shape}")

    # Oracle: a Python loop of grad, one example at a time.
    grad_fn = jax.grad(loss)
    loop = [grad_fn(params, jnp.asarray(xs_np[i]), jnp.asarray(ys_np[i])) for i in range(BATCH)]
    worst = 0.0
    for k in grads:
        ref = np.stack([np.asarray(g[k]) for g in loop])
        np.testing.assert_allclose(np.asarray(grads[k]), ref, rtol=1e-4, atol=1e-5)
        worst = max(worst, float(np.abs(np.asarray(grads[k]) - ref).max()))
    print(f"matches a Python loop of grad over {BATCH} examples (max abs diff {worst:.1e})")

    eager_ms = _time_ms(lambda: eager_fn(params, xs, ys), reps=5)
    jit_ms = _time_ms(lambda: jit_fn(params, xs, ys), reps=200)
    print(f"eager vmap(grad): {eager_ms:8.3f} ms/call  (one XLA executable per primitive)")
    print(f"jit(vmap(grad)):  {jit_ms:8.3f} ms/call  (one fused XLA executable)")
    print(f"speedup:          {eager_ms / jit_ms:8.1f}x")


if __name__ == "__main__":
    main()
