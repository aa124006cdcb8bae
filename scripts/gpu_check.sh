#!/usr/bin/env bash
# xform on a GPU: a smoke run, the core tests and three benchmarks, with xform and its
# jax oracle both on JAX's default platform (the GPU where jaxlib has its CUDA plugin).
# CI has no GPU; run this by hand on a machine that has one, from the repository root:
#   bash scripts/gpu_check.sh [OUTDIR]      (logs go to OUTDIR, default /tmp/gpu_check)
# TEST_S and BENCH_S bound the test and benchmark stages in seconds (default 330, 150;
# BENCH_S=0 skips the benchmarks); TESTS (paths) replaces the test files, PYTEST_K selects,
# BENCH_ONLY names the benchmark scripts (default dispatch,eager_calls,lazy,random,nn_train).
set -u
out=${1:-${OUT:-/tmp/gpu_check}}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false   # several test processes share one GPU
py=${PYTHON:-python3}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $py - <<'EOF'
import numpy as np, jax, jaxlib
import xform, xform.numpy as jnp, xform.random as random
from xform import backend
print("jax", jax.__version__, "jaxlib", jaxlib.__version__, "jax default:", jax.default_backend())
print("xform:", xform.default_backend(), backend.platform(), xform.devices())
x = np.linspace(-1, 1, 1000, dtype=np.float32)
A = (np.random.default_rng(0).standard_normal((64, 64)) + 8 * np.eye(64)).astype(np.float32)
A64, B = A.astype(np.float64), np.ones((64, 2), np.float32)
checks = {
    "eager sin": (jnp.sin(x), np.sin(x)),
    "jit grad": (xform.jit(xform.grad(lambda v: jnp.sum(jnp.tanh(v) ** 2)))(x),
                 jax.jit(jax.grad(lambda v: jax.numpy.sum(jax.numpy.tanh(v) ** 2)))(x)),
    "normal": (xform.jit(lambda k: random.normal(k, (1000,)))(random.PRNGKey(0)),
               jax.jit(lambda k: jax.random.normal(k, (1000,)))(jax.random.PRNGKey(0))),
    "cholesky": (jnp.linalg.cholesky(np.eye(4, dtype=np.float32) * 4), 2 * np.eye(4)),
    "svd": (jnp.linalg.svd(np.diag(np.float32([3, 1, 2])), compute_uv=False), [3, 2, 1]),
    "det": (jnp.linalg.det(np.float32([[2, 1], [1, 3]])), 5.0),
    "solve (getrf + pivots kernel)": (jnp.linalg.solve(A, B), np.linalg.solve(A64, B)),
    "eigvals (geev)": (jnp.sort_complex(jnp.linalg.eigvals(A)),
                       np.sort_complex(np.linalg.eigvals(A64))),
}
for name, (got, want) in checks.items():
    print(f"{name}: max abs diff {np.max(np.abs(np.asarray(got) - np.asarray(want))):.3g}",
          "on", next(iter(got.devices())))
xform.debug.print("debug.print from the program: {}", jnp.arange(3))
M = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
exact = M.astype(np.float64) @ M.astype(np.float64)
for p in (None, "float32"):   # f32 matmul: TF32 unless a precision asks for more
    with xform.default_matmul_precision(p):
        err = np.max(np.abs(np.asarray(xform.jit(lambda m: m @ m)(M)) - exact))
    with jax.default_matmul_precision(p):
        jerr = np.max(np.abs(np.asarray(jax.jit(lambda m: m @ m)(M)) - exact))
    print(f"matmul 1024 precision={p}: max abs error xform {err:.3g}, jax {jerr:.3g}")
for lib in (xform, jax):   # host memory: a separate space on a GPU, one space on the CPU
    try:
        s = lib.sharding.SingleDeviceSharding(lib.devices()[0], memory_kind="pinned_host")
        h = lib.device_put(np.arange(4, dtype=np.float32), s)
        print(lib.__name__, "pinned_host:", h.sharding.memory_kind, (h * 2).sharding.memory_kind,
              lib.jit(lambda v: v + 1)(h).sharding.memory_kind)
    except Exception as e:
        print(lib.__name__, "pinned_host:", type(e).__name__, str(e)[:200])
    try:
        q, r, p = lib.scipy.linalg.qr(A, pivoting=True)
        print(lib.__name__, "pivoted qr: residual", float(np.abs(np.asarray(q @ r) - A[:, np.asarray(p)]).max()))
    except Exception as e:
        print(lib.__name__, "pivoted qr:", type(e).__name__, str(e)[:200])
EOF
} > "$out/smoke.txt" 2>&1
cat "$out/smoke.txt"

tests=(lax_linalg_more compute_on layout_api export_checks memory_kinds linalg_edges
       transform_edges jnp_edges lax_edges core transforms jit_cache jit_fastpath callbacks
       lax_ops numpy_table numpy linalg cond_while scan custom_derivatives random
       random_keys random_samplers nn_layers_basic optim lazy checkpoint platforms export
       checkify eager_composite compiled_parity placement scipy_linalg_more image ode
       lax_scipy_api)
files=(); for t in "${tests[@]}"; do files+=("tests/test_$t.py"); done
[ -n "${TESTS:-}" ] && read -r -a files <<< "$TESTS"
timeout -s INT -k 30 "${TEST_S:-330}" $py -m pytest -q -n "${WORKERS:-12}" --no-header -rfE \
    ${PYTEST_K:+-k "$PYTEST_K"} "${files[@]}" > "$out/tests.log" 2>&1
echo "tests: exit $? (124: stopped at TEST_S)"; tail -n 40 "$out/tests.log"

[ "${BENCH_S:-150}" = 0 ] && exit 0
timeout -s INT -k 10 "${BENCH_S:-150}" $py benchmarks/run.py --rounds 1 --only "${BENCH_ONLY:-dispatch,eager_calls,lazy,random,nn_train}" \
    --markdown "$out/bench.md" > "$out/bench.log" 2>&1
echo "benchmarks: exit $?"; cat "$out/bench.log" | tail -n 40
