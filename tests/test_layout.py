"""Repository layout rules: the backend boundary, module size, the README's two commands
(and CI running the same test command), and that the demo runs."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "xform"
BACKEND = PKG / "backend.py"
MAX_LINES = 800
DEMO_CMD = "pip install -e . && python -m xform.demo"
TEST_CMD = "pip install -e '.[test]' && pytest -q -n 2"
_IMPORT_FUNCS = {"__import__", "import_module", "find_spec", "reload"}


def _modules():
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _is_jax(name):
    return isinstance(name, str) and name.split(".")[0] in ("jax", "jaxlib")


def _call_name(func):
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def jax_imports(source, filename="<src>"):
    """(line, what) for every import of jax/jaxlib in `source`, static or dynamic."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if _is_jax(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _is_jax(node.module):
                found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Call) and _call_name(node.func) in _IMPORT_FUNCS:
            args = list(node.args) + [k.value for k in node.keywords]
            for a in args:
                if isinstance(a, ast.Constant) and _is_jax(a.value):
                    found.append((node.lineno, f"{_call_name(node.func)}({a.value!r})"))
    return found


def test_import_checker_catches_all_forms():
    src = ("import os, jax.numpy as jnp\nfrom jaxlib import xla_client\n"
           "import importlib\nm = importlib.import_module('jax._src.core')\n"
           "n = __import__('jaxlib')\nfrom . import jax\nimport jaxtyping\n"
           "s = 'jax is only a docstring here'\n")
    assert [line for line, _ in jax_imports(src)] == [1, 2, 4, 5]


def test_only_backend_imports_jax():
    offenders = []
    for path in _modules():
        if path == BACKEND:
            continue
        for line, what in jax_imports(path.read_text(), str(path)):
            offenders.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert not offenders, (
        "only xform/backend.py may import jax/jaxlib; route these through xform.backend:\n  "
        + "\n  ".join(offenders))


def test_modules_are_at_most_800_lines():
    too_long = []
    for path in _modules():
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            too_long.append(f"{path.relative_to(REPO)}: {n} lines")
    assert not too_long, (f"modules over {MAX_LINES} lines (split them):\n  "
                          + "\n  ".join(too_long))


def _fenced_commands(markdown):
    """Command lines of the fenced shell blocks, in order."""
    cmds = []
    for m in re.finditer(r"^[ \t]*```(\w*)[^\n]*\n(.*?)^[ \t]*```", markdown, re.M | re.S):
        if m.group(1) in ("", "sh", "bash", "shell", "console"):
            cmds += [ln.strip().removeprefix("$ ") for ln in m.group(2).splitlines()
                     if ln.strip() and not ln.strip().startswith("#")]
    return cmds


def test_readme_opens_with_the_two_commands():
    cmds = _fenced_commands((REPO / "README.md").read_text())
    assert cmds[:2] == [DEMO_CMD, TEST_CMD], f"README's first two commands are {cmds[:2]}"


def test_ci_runs_the_readme_test_command():
    ci = REPO / ".ci" / "run"
    assert os.access(ci, os.X_OK), ".ci/run must be executable"
    lines = [ln.strip() for ln in ci.read_text().splitlines()]
    assert any(TEST_CMD in ln and not ln.startswith("#") for ln in lines), (
        f".ci/run must run the README's test command: {TEST_CMD}")


def test_demo_runs():
    # Not marked slow on purpose: the demo is the first thing a user runs, so CI runs it.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "xform.demo"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"python -m xform.demo failed:\n{proc.stderr[-3000:]}"
    assert "stablehlo" in proc.stdout and "speedup" in proc.stdout, proc.stdout[-2000:]
