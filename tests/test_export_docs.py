"""docs/export.md's code blocks run, in order, in one namespace."""
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "export.md"


def test_export_doc_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 5
    ns = {}
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), ns)  # noqa: S102
