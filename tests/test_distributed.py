"""Across processes: two processes on 127.0.0.1 (2 CPU devices each) joined by
xform.distributed (jaxlib's coordination service + gloo collectives), started by
xform.launch; psum and three data-parallel SGD steps vs the single-process result."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xform
from xform import launch

HERE = Path(__file__).parent / "multiprocess"
REPO = Path(__file__).resolve().parents[1]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("XLA_FLAGS", None)  # each process gets its devices from the launcher
    return env


def test_two_processes_psum_and_data_parallel_sgd():
    codes, outputs = launch.launch([str(HERE / "dp_worker.py")], 2, devices_per_process=2,
                                   timeout=150, env=_env(), capture=True)
    assert codes == [0, 0], "\n".join(o[-3000:] for o in outputs)
    results = [json.loads(next(line for line in o.splitlines() if line.startswith("{")))
               for o in outputs]
    assert sorted(r["pid"] for r in results) == [0, 1]
    for r in results:
        assert r["nproc"] == 2 and r["nlocal"] == 2 and r["ndev"] == 4
        assert r["psum"] == [6.0, 6.0]  # 0 + 1 + 2 + 3 over both processes
        assert r["axis_index"] == ([0, 1] if r["pid"] == 0 else [2, 3])
        assert "not supported across processes" in r["jit_pmap"], r["jit_pmap"]
    sys.path.insert(0, str(HERE))
    try:
        import dp_worker
    finally:
        sys.path.remove(str(HERE))
    params, xs, ys = dp_worker.data()
    for _ in range(3):  # the same three steps on one device over the whole batch
        g = xform.grad(dp_worker.loss)(params, xs, ys)
        params = xform.tree_util.tree_map(lambda a, b: a - 0.1 * b, params, g)
    for r in results:
        np.testing.assert_allclose(r["w"], params["w"], rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(r["b"], params["b"], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("case", ["unreachable", "twice", "after_use"])
def test_initialize_errors(case):
    out = subprocess.run([sys.executable, str(HERE / "errors_worker.py"), case,
                          str(launch.free_port())], env=_env(), capture_output=True,
                         text=True, timeout=90)
    lines = [ln for ln in out.stdout.splitlines() if ln]
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert lines and all(ln == "OK" for ln in lines), out.stdout


def test_single_process_defaults_and_launcher_errors():
    assert xform.distributed.process_index() == 0
    assert xform.distributed.process_count() == 1
    assert not xform.distributed.is_initialized()
    with pytest.raises(SystemExit):
        launch.main(["-n", "2", "no_such_script.py"])
