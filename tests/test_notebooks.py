"""The notebooks in notebooks/ run top to bottom in a fresh kernel and are committed with
their outputs.

Each notebook is one test (pytest-xdist spreads them). The kernel is started with this
checkout on ``PYTHONPATH`` and ``notebooks/`` as its working directory, so it imports this
checkout's xform whether or not the package is installed. A cell that raises fails the
test with the cell's traceback; the notebooks assert their own claims (gradients vs
finite differences, vmap vs a loop, accuracy thresholds), so a wrong number fails too.
"""
import os
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 300     # one cell; the budget for a whole notebook is 3 minutes
NOTEBOOK_BUDGET_S = 180


def test_notebooks_exist():
    names = [p.stem for p in NOTEBOOKS]
    for prefix in ("01_", "02_", "03_", "04_", "05_", "06_", "07_", "08_"):
        assert any(n.startswith(prefix) for n in names), f"no notebook {prefix}* in {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_with_outputs(path):
    """Readers see results without running: every code cell was executed, in order."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert counts and None not in counts, f"{path.name}: cells without outputs"
    assert counts == sorted(counts), f"{path.name}: cells executed out of order: {counts}"
    # Outputs must not leak the author's machine (paths outside the repository).
    text = path.read_text()
    for leak in (str(REPO), "site-packages", "/home/", "/root/"):
        assert leak not in text, f"{path.name}: outputs mention {leak!r}"


def _execute(nb, monkeypatch):
    """Run ``nb`` in a fresh kernel, cwd notebooks/, this checkout first on the path."""
    # The kernel inherits this environment.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()
    return nb


def test_kernel_imports_this_checkout(monkeypatch):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, xform; print(os.path.dirname(os.path.dirname(xform.__file__)))")])
    out = _execute(nb, monkeypatch).cells[0].outputs[0]["text"].strip()
    assert os.path.samefile(out, REPO), f"the kernel imported xform from {out}, not {REPO}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    try:
        _execute(nb, monkeypatch)
    except CellExecutionError as e:
        pytest.fail(f"{path.name} failed:\n{e}", pytrace=False)
    elapsed = time.perf_counter() - t0
    # Generous (a shared 2-core machine is noisy) but catches a notebook gone slow.
    assert elapsed < 2 * NOTEBOOK_BUDGET_S, f"{path.name} took {elapsed:.0f} s"
