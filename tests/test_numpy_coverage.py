"""Breadth of xform.numpy against jax.numpy (counting rule: scripts/numpy_coverage.py)."""
import importlib.util
import pathlib

_SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "numpy_coverage.py"


def _load():
    spec = importlib.util.spec_from_file_location("numpy_coverage", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_numpy_coverage(capsys):
    mod = _load()
    provided, missing, fn_have, fn_total = mod.coverage()
    with capsys.disabled():
        mod.main([])
    assert len(provided) >= 280, f"only {len(provided)} provided; missing: {missing}"


def test_provided_names_are_callable():
    import xform.numpy as xnp
    provided, _, _, _ = _load().coverage()
    assert all(callable(getattr(xnp, n)) for n in provided)
