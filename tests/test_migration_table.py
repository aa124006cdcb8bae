"""docs/migration.md's table: every xform name it gives resolves (module or attribute),
and every Flax/Optax name in it exists in the installed library."""
import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "migration.md"


def _rows():
    rows, in_table = [], False
    for line in DOC.read_text().splitlines():
        if line.startswith("| Flax / Optax | xform |"):
            in_table = True
        elif in_table and line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set(cells[0]) <= {"-"}:
                continue
            assert len(cells) == 2, line
            rows.append(tuple(re.findall(r"`([^`]+)`", c) for c in cells))
        elif in_table:
            break
    return rows


def _resolve(name):
    """The module or attribute ``name`` (a dotted path) names."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        parent, _, attr = name.rpartition(".")
        if not parent:
            raise
        obj = _resolve(parent)
        if not hasattr(obj, attr):
            raise ImportError(f"{parent} has no attribute {attr!r}") from None
        return getattr(obj, attr)


ROWS = _rows()


def test_table_parsed():
    assert len(ROWS) > 30 and all(x for _, x in ROWS)


@pytest.mark.parametrize("xform_names", [x for _, x in ROWS], ids=lambda x: x[0])
def test_xform_names_import(xform_names):
    for name in xform_names:
        _resolve(name)


def test_flax_optax_names_exist():
    missing = []
    for lib_names, _ in ROWS:
        base = lib_names[0].rpartition(".")[0]
        for name in lib_names:
            full = name if "." in name or not base else f"{base}.{name}"
            try:
                _resolve(full)
            except ImportError:
                missing.append(full)
    assert not missing
