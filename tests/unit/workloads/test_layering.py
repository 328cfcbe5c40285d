"""workloads/ stands on core/ alone: the knobs are applied to a workload, not imported by it."""

from __future__ import annotations

import ast
from pathlib import Path

from torchdoctor.workloads import registry


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_workloads_do_not_import_knobs() -> None:
    folder = Path(registry.__file__).parent
    offenders = {
        f"{path.name}: {name}"
        for path in folder.glob("*.py")
        for name in _imported_modules(path)
        if name == "torchdoctor.knobs" or name.startswith("torchdoctor.knobs.")
    }
    assert offenders == set()
