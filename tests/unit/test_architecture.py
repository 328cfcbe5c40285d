"""The pipeline's shape (docs/DESIGN.md), checked on the source.

Stage packages reach each other through their public `__init__`: a stage imports
`torchdoctor.measure`, never `torchdoctor.measure.load`, so that what a package offers the
others is the list in its `__init__`, and its modules can be split or renamed freely. `core` is
the shared vocabulary and may be imported module by module. Data flows one way: a stage imports
only stages to its left in `STAGE_ORDER` (and `core`). And no two modules of the project import
each other, directly or around a longer circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
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


#: The pipeline, left to right: a stage may import the stages before it, never one after it.
#: `workloads` and `knobs` are peers (neither imports the other); `procs` comes after `collect`
#: because the script worker launches a script through `collect`'s launcher; `serve` comes
#: right after `procs`, where its imports put it (core, measure, workloads, knobs and the
#: process layer its model instances run on). `integrations`
#: (trainer callbacks, TensorBoard) comes after `report`: a callback records, diagnoses and
#: writes the report in the user's own process. `api` (a function per command, what a notebook
#: calls) sits just before `cli`, which calls it.
STAGE_ORDER = [
    "core",
    "measure",
    "workloads",
    "knobs",
    "engine",
    "collect",
    "procs",
    "serve",
    "analyze",
    "diagnose",
    "scale",
    "tune",
    "report",
    "integrations",
    "api",
    "cli",
]

#: Import circles that are known and being cut elsewhere, each as the set of its modules.


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


def _import_statements(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(module, the names imported from it) for every import in `path`, deferred and
    TYPE_CHECKING imports included; no names for a plain `import module`."""
    package_parts = _module_of(path) if path.name == "__init__.py" else _module_of(path)[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = package_parts[: len(package_parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module, [alias.name for alias in node.names]


def _imported(path: Path) -> set[str]:
    """Every torchdoctor module `path` imports, deferred and TYPE_CHECKING imports included;
    `from torchdoctor.x import name` counts as importing `torchdoctor.x.name` when that names a
    submodule the package does not export."""
    found: set[str] = set()
    for module, names in _import_statements(path):
        found.add(module)
        parts = module.split(".")
        if len(parts) == 2 and parts[0] == "torchdoctor" and parts[1] in PACKAGES:
            exported = _exported(parts[1])
            found.update(
                f"{module}.{name}"
                for name in names
                if _is_submodule(parts[1], name) and name not in exported
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


def _stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else None


def test_every_stage_has_its_place_in_the_order() -> None:
    assert sorted(STAGE_ORDER) == PACKAGES


def test_a_stage_imports_only_stages_to_its_left() -> None:
    place = {stage: i for i, stage in enumerate(STAGE_ORDER)}
    offenders = sorted(
        (str(path.relative_to(SRC)), module)
        for package in PACKAGES
        for path in (SRC / package).rglob("*.py")
        for module in _imported(path)
        if (stage := _stage_of(module)) is not None
        and stage not in SHARED | {package}
        and place[stage] > place[package]
    )
    assert offenders == []


def _module_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports.

    Every import counts, deferred and TYPE_CHECKING ones included: an import moved into a
    function still ties the two modules together (neither can be read, tested or moved
    without the other); deferring it only turns the circle's failure from import time into
    run time. `from package import submodule` imports the submodule, not the package's
    `__init__` (which Python runs first for any of its modules): a package's `__init__`
    re-exports its own modules, and counting it would put every module in a circle with its
    own package.
    """
    paths = {".".join(_module_of(p)): p for p in SRC.rglob("*.py") if "_site" not in p.parts}

    def targets(module: str, names: list[str]) -> set[str]:
        folder = "/".join(module.split(".")[1:])
        is_package = (SRC / folder / "__init__.py").is_file()
        exported = _exported(folder) if is_package else set()
        if not names or not is_package:
            return {module}
        return {
            f"{module}.{name}" if _is_submodule(folder, name) and name not in exported else module
            for name in names
        }

    return {
        name: {
            target
            for module, names in _import_statements(path)
            if module.startswith("torchdoctor.")
            for target in targets(module, names)
            if target in paths and target != name
        }
        for name, path in paths.items()
    }


def _circles(graph: dict[str, set[str]]) -> Iterator[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> Iterator[frozenset[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                yield from visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                yield frozenset(component)

    for node in sorted(graph):
        if node not in index:
            yield from visit(node)


def test_the_circle_finder_finds_a_circle_and_only_it() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert list(_circles(graph)) == [frozenset({"a", "b", "c"})]


def test_no_module_imports_itself_around_a_circle() -> None:
    assert [sorted(circle) for circle in _circles(_module_graph())] == []


def _private_imports_of_the_cli() -> set[tuple[str, str]]:
    """(CLI file, what it takes) for each private thing a CLI module imports from elsewhere:
    another module's `_name`, or a module whose own name begins with `_`."""
    found: set[tuple[str, str]] = set()
    for path in (SRC / "cli").rglob("*.py"):
        own = ".".join(_module_of(path))
        for module, names in _import_statements(path):
            if not module.startswith("torchdoctor.") or module == own:
                continue
            private = any(part.startswith("_") for part in module.split(".")[1:])
            if private and module != "torchdoctor._version":  # the version: cheap, by design
                found.add((path.name, module))
            found.update(
                (path.name, f"{module}.{name}")
                for name in names
                if name.startswith("_") and not name.startswith("__")
            )
    return found


def test_the_cli_imports_no_private_name_of_another_module() -> None:
    # The CLI is a shell over the API and the stages' public names: a command that needs
    # another command's private helper (a command-line parser, say) shows a piece that
    # belongs in the API or a stage.
    assert _private_imports_of_the_cli() == set()


def test_the_private_import_check_sees_one(tmp_path: Path) -> None:
    # The check reads the statements a CLI module holds; a private import is among them.
    statements = list(_import_statements(SRC / "cli" / "main.py"))
    assert ("torchdoctor._version", ["__version__"]) in statements


# ---- processes --------------------------------------------------------------------------------

#: Functions of a module that start a process or signal one.
_PROCESS_FUNCTIONS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput"},
    "os": {
        "kill",
        "killpg",
        "fork",
        "forkpty",
        "system",
        "popen",
        "posix_spawn",
        "posix_spawnp",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "spawnv",
        "spawnve",
        "spawnvp",
        "spawnvpe",
    },
    "signal": {"pthread_kill", "raise_signal", "pidfd_send_signal"},
    "multiprocessing": {"Process", "Pool"},
}
#: Methods that start a process (a multiprocessing context's `Process`) or end, stop or
#: continue one (Popen's, multiprocessing's and psutil's), whatever object they are called on.
_PROCESS_METHODS = {
    "Process",
    "Pool",
    "Popen",
    "send_signal",
    "terminate",
    "kill",
    "killpg",
    "suspend",
    "resume",
}
#: Reading a process is not starting one: `psutil.Process(pid)` looks a process up.
_PROCESS_LOOKUPS = {("psutil", "Process")}

#: (file, call) pairs outside `procs/` that start or signal a process, each with why.
PROCESS_CALLS_ALLOWED = {
    # The bootstrap inside the user's script (a stage before `procs`, which it cannot import):
    # it signals itself when its launcher died before it could ask the kernel to be told.
    ("collect/_lifeline.py", "os.kill"),
    # The same bootstrap continues its own children, stopped by the driver between chunks,
    # before it unwinds: no other process is left to do it when its driver is gone.
    ("collect/_lifeline.py", ".resume"),
}


def _process_calls(path: Path) -> Iterator[str]:
    """The calls in `path` that start, end or signal a process: `module.function` for a
    module's function (or a name imported from it), `.method` for a method."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {}  # a bare name -> its module, for `from os import kill`
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in _PROCESS_FUNCTIONS:
            for alias in node.names:
                if alias.name in _PROCESS_FUNCTIONS[node.module]:
                    imported[alias.asname or alias.name] = node.module
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in imported:
            yield f"{imported[func.id]}.{func.id}"
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if owner in _PROCESS_FUNCTIONS and func.attr in _PROCESS_FUNCTIONS[owner]:
                yield f"{owner}.{func.attr}"
            elif func.attr in _PROCESS_METHODS and (owner, func.attr) not in _PROCESS_LOOKUPS:
                yield f".{func.attr}"


def _process_calls_outside_procs() -> set[tuple[str, str]]:
    return {
        (str(path.relative_to(SRC)), call)
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).parts[0] != "procs"
        for call in _process_calls(path)
    }


def test_only_procs_starts_or_ends_a_process() -> None:
    # docs/DESIGN.md: `procs/` is the only place a process is started, paused or ended, with
    # one way to end a tree (`procs.end_tree`); a stage that needs a process asks it.
    assert _process_calls_outside_procs() - PROCESS_CALLS_ALLOWED == set()


def test_the_process_allow_list_holds_only_calls_that_exist() -> None:
    assert _process_calls_outside_procs() >= PROCESS_CALLS_ALLOWED


def test_the_process_call_finder_finds_each_form(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import os, psutil, subprocess\n"
        "from os import killpg\n"
        "subprocess.run(['true'])\n"
        "os.kill(1, 9)\n"
        "killpg(1, 9)\n"
        "ctx.Process(target=f).start()\n"
        "psutil.Process(1).terminate()\n"
        "session.run(3)\n"
    )
    assert sorted(_process_calls(source)) == [
        ".Process",
        ".terminate",
        "os.kill",
        "os.killpg",
        "subprocess.run",
    ]
