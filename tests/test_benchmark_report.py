"""benchmarks/run.py's report outputs: the markdown tables (with date and machine) and the
ratio plot, from synthetic records (the benchmarks themselves are too slow for the suite)."""
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "bench_run", Path(__file__).resolve().parents[1] / "benchmarks" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)

RECORDS = [
    {"script": "dispatch", "lib": "jax", "eager_sin_us": 10.0, "jit_us": 5.0, "n": 8},
    {"script": "dispatch", "lib": "xform", "eager_sin_us": 8.0, "jit_us": 6.0, "n": 8},
    {"script": "mlp_train", "lib": "jax", "step_ms": 2.0, "loss": 0.5},
    {"script": "mlp_train", "lib": "xform", "step_ms": 2.2, "loss": 0.5},
    {"script": "mlp_train", "lib": "xform", "error": "exit 1"},
]


def test_markdown_has_ratios_date_and_machine():
    vals = run.collect(RECORDS)
    md = run.markdown(vals, ["dispatch", "mlp_train"], rounds=3, quick=False)
    assert md.startswith("Measured ") and "UTC on " in md and "logical cores" in md
    assert "| dispatch | eager_sin_us | 10 | 8 | 0.80 |" in md
    assert "| mlp_train | step_ms | 2 | 2.2 | 1.10 |" in md
    assert "| compiled MLP step | mlp_train.step_ms | 1.10 | <= 1.05 | FAIL |" in md
    assert "| n |" not in md.replace("| n/a", "")   # problem sizes stay out of the table


def test_plot_writes_png_of_timings(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "ratios.png"
    run.plot(run.collect(RECORDS), ["dispatch", "mlp_train"], out, "test")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_data_is_an_error(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(SystemExit, match="no timing"):
        run.plot(run.collect(RECORDS[:1]), ["dispatch"], tmp_path / "x.png", "t")
