"""The Python API of the commands that train: `diagnose`, `run` (`tune`: api/tuning.py).

Each does what its command does, with the command's defaults (core/defaults.py), and returns
the record the command prints (`--json`); in a notebook it shows its progress (api/progress.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from torchdoctor.api.command_line import (
    RecipeSource,
    Target,
    _command,
    accepts_old_names,
    assignments,
    read_recipe,
    recipe_strings,
    resolve_device,
)
from torchdoctor.api.progress import notebook_progress
from torchdoctor.core.defaults import (
    DIAGNOSE_PROFILE_STEPS,
    DIAGNOSE_WARMUP,
    DIAGNOSE_WORKLOAD_STEPS,
    MIN_WARMUP_STEPS,
)
from torchdoctor.core.errors import DiagnoseError, UsageError

if TYPE_CHECKING:
    from torchdoctor.collect import ScriptRun
    from torchdoctor.diagnose import Diagnosis, Examination
    from torchdoctor.engine import RunResult


@accepts_old_names(settings="recipe")
def diagnose(
    target: Target,
    *,
    recipe: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    steps: int | None = None,
    warmup: int = DIAGNOSE_WARMUP,
    profile_steps: int = DIAGNOSE_PROFILE_STEPS,
    device: str | None = None,
    out: str | Path | None = None,
) -> Diagnosis:
    """Name the bottleneck of a script, a workload or a profiler trace (`torchdoctor diagnose`).

    `target`: a script's command line (`["python", "train.py", "--epochs", "1"]`), a
    workload (`"cnn"`, `"path/to/file.py:factory"`) or a trace (a `Path` to a .json[.gz] file
    or a folder of per-rank traces). Returns the `Diagnosis` (of rank 0 for a torchrun job;
    every rank's is in the run folder, `out`, else a new one under torchdoctor-runs/).

    `recipe`: knob values for a workload (`{"threads": 2}`, `--set`); `params`: the
    workload's own parameters (`{"attention": "manual"}`, `--param`); `device`: a workload's
    (default: CUDA when present); `steps`: end a script after that many steps (a workload
    runs 20). Raises `DiagnoseError` when nothing could be diagnosed.

    Example:
        >>> d = torchdoctor.diagnose("mlp", recipe={"threads": 1}, device="cpu")
        >>> d.primary_bottleneck, [f.title for f in d.findings]
    """
    folder = Path(out) if out is not None else None
    with notebook_progress(f"diagnose {_shown(target)}") as bar:
        exam = examine(
            _command(target),
            str(target),
            settings=recipe_strings(recipe),
            params=params,
            steps=steps,
            warmup=warmup,
            profile_steps=profile_steps,
            device=device,
            out=folder,
        )
        if bar is not None:
            bar.update(1, 1, description=f"diagnosed {_shown(target)}")
    if exam.diagnosis is None:
        raise DiagnoseError(exam.error or "nothing was diagnosed", hint=f"see {exam.run_dir}")
    return exam.diagnosis


#: Endings of the trace files `diagnose` reads (Kineto JSON, optionally gzipped).
TRACE_ENDINGS: Final = (".json", ".json.gz", ".gz")


def looks_like_a_path(target: str) -> bool:
    """A target that names a file (a trace ending, or a folder separator), not a workload."""
    if ":" in target:  # path/to/file.py:factory is a user workload
        return False
    return target.endswith(TRACE_ENDINGS) or "/" in target or os.sep in target


def examine(
    command: tuple[list[str], bool] | None,
    target: str,
    *,
    settings: Mapping[str, str],
    params: Mapping[str, Any] | None,
    steps: int | None,
    warmup: int,
    profile_steps: int,
    device: str | None,
    out: Path | None,
    stdout_to_stderr: bool = False,
) -> Examination:
    """What `diagnose` runs, for this API and the command: a script's command line (`command`,
    as `parse_command` read it), else `target`, a trace file or folder, else a workload run
    with the knob values `settings` (`--set`) and its own `params`. A path that does not
    exist is refused as one (it is no workload's name). `stdout_to_stderr`: the script's
    output goes to stderr (`--json`'s stdout holds the record only)."""
    from torchdoctor.diagnose import examine_script, examine_trace, examine_workload

    if command is not None:
        argv, module = command
        return examine_script(
            argv,
            module=module,
            steps=steps,
            warmup=warmup,
            profile_steps=profile_steps,
            out=out,
            stdout_to_stderr=stdout_to_stderr,
        )
    if Path(target).exists() and not target.endswith(".py"):
        return examine_trace(Path(target), out=out)
    if looks_like_a_path(target):
        raise UsageError(
            f"no such trace file or folder: {target}",
            hint="give an existing trace (.json, .json.gz or a folder of them), a workload "
            "name (see `torchdoctor workloads`), or a script after `--`",
        )
    return examine_workload(
        target,
        dict(settings),
        steps=steps or DIAGNOSE_WORKLOAD_STEPS,
        warmup=warmup,
        profile_steps=profile_steps,
        out=out,
        device=resolve_device(device),
        params=params,
    )


def _shown(target: Target) -> str:
    """A target as one short label (a command line's words joined)."""
    if isinstance(target, str | Path):
        return str(target)
    return " ".join(str(w) for w in target)


@accepts_old_names(settings="recipe")
def run(
    target: Target,
    *,
    recipe: RecipeSource | None = None,
    params: Mapping[str, Any] | None = None,
    steps: int | None = None,
    warmup: int = MIN_WARMUP_STEPS,
    device: str | None = None,
    seed: int = 0,
    measure_phases: bool = True,
    progress: Callable[[int, int], None] | None = None,
    out: str | Path | None = None,
) -> RunResult | ScriptRun:
    """Train a workload under a recipe and time it (`torchdoctor run WORKLOAD`), or run a
    script unmodified, as it is or with the recipe injected (`torchdoctor run -- python
    train.py`).

    `target`: a built-in workload or `path/to/file.py:factory`, or a script's command line
    (`["python", "train.py", "--epochs", "1"]`, `"python -m pkg.train"`, a torchrun job).
    `recipe`: knob -> value (`--set`, e.g. a `TuneResult.best_recipe`), or the path of a
    recipe file (best_recipe.json, tune.json) or a tune run folder (`--recipe`).

    A workload returns the `RunResult`: steady throughput (the number the tuner measures for
    the same recipe), the phase split (unless `measure_phases=False`, `--throughput`), peak
    memory, the loss at every step; `params` are its own parameters, `device` and `seed` its
    own, and `progress(done, total)` is called as steps complete (in a notebook, a bar is
    drawn when none is given). It writes no run folder.

    A script returns the `ScriptRun`: its steady step time and throughput by the tuner's
    rule, and which knobs applied; `steps` ends it after that many steps, `warmup` is the
    least before timing, and the run folder is `out`, else a new one under
    torchdoctor-runs/. A script that fails is recorded (its `exit_code` and `error`), not
    raised. To measure the recipe against the job as it is, `torchdoctor.recheck`.

    Example:
        >>> r = torchdoctor.run("mlp", recipe={"threads": 1}, steps=30, device="cpu")
        >>> r.samples_per_s, r.peak_memory_bytes
        >>> s = torchdoctor.run(["python", "train.py"], recipe="runs/tune/best_recipe.json")
        >>> s.samples_per_s, [k.status for k in s.injection.knobs]
    """
    command = _command(target)
    if command is not None:
        from torchdoctor.api.script_run import script_run

        return script_run(
            command,
            recipe,
            params=params,
            steps=steps,
            warmup=warmup,
            device=device,
            measure_phases=measure_phases,
            out=out,
        )
    if out is not None:
        raise UsageError(
            "out= cannot be honoured for a workload's run",
            hint="it writes no run folder: its record is the RunResult returned",
        )
    from torchdoctor.engine import run_workload
    from torchdoctor.knobs import Recipe
    from torchdoctor.measure import watch_load
    from torchdoctor.workloads import get_workload

    workload = str(target)
    device_name = resolve_device(device)
    job = get_workload(workload, **dict(params or {}))
    parsed = Recipe.parse(assignments(read_recipe(recipe)), workload=job, device=device_name)
    with notebook_progress(f"run {workload}") as bar:
        report = progress
        if report is None and bar is not None:
            report = bar.update
        with watch_load() as load:
            result = run_workload(
                job,
                parsed,
                steps=steps,
                warmup_steps=warmup,
                measure_phases=measure_phases,
                device=device_name,
                seed=seed,
                progress=report,
            )
    return result.model_copy(update={"machine_load": load.reading})
