"""Stage packages reach each other through their public `__init__` (docs/DESIGN.md): a stage
imports `torchdoctor.measure`, never `torchdoctor.measure.load`, so that what a package offers
the others is the list in its `__init__`, and its modules can be split or renamed freely.
`core` is the shared vocabulary and may be imported module by module."""

from __future__ import annotations

import ast
from pathlib import Path

import torchdoctor

SRC = Path(torchdoctor.__file__).parent
PACKAGES = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
#: Packages any stage may import module by module.
SHARED = frozenset({"core"})

#: (importing file, imported module) pairs that cannot go through the package's `__init__`,
#: each with why.
ALLOWED = {
    # `measure.load.default_load_probe` is looked up on the module at call time: it is the
    # documented place where tests swap in a fake machine-load probe (measure/load.py), and a
    # name re-exported by `measure/__init__` would keep the original.
    ("tune/arms.py", "torchdoctor.measure.load"),
}


def _exported(package: str) -> set[str]:
    """The names in `package`'s `__all__`, read without importing it (engine imports torch)."""
    tree = ast.parse((SRC / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return set(ast.literal_eval(node.value))
    return set()


def _is_submodule(package: str, name: str) -> bool:
    return (SRC / package / f"{name}.py").is_file() or (SRC / package / name).is_dir()


def _module_of(path: Path) -> list[str]:
    parts = ["torchdoctor", *path.relative_to(SRC).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(path: Path) -> set[str]:
    """Every torchdoctor module `path` imports, deferred and TYPE_CHECKING imports included;
    `from torchdoctor.x import name` counts as importing `torchdoctor.x.name` when that names a
    submodule the package does not export."""
    found: set[str] = set()
    package_parts = _module_of(path) if path.name == "__init__.py" else _module_of(path)[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package_parts[: len(package_parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            parts = module.split(".")
            if len(parts) == 2 and parts[0] == "torchdoctor" and parts[1] in PACKAGES:
                exported = _exported(parts[1])
                found.update(
                    f"{module}.{alias.name}"
                    for alias in node.names
                    if _is_submodule(parts[1], alias.name) and alias.name not in exported
                )
    return {name for name in found if name.startswith("torchdoctor.")}


def _reaches_into_another_package(own: str, module: str) -> bool:
    parts = module.split(".")
    return len(parts) > 2 and parts[1] in PACKAGES and parts[1] not in SHARED | {own}


def test_stages_import_each_other_through_their_init() -> None:
    offenders = {
        (str(path.relative_to(SRC)), module)
        for package in PACKAGES
        for path in (SRC / package).rglob("*.py")
        for module in _imported(path)
        if _reaches_into_another_package(package, module)
    }
    assert offenders - ALLOWED == set()


def test_the_allow_list_holds_only_imports_that_exist() -> None:
    # An entry whose import was routed through the `__init__` must leave the list.
    present = {
        (str(path.relative_to(SRC)), module)
        for package in PACKAGES
        for path in (SRC / package).rglob("*.py")
        for module in _imported(path)
    }
    assert present >= ALLOWED
