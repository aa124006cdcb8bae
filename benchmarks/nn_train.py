"""Module train steps: the same linen model code on flax.linen + optax (``--lib jax``)
and on xform.nn + xform.optim (``--lib xform``): a small CNN (Conv-relu-max_pool x2,
Dense; batch 32 of 16x16x3, SGD with momentum) and a 2-layer pre-LN transformer encoder
(MultiHeadDotProductAttention + MLP, d_model 64, 4 heads, seq 32, batch 16, adam).

Per model: ``init`` time of a fresh ``jit(model.init)`` (trace + compile + run), the
first call of the jitted train step (value_and_grad + optimizer update + apply_updates),
ms/step, and the loss after the steps (same data and the same initial parameters: the
same key gives the same parameters in both libraries)."""
import importlib
import time

import numpy as np
from _common import parse_args, load, block, once, med, spread, emit

args = parse_args(__doc__)
L = load(args)
xnp = L.np
if L.name == "jax":
    nn, optim = importlib.import_module("flax.linen"), importlib.import_module("optax")
else:
    nn, optim = importlib.import_module("xform.nn"), importlib.import_module("xform.optim")
STEPS = 5 if args.quick else 30


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(16, (3, 3))(x))
        x = nn.max_pool(x, (2, 2), (2, 2))
        x = nn.relu(nn.Conv(32, (3, 3))(x))
        x = nn.max_pool(x, (2, 2), (2, 2))
        return nn.Dense(10)(x.reshape((x.shape[0], -1)))


class Block(nn.Module):
    d_model: int
    heads: int

    @nn.compact
    def __call__(self, x, mask):
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(h, mask=mask)
        h = nn.LayerNorm()(x)
        h = nn.Dense(self.d_model)(nn.gelu(nn.Dense(4 * self.d_model)(h)))
        return x + h


class Transformer(nn.Module):
    d_model: int = 64
    heads: int = 4
    layers: int = 2

    @nn.compact
    def __call__(self, x):
        mask = nn.make_causal_mask(x[..., 0])
        x = nn.Dense(self.d_model)(x)
        for _ in range(self.layers):
            x = Block(self.d_model, self.heads)(x, mask)
        return nn.Dense(10)(nn.LayerNorm()(x).mean(axis=1))


def xent(logits, labels):
    logp = nn.log_softmax(logits)
    return -xnp.mean(xnp.sum(labels * logp, axis=-1))


def bench(model, tx, x_np, y_np):
    """init time, first step, ms/step and losses for one model and optimizer."""
    key = L.mod.random.PRNGKey(0)
    data = [(L.asarray(x_np + 0.01 * i), L.asarray(y_np)) for i in range(STEPS)]
    init_s, params = once(lambda: block(L.jit(model.init)(key, data[0][0])))
    opt_state = tx.init(params)

    def loss_fn(p, x, y):
        return xent(model.apply(p, x), y)

    def train_step(p, s, x, y):
        loss, g = L.value_and_grad(loss_fn)(p, x, y)
        updates, s = tx.update(g, s, p)
        return optim.apply_updates(p, updates), s, loss

    step = L.jit(train_step)
    first_s, _ = once(lambda: block(step(params, opt_state, *data[0])))
    for _ in range(2):
        block(step(params, opt_state, *data[1]))
    p, s, times, losses = params, opt_state, [], []
    for xb, yb in data:
        t0 = time.perf_counter()
        p, s, loss = block(step(p, s, xb, yb))
        times.append(time.perf_counter() - t0)
        losses.append(loss)
    return dict(init_ms=round(init_s * 1e3, 1), first_step_ms=round(first_s * 1e3, 1),
                step_ms=med(times, 1e3), step_ms_p10_p90=spread(times, 1e3),
                initial_loss=round(float(L.to_numpy(losses[0])), 6),
                final_loss=round(float(L.to_numpy(losses[-1])), 6))


block(L.jit(lambda a: a + 1)(L.asarray(np.ones(2, np.float32))))   # backend start-up
rng = np.random.default_rng(0)
labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]
cnn = bench(CNN(), optim.sgd(0.05, momentum=0.9),
            rng.standard_normal((32, 16, 16, 3)).astype(np.float32), labels)
tf = bench(Transformer(), optim.adam(1e-3),
           rng.standard_normal((16, 32, 8)).astype(np.float32), labels[:16])
results = {f"cnn_{k}": v for k, v in cnn.items()}
results.update({f"transformer_{k}": v for k, v in tf.items()})
emit("nn_train", L, results, steps=STEPS)
