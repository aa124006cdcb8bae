"""Platform selection (``jax_platforms`` / ``JAX_PLATFORMS``, as JAX) and the lowering
rules that differ by platform: host callbacks name the GPU's callback target, the
factorizations call LAPACK on CPU and cuSOLVER on GPU (their values on a GPU are checked
by the linalg tests run there: scripts/gpu_check.sh)."""
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import backend
from xform.interpreters import mlir


def test_default_platform_is_jaxs_choice():
    assert xform.default_backend() == jax.default_backend()   # "cpu" on CI
    named = {"gpu": ("cuda", "rocm")}.get(jax.default_backend(), (jax.default_backend(),))
    assert backend.platform() in named
    assert xform.config.jax_platforms == os.environ.get("JAX_PLATFORMS")


def _run(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_jax_platforms_names_an_unavailable_platform():
    r = _run("import xform.numpy as jnp; jnp.ones(2)", JAX_PLATFORMS="nosuch")
    assert r.returncode != 0
    assert "RuntimeError: jax_platforms='nosuch': could not start that platform" in r.stderr


def test_jax_platforms_set_in_config_before_first_use():
    r = _run("import xform, xform.numpy as jnp\n"
             "xform.config.update('jax_platforms', 'cpu')\n"
             "print(jnp.ones(2).sum(), xform.default_backend(), xform.devices())",
             JAX_PLATFORMS="")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["2.0", "cpu"]


def _lowered(f, *args, platform):
    closed = xform.make_jaxpr(f)(*args)
    return mlir.lower_jaxpr_to_module(closed, platform=platform)


def test_host_callbacks_use_the_gpu_target_on_gpu():
    def f(x):
        xform.debug.print("x={}", x)
        return x + 1
    x = np.ones(2, np.float32)
    assert "xla_ffi_python_cpu_callback" in _lowered(f, x, platform="cpu")
    gpu = _lowered(f, x, platform="cuda")
    assert "xla_ffi_python_gpu_callback" in gpu and "cpu_callback" not in gpu


@pytest.mark.parametrize("name,f,targets", [
    ("lu", jnp.linalg.det, ["cusolver_getrf_ffi"]),
    ("qr", jnp.linalg.qr, ["cusolver_geqrf_ffi", "cusolver_orgqr_ffi"]),
    ("eigh", jnp.linalg.eigh, ["cusolver_syevd_ffi"]),
    ("svd", jnp.linalg.svd, ["cusolver_gesvdj_ffi"]),
    ("cholesky", jnp.linalg.cholesky, ["cusolver_potrf_ffi"])])
def test_solver_kernels_by_platform(name, f, targets):
    # As JAX: LAPACK on CPU, cuSOLVER on CUDA (hipSOLVER on ROCm); elsewhere a clear
    # error naming the primitive rather than a custom call XLA cannot find. (4x4: det
    # has closed forms up to 3x3, as JAX's.)
    x = np.eye(4, dtype=np.float32)
    assert "lapack_" in _lowered(f, x, platform="cpu")
    cuda = _lowered(f, x, platform="cuda")
    assert all(f"@{t}(" in cuda for t in targets) and "lapack" not in cuda
    assert f"@{targets[0].replace('cu', 'hip', 1)}(" in _lowered(f, x, platform="rocm")
    if name != "cholesky":   # stablehlo.cholesky elsewhere
        with pytest.raises(NotImplementedError,
                           match=f"^{name} is not implemented on tpu: xform lowers it"):
            _lowered(f, x, platform="tpu")


def test_pivoted_qr_is_lapack_geqp3_on_cpu_and_jaxlibs_hybrid_kernel_on_gpu():
    f = lambda a: xform.lax.linalg.qr(a, pivoting=True)   # noqa: E731
    x = np.eye(3, dtype=np.float32)
    assert "@lapack_sgeqp3_ffi(" in _lowered(f, x, platform="cpu")
    assert "@cuhybrid_geqp3(" in _lowered(f, x, platform="cuda")


def test_large_svd_uses_gesvd_on_gpu():
    # JAX's choice: Jacobi up to 1024 x 1024, else QR-based gesvd (m < n: transposed)
    x = np.ones((4, 1100), np.float32)
    text = _lowered(lambda a: jnp.linalg.svd(a, full_matrices=False), x, platform="cuda")
    assert "@cusolver_gesvd_ffi(" in text and "transposed = true" in text


def test_platform_dependent_picks_the_gpu_branch_by_platform(monkeypatch):
    monkeypatch.setattr(backend, "platform", lambda: "cuda")
    pick = xform.lax.platform_dependent
    assert pick(1.0, cpu=lambda x: x + 1, gpu=lambda x: x + 2) == 3.0
    assert pick(1.0, cuda=lambda x: x + 3, gpu=lambda x: x + 2) == 4.0


def test_jax_num_cpu_devices_set_before_first_use_sets_the_cpu_device_count():
    # Regression: the option was accepted and ignored (one device). Fresh interpreters
    # without this process's XLA_FLAGS device count; jax does the same for comparison.
    code = ("import {m}\n{m}.config.update('jax_num_cpu_devices', 3)\n"
            "import {m}.numpy as jnp\n"
            "print({m}.device_count(), {m}.pmap(lambda x: x * 2)(jnp.arange(3.0)).sum())\n"
            "try:\n    {m}.config.update('jax_num_cpu_devices', 2)\n"
            "except RuntimeError as e:\n    print('refused' if 'before backends' in str(e) "
            "else e)\n")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = []
    for m in ("xform", "jax"):
        r = subprocess.run([sys.executable, "-c", code.format(m=m)], capture_output=True,
                           text=True, env={**env, "JAX_PLATFORMS": "cpu"}, timeout=120)
        assert r.returncode == 0, r.stderr
        out.append(r.stdout.split())
    assert out[0] == out[1] == ["3", "6.0", "refused"]
