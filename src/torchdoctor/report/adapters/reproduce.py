"""How to reproduce: the command that made the run, and the best recipe as code."""

from __future__ import annotations

import pprint
import shlex
from pathlib import Path

from torchdoctor.core.rundir import display_path
from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import JsonDict, items, mapping, num, text
from torchdoctor.report.load import RunRecords
from torchdoctor.report.views import ReproduceSection


def shown_path(path: Path) -> str:
    """The run folder as `torchdoctor report` would be given it (never a climb of `../..`)."""
    shown = display_path(path)
    return str(path.resolve()) if shown.startswith("..") else shown


def reproduce(found: RunRecords) -> ReproduceSection:
    """The reproduce section of a run folder (or a lone record)."""
    tune = found.records.get("tune")
    return reproduce_section(found.manifest, tune, shown_path(found.source), found.recipe_snippet)


def _set_args(recipe: dict[str, object]) -> str:
    return " ".join(f"--set {shlex.quote(f'{k}={fmt.value_text(v)}')}" for k, v in recipe.items())


def reproduce_section(
    manifest: JsonDict | None, tune: JsonDict | None, source: str, snippet: str | None = None
) -> ReproduceSection:
    commands: list[str] = []
    argv = [str(a) for a in items(manifest, "command")]
    if argv:
        # argv[0] is the interpreter's path to the console script; show the command name.
        commands.append(shlex.join(["torchdoctor", *argv[1:]]))
    recipe_code = None
    if tune is not None:
        best = mapping(tune, "best_recipe")
        workload = text(tune, "workload") or "WORKLOAD"
        run = f"torchdoctor run {shlex.quote(workload)}"
        commands.append(f"{run} {_set_args(best)}".rstrip())
        header = (
            f"# Best recipe for {workload} found by torchdoctor tune: "
            f"{fmt.speedup(num(tune, 'speedup'))} the baseline throughput"
        )
        recipe_code = snippet or (
            f"{header}\nBEST_RECIPE = {pprint.pformat(best, sort_dicts=False)}\n"
        )
    commands.append(shlex.join(["torchdoctor", "report", source]))
    return ReproduceSection(commands=commands, recipe_code=recipe_code)
