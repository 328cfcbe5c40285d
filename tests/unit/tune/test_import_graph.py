"""No import circle inside `tune/`: each module reads only modules below it (deferred and
TYPE_CHECKING imports count: they tie the modules together as much as any other)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import torchdoctor.tune

TUNE = Path(torchdoctor.tune.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = node.module if node.level == 0 else f"torchdoctor.tune.{node.module}"
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    prefix = "torchdoctor.tune."
    return {
        name.removeprefix(prefix).split(".")[0]
        for name in found
        if name.startswith(prefix)
        and (TUNE / f"{name.removeprefix(prefix).split('.')[0]}.py").is_file()
    }


def test_the_modules_of_tune_import_each_other_without_a_circle() -> None:
    graph = {p.stem: _imports(p) - {p.stem} for p in TUNE.glob("*.py") if p.stem != "__init__"}
    assert graph["confirm"] >= {"tuner"}  # the check reads real imports
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import circle in tune/: {' -> '.join(exc.args[1])}") from None
