"""The cure as a patch: a recipe written into the user's own source.

From a recipe (knob -> value), the `InjectionRecord` of a run of the script under it, and the
folder the command ran in, `build_patch` returns a unified diff (`patch -p1` applies it in
that folder) that edits the calls the injection acted at, plus a snippet for every knob that
has no line to edit (autocast, checkpointing, CUDA flags, a location outside the folder or
not recorded), saying where to paste it.

Where each knob is edited (the `applied_at` of its outcome names `file:line`):
- DataLoader knobs: the DataLoader call at that line; its keyword (or positional argument) is
  replaced, or the keyword added;
- optimizer_impl: the optimizer constructor (foreach=/fused=); set_to_none: the zero_grad call;
- compile, channels_last: recorded at the model's first training call; the name called there
  is traced back to its assignment (`model = ...`), and `model = model.to(...)` /
  `model = torch.compile(model, ...)` go on the lines after it;
- threads: the script's own `torch.set_num_threads(...)` call if the record names one, else
  `torch.set_num_threads(N)` after the imports of the script;
- the FSDP keywords (reshard_after_forward, mp_policy, offload_policy): each
  `fully_shard(...)` call the injection acted at, with the import a policy needs.

Only the text of the affected call (its argument span) or new lines change; the rest of the
file is kept byte for byte (no ast.unparse). Torch-free: it reads source files only.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from torchdoctor.core.records import SubRecord
from torchdoctor.knobs import (
    CallEdit,
    EditedCall,
    FSDPArgument,
    ModelLine,
    OptimizerArgument,
    Snippet,
    TopLine,
    catalogue,
    get_knob,
    loader_arguments,
)

if TYPE_CHECKING:
    from torchdoctor.collect import InjectionRecord


def loader_knobs() -> list[str]:
    """The DataLoader keyword knobs in the order they are written (their `LoaderArgument`)."""
    return [name for name, _ in loader_arguments()]


def _loader_positions() -> dict[str, int]:
    """Positions of DataLoader's positional-or-keyword parameters, per knob (`LoaderArgument`:
    the signature is dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
    collate_fn, pin_memory, ...; prefetch_factor and persistent_workers are keyword-only)."""
    return {name: part.position for name, part in loader_arguments() if part.position is not None}


_SITE = re.compile(r"(?P<file>.+):(?P<line>\d+)")


class PatchEdit(SubRecord):
    """One knob written into one place of the source."""

    knob: str
    file: str  # relative to the root
    line: int
    what: str


class PatchSnippet(SubRecord):
    """A knob with no line to edit: code to paste and where."""

    knob: str
    where: str
    code: str


class CurePatch(SubRecord):
    """The recipe as a unified diff of the user's source, plus snippets for the rest."""

    diff: str
    edits: list[PatchEdit] = Field(default_factory=list)
    snippets: list[PatchSnippet] = Field(default_factory=list)

    def snippet_text(self) -> str:
        return "\n\n".join(f"# {s.knob}: {s.where}\n{s.code}" for s in self.snippets)


def parse_site(applied_at: str, root: Path) -> tuple[Path, int] | None:
    """`(file, line)` from an `applied_at` entry ending in ` at FILE:LINE`, or None."""
    # The last " at ": the text before may hold one ("kept at 2 at train.py:9").
    _, sep, site = applied_at.rpartition(" at ")
    match = _SITE.fullmatch(site) if sep else None
    if match is None:
        return None
    path = Path(match["file"])
    if not path.is_absolute():
        path = root / path
    return path, int(match["line"])


# ---- source files and their pending replacements ---------------------------------------------


@dataclass
class _Source:
    path: Path
    text: str
    tree: ast.Module
    line_starts: list[int]
    #: (start, end, new text) in character offsets of `text`
    changes: list[tuple[int, int, str]] = field(default_factory=list)
    needs_torch: bool = False
    #: import lines the edits need, put after the imports when the file lacks them
    needs_imports: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> _Source | None:
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            return None
        starts = [0]
        for line in text.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        return cls(path, text, tree, starts)

    def offset(self, lineno: int, col: int) -> int:
        """Character offset of ast's (1-based line, UTF-8 byte column)."""
        start = self.line_starts[lineno - 1]
        end = self.line_starts[lineno] if lineno < len(self.line_starts) else len(self.text)
        return start + len(self.text[start:end].encode("utf-8")[:col].decode("utf-8", "replace"))

    def span(self, node: ast.expr | ast.stmt | ast.keyword) -> tuple[int, int]:
        assert node.end_lineno is not None and node.end_col_offset is not None
        return (
            self.offset(node.lineno, node.col_offset),
            self.offset(node.end_lineno, node.end_col_offset),
        )

    def source(self, node: ast.expr | ast.stmt) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def line_indent(self, lineno: int) -> str:
        line = self.text[self.line_starts[lineno - 1] : self.line_starts[lineno]]
        return line[: len(line) - len(line.lstrip())]

    def insert_after_line(self, lineno: int, lines: list[str]) -> None:
        at = self.line_starts[lineno] if lineno < len(self.line_starts) else len(self.text)
        prefix = "" if at == 0 or self.text[at - 1] == "\n" else "\n"
        self.changes.append((at, at, prefix + "".join(f"{line}\n" for line in lines)))

    def calls_at(self, line: int) -> list[ast.Call]:
        """Calls whose span holds `line`, innermost (shortest) first."""
        calls = [
            n
            for n in ast.walk(self.tree)
            if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
        ]
        return sorted(calls, key=lambda c: ((c.end_lineno or c.lineno) - c.lineno, -c.col_offset))

    def imports_torch(self) -> bool:
        return any(
            isinstance(n, ast.Import)
            and any(a.name.split(".")[0] == "torch" and a.asname is None for a in n.names)
            for n in ast.walk(self.tree)
        )

    def imports_name(self, name: str) -> bool:
        """Whether the file imports `name` itself (`from ... import name`)."""
        return any(
            isinstance(n, ast.ImportFrom) and any((a.asname or a.name) == name for a in n.names)
            for n in ast.walk(self.tree)
        )

    def after_imports_line(self) -> int:
        """The last line of the leading imports (after docstring and __future__), or 0."""
        last = 0
        for index, stmt in enumerate(self.tree.body):
            docstring = (
                index == 0
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            )
            if isinstance(stmt, ast.Import | ast.ImportFrom) or docstring:
                last = stmt.end_lineno or stmt.lineno
            else:
                break
        return last

    def patched(self) -> str:
        text = self.text
        line = self.after_imports_line()
        at = self.line_starts[line] if line < len(self.line_starts) else len(text)
        missing = [i for i in self.needs_imports if not self.imports_name(i.split()[-1])]
        for imported in reversed(missing):
            self.changes.insert(0, (at, at, imported + "\n"))
        if self.needs_torch and not self.imports_torch():
            self.changes.insert(0, (at, at, "import torch\n"))  # before lines put there
        # Insertions at one offset keep the order they were made in.
        ordered = sorted(enumerate(self.changes), key=lambda c: (c[1][0], c[0]), reverse=True)
        for _, (start, end, new) in ordered:
            text = text[:start] + new + text[end:]
        return text


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _literal(value: Any) -> str:
    return repr(value)


def _set_arguments(
    src: _Source, call: ast.Call, wanted: dict[str, str], positions: Mapping[str, int]
) -> list[str]:
    """Set keyword arguments of `call` to source texts (replace a keyword or a positional
    argument in place, else add the keyword). Returns the names changed; [] when nothing
    needed to change. Raises _Unmappable when `**kwargs` could already hold a missing name."""
    changed: list[str] = []
    missing: dict[str, str] = {}
    keywords = {k.arg: k for k in call.keywords if k.arg is not None}
    starred = any(isinstance(a, ast.Starred) for a in call.args)
    for name, text in wanted.items():
        if name in keywords:
            node = keywords[name].value
        elif name in positions and len(call.args) > positions[name] and not starred:
            node = call.args[positions[name]]
        else:
            missing[name] = text
            continue
        if src.source(node) != text:
            start, end = src.span(node)
            src.changes.append((start, end, text))
            changed.append(name)
    if not missing:
        return changed
    if any(k.arg is None for k in call.keywords):
        raise _Unmappable(f"the call passes **kwargs, which may already hold {next(iter(missing))}")
    added = [f"{name}={text}" for name, text in missing.items()]
    changed += list(missing)
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    last = max(
        arguments,
        key=lambda n: ((n.end_lineno or 0), (n.end_col_offset or 0)),
        default=None,
    )
    _, call_end = src.span(call)
    close = call_end - 1  # the closing parenthesis
    if last is None:
        src.changes.append((close, close, ", ".join(added)))
        return changed
    _, last_end = src.span(last)
    between = src.text[last_end:close]
    if "\n" in between:
        # One argument per line: a new line each, indented as the last argument's line,
        # keeping the call's trailing-comma style.
        indent = src.line_indent(last.lineno)
        first_on_line = src.text[src.line_starts[last.lineno - 1] : src.span(last)[0]].strip() == ""
        if not first_on_line:
            indent = src.line_indent(last.lineno) + "    "
        trailing = between.lstrip().startswith(",")
        at = last_end + (between.index(",") + 1 if trailing else 0)
        body = "".join(f"\n{indent}{a}," for a in added)
        if not trailing:
            body = "," + body[:-1]
        src.changes.append((at, at, body))
    else:
        src.changes.append((last_end, last_end, "".join(f", {a}" for a in added)))
    return changed


class _Unmappable(Exception):
    """A knob's recorded location cannot be edited; the message says why."""


# ---- the knobs ----------------------------------------------------------------------------


@dataclass
class _Builder:
    root: Path
    record: InjectionRecord
    recipe: Mapping[str, Any]
    script: Path | None
    sources: dict[Path, _Source | None] = field(default_factory=dict)
    edits: list[PatchEdit] = field(default_factory=list)
    snippets: list[PatchSnippet] = field(default_factory=list)

    def source(self, path: Path) -> _Source:
        path = path.resolve()
        try:
            path.relative_to(self.root)
        except ValueError:
            raise _Unmappable(f"{path} is outside {self.root}") from None
        if path not in self.sources:
            self.sources[path] = _Source.load(path)
        src = self.sources[path]
        if src is None:
            raise _Unmappable(f"{path} is not a readable Python file")
        return src

    def rel(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    def sites(self, knob: str) -> list[tuple[Path, int]]:
        outcome = self.record.outcome(knob)
        if outcome is None or outcome.status != "applied":
            return []
        found: list[tuple[Path, int]] = []
        for entry in outcome.applied_at:
            site = parse_site(entry, self.root)
            if site is not None and site not in found:
                found.append(site)
        return found

    def call_at(
        self, path: Path, line: int, callee: str, shown: str = ""
    ) -> tuple[_Source, ast.Call]:
        """The file's source and the innermost call of `callee` holding `line`, or
        `_Unmappable` naming the call (as `shown`, else its name) and the place."""
        src = self.source(path)
        call = next((c for c in src.calls_at(line) if _callee(c) == callee), None)
        if call is None:
            raise _Unmappable(f"no {shown or callee} call at {self.rel(path)}:{line}")
        return src, call

    def applied(self, knob: str) -> bool:
        outcome = self.record.outcome(knob)
        return outcome is not None and outcome.status == "applied"

    def edited(self, knob: str, path: Path, line: int, what: str) -> None:
        self.edits.append(PatchEdit(knob=knob, file=self.rel(path), line=line, what=what))

    def snippet(self, knob: str, where: str, code: str) -> None:
        self.snippets.append(PatchSnippet(knob=knob, where=where, code=code))

    # ---- DataLoader ----

    def loaders(self) -> None:
        knobs = [k for k in loader_knobs() if self.applied(k)]
        per_site: dict[tuple[Path, int], dict[str, str]] = {}
        for knob in knobs:
            for site in self.sites(knob):
                per_site.setdefault(site, {})[knob] = _literal(self.recipe[knob])
        for (path, line), wanted in per_site.items():
            try:
                src = self.source(path)
                call = next((c for c in src.calls_at(line) if "DataLoader" in _callee(c)), None)
                if call is None:
                    raise _Unmappable(f"no DataLoader call at {self.rel(path)}:{line}")
                for knob in _set_arguments(src, call, wanted, _loader_positions()):
                    self.edited(knob, path, call.lineno, f"DataLoader({knob}={wanted[knob]})")
            except _Unmappable as exc:
                for knob, text in wanted.items():
                    self.snippet(knob, str(exc), f"DataLoader(..., {knob}={text})")
        for knob in knobs:
            if not self.sites(knob):
                self.snippet(
                    knob,
                    "the DataLoader call (its location was not recorded)",
                    f"DataLoader(..., {knob}={_literal(self.recipe[knob])})",
                )

    # ---- optimizer ----

    def calls(self) -> None:
        """Knobs written by editing a call the injection acted at (`CallEdit`), in catalogue
        order, each by its call's editor."""
        editors = {
            EditedCall.OPTIMIZER: self.optimizer,
            EditedCall.ZERO_GRAD: self.zero_grad,
            EditedCall.SET_NUM_THREADS: self.threads,
            EditedCall.FULLY_SHARD: self.fully_shard,
        }
        for knob in catalogue():
            if isinstance(knob.write_back, CallEdit) and self.applied(knob.name):
                editors[knob.write_back.call](knob.name)

    def optimizer(self, name: str) -> None:
        """The optimizer's constructor gets the implementation's keywords (the knob's
        `OptimizerArgument`, as the injection passed them); a keyword absent from the call is
        added only where it is True, or to ask for the for-loop explicitly."""
        impl = str(self.recipe[name])
        part = get_knob(name).applies_to
        assert isinstance(part, OptimizerArgument)  # the catalogue test holds it to that
        wanted_all = dict(part.kwargs(impl))
        outcome = self.record.outcome(name)
        assert outcome is not None
        for entry in outcome.applied_at:
            site = parse_site(entry, self.root)
            cls = entry.split("(", 1)[0].strip()
            try:
                if site is None:
                    raise _Unmappable("the optimizer's location was not recorded")
                path, line = site
                src, call = self.call_at(path, line, cls, f"{cls}(...)")
                present = {k.arg for k in call.keywords}
                wanted = {
                    k: _literal(v)
                    for k, v in wanted_all.items()
                    if k in present or v or (impl == "for_loop" and k == "foreach")
                }
                if _set_arguments(src, call, wanted, {}):
                    self.edited(name, path, call.lineno, f"{cls}({impl})")
            except _Unmappable as exc:
                shown = ", ".join(f"{k}={v}" for k, v in wanted_all.items() if v)
                self.snippet(name, str(exc), f"torch.optim.{cls}(params, ..., {shown})")

    def zero_grad(self, name: str) -> None:
        value = bool(self.recipe[name])
        for path, line in self.sites(name):
            try:
                src, call = self.call_at(path, line, "zero_grad")
                keywords = {k.arg for k in call.keywords}
                if value and not call.args and "set_to_none" not in keywords:
                    continue  # torch's default is set_to_none=True already
                wanted = {"set_to_none": _literal(value)}
                if _set_arguments(src, call, wanted, {"set_to_none": 0}):
                    self.edited(name, path, call.lineno, f"zero_grad(set_to_none={value})")
            except _Unmappable as exc:
                self.snippet(name, str(exc), f"optimizer.zero_grad(set_to_none={value})")

    def fully_shard(self, name: str) -> None:
        """Each `fully_shard(...)` call the knob acted at gets its keywords (the knob's
        `FSDPArgument.source`), and the file the import its text needs."""
        part = get_knob(name).applies_to
        assert isinstance(part, FSDPArgument) and part.source is not None
        wanted = dict(part.source(self.recipe[name]))
        if not wanted:
            return
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        for path, line in self.sites(name):
            try:
                src, call = self.call_at(path, line, "fully_shard")
                if _set_arguments(src, call, wanted, {}):
                    self.edited(name, path, call.lineno, f"fully_shard(..., {shown})")
                    src.needs_torch = src.needs_torch or "torch." in shown
                    if part.imports is not None and part.imports not in src.needs_imports:
                        src.needs_imports.append(part.imports)
            except _Unmappable as exc:
                code = f"fully_shard(module, ..., {shown})"
                if part.imports is not None:
                    code = f"{part.imports}\n{code}"
                self.snippet(name, str(exc), code)

    # ---- threads ----

    def threads(self, name: str) -> None:
        n = int(self.recipe[name])
        own = self.sites(name)
        code = f"torch.set_num_threads({n})"
        try:
            if own:  # the script sets its own count: change it there
                for path, line in own:
                    src = self.source(path)
                    call = next(
                        (c for c in src.calls_at(line) if _callee(c) == "set_num_threads"), None
                    )
                    if call is None or len(call.args) != 1:
                        raise _Unmappable(f"no set_num_threads(N) call at {self.rel(path)}:{line}")
                    start, end = src.span(call.args[0])
                    src.changes.append((start, end, str(n)))
                    self.edited(name, path, call.lineno, code)
                return
        except _Unmappable as exc:
            self.snippet(name, f"at the top of the script, after its imports ({exc})", code)
            return
        self.after_imports(name, code)

    def top_lines(self) -> None:
        """Knobs written as a line after the script's imports (`TopLine`)."""
        for knob in catalogue():
            part = knob.write_back
            if not isinstance(part, TopLine) or not self.applied(knob.name):
                continue
            self.after_imports(knob.name, part.line(self.recipe[knob.name]))

    def after_imports(self, name: str, code: str) -> None:
        """`code` as a line of the script after its imports, or a snippet saying where."""
        try:
            if self.script is None:
                raise _Unmappable("the script's file is not known")
            src = self.source(self.script)
            line = src.after_imports_line()
            src.insert_after_line(line, [code])
            src.needs_torch = True
            self.edited(name, self.script, line + 1, code)
        except _Unmappable as exc:
            self.snippet(name, f"at the top of the script, after its imports ({exc})", code)

    # ---- the model ----

    def model(self) -> None:
        parts = sorted(
            (
                (knob.name, knob.write_back)
                for knob in catalogue()
                if isinstance(knob.write_back, ModelLine) and self.applied(knob.name)
            ),
            key=lambda item: item[1].order,
        )
        lines: list[tuple[str, str]] = []
        for name, part in parts:
            text = part.line(self.recipe.get(name), self.recipe)
            if text is not None:
                lines.append((name, text))
        if not lines:
            return
        site = next(
            (s for knob, _ in lines for s in self.sites(knob)), None
        )  # the model's first training call
        try:
            if site is None:
                raise _Unmappable("the model's location was not recorded")
            path, line = site
            src = self.source(path)
            name, end, indent = self._model_assignment(src, line)
            src.insert_after_line(end, [indent + text.replace("model", name) for _, text in lines])
            src.needs_torch = True
            for knob, text in lines:
                self.edited(knob, path, end + 1, text.replace("model", name))
        except _Unmappable as exc:
            for knob, text in lines:
                self.snippet(knob, f"right after the line that builds the model ({exc})", text)
        for name, part in parts:
            if part.also is not None:
                self.snippet(name, *part.also)

    def _model_assignment(self, src: _Source, line: int) -> tuple[str, int, str]:
        """Where the model's lines go: (name called at `line` that holds the model, the line
        to insert after, its indentation).

        After the last assignment of that name that always runs before the call (in a block
        that encloses the call: not in a branch the call is outside of); with only
        conditional ones (`if ...: model = A() else: model = B()`), just before the
        outermost loop around the call; else _Unmappable."""
        calls = src.calls_at(line)
        parents = {
            id(child): node for node in ast.walk(src.tree) for child in ast.iter_child_nodes(node)
        }
        call = next((c for c in calls if isinstance(c.func, ast.Name)), None)
        if call is None:
            raise _Unmappable(f"no call of a named module at {self.rel(src.path)}:{line}")
        chain: list[ast.AST] = [call]  # the call's ancestors, innermost first
        while id(chain[-1]) in parents:
            chain.append(parents[id(chain[-1])])

        def assignments(name: str) -> list[ast.stmt]:
            return [
                n
                for n in ast.walk(src.tree)
                if isinstance(n, ast.Assign | ast.AnnAssign)
                and n.lineno < line
                and any(
                    isinstance(t, ast.Name) and t.id == name
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                )
            ]

        names = [c.func.id for c in calls if isinstance(c.func, ast.Name)]
        named = [n for n in names if assignments(n)]
        if not named:
            raise _Unmappable(
                f"no assignment of the module called at {self.rel(src.path)}:{line} was found"
            )
        cls = self.record.model
        # the name built from the trained module's class, else the innermost call's
        name = next(
            (n for n in named if cls and any(cls in src.source(a) for a in assignments(n))),
            named[0],
        )

        def encloses(stmt: ast.stmt) -> bool:
            parent = parents.get(id(stmt))
            if parent is None or parent not in chain:
                return False
            child = chain[chain.index(parent) - 1]  # the call's ancestor directly in parent
            for _, value in ast.iter_fields(parent):
                if isinstance(value, list) and stmt in value:
                    return child in value
            return False

        always = [a for a in assignments(name) if encloses(a)]
        if always:
            last = max(always, key=lambda a: a.lineno)
            return name, last.end_lineno or last.lineno, src.line_indent(last.lineno)
        loops = [n for n in chain if isinstance(n, ast.For | ast.While | ast.AsyncFor)]
        if loops:
            loop = loops[-1]
            return name, loop.lineno - 1, src.line_indent(loop.lineno)
        raise _Unmappable(f"{name} is assigned only in branches that do not enclose its call")

    # ---- knobs with no line ----

    def rest(self) -> None:
        """Knobs with no line to edit: their `Snippet`, in catalogue order."""
        device = self.record.device_type or "cuda"
        for knob in catalogue():
            part = knob.write_back
            if not isinstance(part, Snippet) or not self.applied(knob.name):
                continue
            code = part.code(self.recipe.get(knob.name), device)
            if code is not None:
                self.snippet(knob.name, part.where, code)

    def diff(self) -> str:
        chunks: list[str] = []
        for path, src in sorted(self.sources.items()):
            if src is None:
                continue
            new = src.patched()
            if new == src.text:
                continue
            rel = self.rel(path)
            for line in difflib.unified_diff(
                src.text.splitlines(keepends=True),
                new.splitlines(keepends=True),
                f"a/{rel}",
                f"b/{rel}",
            ):
                chunks.append(
                    line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                )
        return "".join(chunks)


def build_patch(
    recipe: Mapping[str, Any],
    record: InjectionRecord,
    root: str | Path,
    *,
    script: str | Path | None = None,
) -> CurePatch:
    """The recipe as a diff of the source under `root` plus snippets (module doc).

    `record` is the injection record of a run of the script under `recipe` (only knobs it
    says applied are written); `script` is the script's file, where `torch.set_num_threads`
    goes when the script sets none of its own.
    """
    base = Path(root).resolve()
    script_path = None
    if script is not None:
        script_path = Path(script) if Path(script).is_absolute() else base / script
    builder = _Builder(base, record, recipe, script_path)
    builder.loaders()
    builder.calls()
    builder.top_lines()
    builder.model()
    builder.rest()
    return CurePatch(diff=builder.diff(), edits=builder.edits, snippets=builder.snippets)
