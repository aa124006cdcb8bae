"""Hessian of f(x) = sum(tanh(A @ x)) for x in R^100 via jit(hessian(f)).  Reports first-call and
per-call time, and the max abs error
against the analytic Hessian A^T diag(-2 tanh(z) (1 - tanh(z)^2)) A computed in float64."""
import numpy as np
from _common import parse_args, load, block, once, time_calls, med, spread, emit

args = parse_args(__doc__)
L = load(args)
xnp = L.np
N = 100
REPS = 20 if args.quick else 300

rng = np.random.default_rng(0)
A_np = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
x_np = rng.standard_normal(N).astype(np.float32)
A, x = L.asarray(A_np), L.asarray(x_np)


def f(x):
    return xnp.sum(xnp.tanh(A @ x))


t = np.tanh(A_np.astype(np.float64) @ x_np)
H_true = A_np.T.astype(np.float64) @ np.diag(-2 * t * (1 - t ** 2)) @ A_np


def measure(hess):
    first_s, H = once(lambda: block(hess(x)))
    calls = time_calls(lambda: block(hess(x)), REPS, 5, warmup=10)
    return dict(first_call_ms=round(first_s * 1e3, 1), call_us=med(calls, 1e6),
                call_us_p10_p90=spread(calls, 1e6),
                max_abs_err=float(np.abs(L.to_numpy(H) - H_true).max()))


res = measure(L.jit(L.hessian(f)))
emit("hessian", L, res, n=N)
