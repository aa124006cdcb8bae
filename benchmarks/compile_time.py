"""Compile time of a jitted forward+backward (value_and_grad) of a 4-layer transformer-ish
stack (d_model 128, 4 heads, causal attention, MLP 512, seq 64, batch 8), written with
xnp ops only.  Reports trace+lower and compile times (AOT .lower().compile(), when the
library has it), the plain first-call time of a fresh jit, and the steady-state step time."""
import numpy as np
from _common import parse_args, load, block, once, time_calls, med, spread, emit

args = parse_args(__doc__)
L = load(args)
xnp = L.np
N_LAYERS, D, H, T, B, F = 4, 128, 4, 64, 8, 512
REPS = 5 if args.quick else 40

rng = np.random.default_rng(0)
w = lambda *s: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
params = {f"layer{i}": {"wq": w(D, D), "wk": w(D, D), "wv": w(D, D), "wo": w(D, D),
                        "w1": w(D, F), "w2": w(F, D),
                        "g1": np.ones(D, np.float32), "b1": np.zeros(D, np.float32),
                        "g2": np.ones(D, np.float32), "b2": np.zeros(D, np.float32)}
          for i in range(N_LAYERS)}
params = L.tree_map(L.asarray, params)
x = L.asarray(rng.standard_normal((B, T, D)).astype(np.float32))
mask = L.asarray(np.triu(np.full((T, T), -1e9, np.float32), k=1))  # additive causal mask


def layer_norm(h, g, b):
    mu = xnp.mean(h, axis=-1, keepdims=True)
    var = xnp.mean((h - mu) ** 2, axis=-1, keepdims=True)
    return (h - mu) / xnp.sqrt(var + 1e-5) * g + b


def heads(h):  # [B,T,D] -> [B,H,T,D/H]
    return xnp.swapaxes(xnp.reshape(h, (B, T, H, D // H)), 1, 2)


def attention(h, p):
    q, k, v = heads(h @ p["wq"]), heads(h @ p["wk"]), heads(h @ p["wv"])
    s = q @ xnp.swapaxes(k, 2, 3) / float(np.sqrt(D // H)) + mask
    s = xnp.exp(s - xnp.max(s, axis=-1, keepdims=True))
    a = s / xnp.sum(s, axis=-1, keepdims=True)
    return xnp.reshape(xnp.swapaxes(a @ v, 1, 2), (B, T, D)) @ p["wo"]


def gelu(h):
    return 0.5 * h * (1.0 + xnp.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


def make_loss(scale=1.0):  # a fresh function object each time: no trace cache is shared
    def loss(params, x):
        h = x
        for i in range(N_LAYERS):
            p = params[f"layer{i}"]
            h = h + attention(layer_norm(h, p["g1"], p["b1"]), p)
            h = h + gelu(layer_norm(h, p["g2"], p["b2"]) @ p["w1"]) @ p["w2"]
        return xnp.mean(h ** 2) * scale
    return loss


def measure(step):
    """First call (trace+compile for jit) and steady-state time of a value_and_grad step."""
    first_s, out = once(lambda: block(step(params, x)))
    steady = time_calls(lambda: block(step(params, x)), REPS, 1, warmup=3)
    return dict(first_call_ms=round(first_s * 1e3, 1), step_ms=med(steady, 1e3),
                step_ms_p10_p90=spread(steady, 1e3), step_faults_per_call=steady.faults_per_call,
                loss=round(float(L.to_numpy(out[0])), 6))


res = {}
if hasattr(L.jit(make_loss()), "lower"):  # AOT split: trace+lower, then compile
    jf = L.jit(L.value_and_grad(make_loss(scale=2.0)))
    lower_s, lowered = once(lambda: jf.lower(params, x))
    compile_s, _ = once(lambda: lowered.compile())
    res.update(trace_lower_ms=round(lower_s * 1e3, 1), compile_ms=round(compile_s * 1e3, 1))
# A fresh function of a different program (scale 1 vs 2: a program cache keyed by the
# program must not serve it), so this first call traces and compiles from scratch.
res.update(measure(L.jit(L.value_and_grad(make_loss()))))
emit("compile_time", L, res, layers=N_LAYERS, d_model=D, heads=H, seq=T, batch=B)
