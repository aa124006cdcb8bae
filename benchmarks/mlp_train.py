"""MLP 784-512-512-10 (ReLU, softmax cross-entropy), batch 128, plain SGD written
functionally: params dict pytree, value_and_grad, tree_map update, jitted step.
Reports first-call time (trace+compile+run), steady-state ms/step over 50 steps, and the
loss on batch 0 after 50 steps from a fixed numpy seed (comparable across libraries)."""
import time

import numpy as np
from _common import (parse_args, load, block, once, med, spread, emit,
                    mlp_apply, softmax_xent, mlp_init)

args = parse_args(__doc__)
L = load(args)
xnp = L.np
SIZES, BATCH, STEPS, LR = [784, 512, 512, 10], 128, 50, 0.05

# Data: a fixed random linear "teacher" labels gaussian inputs, so the loss actually falls.
rng = np.random.default_rng(0)
params_np = mlp_init(rng, SIZES)
teacher = rng.standard_normal((784, 10)).astype(np.float32)
batches_np = []
for _ in range(STEPS):
    xb = rng.standard_normal((BATCH, 784)).astype(np.float32)
    batches_np.append((xb, np.eye(10, dtype=np.float32)[np.argmax(xb @ teacher, axis=1)]))


def loss_fn(p, x, y):
    return softmax_xent(xnp, mlp_apply(xnp, p, x, 3), y)


def train_step(p, x, y):
    loss, g = L.value_and_grad(loss_fn)(p, x, y)
    return L.tree_map(lambda a, b: a - LR * b, p, g), loss


def run(step, eval_loss):
    """First call, then 50 steps from the initial params; returns a result dict."""
    p0 = {k: L.asarray(v) for k, v in params_np.items()}
    data = [(L.asarray(a), L.asarray(b)) for a, b in batches_np]
    first_s, _ = once(lambda: block(step(p0, *data[0])))
    for _ in range(2):  # warm-up, results discarded
        block(step(p0, *data[1]))
    p, times = p0, []
    for xb, yb in data:
        t0 = time.perf_counter()
        p, loss = block(step(p, xb, yb))
        times.append(time.perf_counter() - t0)
    return dict(first_call_ms=round(first_s * 1e3, 1), step_ms=med(times, 1e3),
                step_ms_p10_p90=spread(times, 1e3),
                initial_loss=round(float(L.to_numpy(eval_loss(p0, *data[0]))), 6),
                final_loss=round(float(L.to_numpy(eval_loss(p, *data[0]))), 6))


res = run(L.jit(train_step), L.jit(loss_fn))
emit("mlp_train", L, res, sizes=SIZES, batch=BATCH, steps=STEPS, lr=LR)
