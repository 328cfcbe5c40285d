"""The Python API of the commands that train: `diagnose`, `tune`, `run`.

Each does what its command does, with the command's defaults (core/defaults.py), and returns
the record the command prints (`--json`); in a notebook it shows its progress (api/progress.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
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
    workload_options,
)
from torchdoctor.api.progress import notebook_progress
from torchdoctor.core.defaults import (
    DEFAULT_MIN_GAIN,
    DEFAULT_REPLICATES,
    DIAGNOSE_PROFILE_STEPS,
    DIAGNOSE_WARMUP,
    DIAGNOSE_WORKLOAD_STEPS,
    MIN_WARMUP_STEPS,
    TUNE_BUDGET_S,
)
from torchdoctor.core.errors import DiagnoseError, UsageError

if TYPE_CHECKING:
    from torchdoctor.collect import ScriptRun
    from torchdoctor.core.vocabulary import Objective
    from torchdoctor.diagnose import Diagnosis, Examination
    from torchdoctor.engine import RunResult
    from torchdoctor.tune import Trial, TuneConfig, Tuner, TuneResult


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


def tune_config(
    target: Target,
    *,
    budget_s: float = TUNE_BUDGET_S,
    recipe: Mapping[str, Any] | None = None,
    knobs: Sequence[str] | None = None,
    device: str | None = None,
    seed: int = 0,
    min_gain: float = DEFAULT_MIN_GAIN,
    objective: Objective = "throughput",
    max_memory_bytes: int | None = None,
    max_memory_fraction: float | None = None,
    params: Mapping[str, Any] | None = None,
    pairs: int = DEFAULT_REPLICATES,
    joint_trials: int = 0,
    hold_effective_batch: bool = False,
    search_batch: bool = True,
    storage: str | None = None,
) -> TuneConfig:
    """The study `tune` runs on `target` (a workload, or a script's command line), before any
    diagnosis: the one place a study's config is built, for this API and the command alike.

    A script's batch is its own: its study searches none (`search_batch` is for workloads).
    A bad workload, parameter or knob raises here, before anything is written. `pairs`: most
    fresh process pairs of the final A/B; `storage`: a shared study's public URL.

    Example:
        >>> torchdoctor.api.tune_config("mlp", budget_s=60, knobs=["threads"]).budget_s
        60.0
    """
    from torchdoctor.knobs import Recipe
    from torchdoctor.tune import TuneConfig

    device_name = resolve_device(device)
    common: dict[str, Any] = {
        "device": device_name,
        "seed": seed,
        "budget_s": budget_s,
        "knobs": list(knobs) if knobs else None,
        "objective": objective,
        "max_memory_bytes": max_memory_bytes,
        "max_memory_fraction": max_memory_fraction,
        "joint_trials": joint_trials,
        "storage": storage,
        "min_gain": min_gain,
        "final_pairs": pairs,
    }
    command = _command(target)
    if command is not None:
        argv, module = command
        name = argv[0] if module else Path(argv[0]).stem
        return TuneConfig(
            workload=f"script:{name}",
            command=argv,
            module=module,
            cwd=os.getcwd(),
            baseline_recipe=Recipe.parse(assignments(recipe), device=device_name).to_dict(),
            search_batch=False,
            **common,
        )
    from torchdoctor.core.errors import TorchDoctorError, TuneError
    from torchdoctor.workloads import get_workload

    workload = str(target)
    try:
        job = get_workload(workload, **dict(params or {}))
    except TorchDoctorError as exc:
        raise TuneError(f"cannot tune workload {workload!r}: {exc}") from None
    baseline = Recipe.parse(assignments(recipe), workload=job, device=device_name)
    return TuneConfig(
        workload=workload,
        factory_options=workload_options(params),
        baseline_recipe=baseline.to_dict(),
        hold_effective_batch=hold_effective_batch,
        search_batch=search_batch,
        **common,
    )


@accepts_old_names(settings="recipe")
def tune(
    target: Target,
    *,
    budget_s: float = TUNE_BUDGET_S,
    recipe: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    knobs: Sequence[str] | None = None,
    device: str | None = None,
    seed: int = 0,
    min_gain: float = DEFAULT_MIN_GAIN,
    pairs: int = DEFAULT_REPLICATES,
    joint_trials: int = 0,
    hold_effective_batch: bool = False,
    search_batch: bool = True,
    diagnose_first: bool = True,
    objective: Objective = "throughput",
    max_memory_bytes: int | None = None,
    max_memory_fraction: float | None = None,
    storage: str | None = None,
    out: str | Path | None = None,
) -> TuneResult:
    """Find the fastest recipe that still learns the same, with proof (`torchdoctor tune`).

    A workload or a script (a command line) climbs the ladder within `budget_s` seconds (a
    hard stop): each change measured against the best so far, kept only when the lower bound
    of its speedup clears `1 + min_gain` and its loss matches; then the best recipe against
    the baseline in up to `pairs` fresh process pairs. Returns the `TuneResult`
    (`best_recipe`, `speedup`, `speedup_ci`, the ladder in `trials`).

    `recipe`: the baseline's knob values (`--set`); `knobs`: only these knobs are tried;
    `params`: a workload's own parameters, with which every trial builds it;
    `diagnose_first`: a workload is diagnosed first and the prescribed knobs lead the ladder
    (`--no-diagnose` turns it off). `objective="fit"`: the memory ladder under
    `max_memory_bytes`, or `max_memory_fraction` of the baseline's peak (its result's `fit`
    holds the ladder); a `batch_size` in `recipe` is the batch to fit, else the largest batch
    that fits is searched. `joint_trials`: Optuna trials after the ladder; `storage`: a
    shared study's database URL. The study is `tune_config`'s.

    Example:
        >>> t = torchdoctor.tune("mlp", budget_s=60, knobs=["threads"], device="cpu")
        >>> t.best_recipe, t.speedup, t.speedup_ci
    """
    config = tune_config(
        target,
        budget_s=budget_s,
        recipe=recipe,
        knobs=knobs,
        device=device,
        seed=seed,
        min_gain=min_gain,
        objective=objective,
        max_memory_bytes=max_memory_bytes,
        max_memory_fraction=max_memory_fraction,
        params=params,
        pairs=pairs,
        joint_trials=joint_trials,
        hold_effective_batch=hold_effective_batch,
        search_batch=search_batch,
        storage=storage,
    )
    folder = Path(out) if out is not None else None
    with notebook_progress(f"tune {_shown(target)}: diagnosing") as bar:
        if config.command is None and diagnose_first and objective != "fit":
            # The memory ladder's order is its own; a script is not diagnosed first.
            folder, prescribed = diagnosed_run_dir(
                config.workload,
                folder,
                device=config.device,
                settings=recipe_strings(recipe),
                params=dict(params or {}),
            )
            config = config.model_copy(update={"prescribed": prescribed})
        return _tune_study(config, folder, _ladder_progress(bar, _shown(target)))


def diagnosed_run_dir(
    workload: str,
    out: Path | None,
    *,
    device: str,
    settings: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
) -> tuple[Path, list[str]]:
    """A study's diagnosis before its ladder, for this API and the commands (`tune`, `demo`):
    the workload diagnosed on `device` with the baseline's `settings` and its own `params`
    into a new run folder (`out`, else one under torchdoctor-runs/), marked "interrupted" if
    it is. Returns the folder and the prescribed knobs, largest bound first."""
    from torchdoctor.core.rundir import marking_interruption, new_run_dir
    from torchdoctor.tune import diagnose_before_tuning

    run_dir = new_run_dir("tune", workload, out=out)
    with marking_interruption(run_dir):
        prescribed = diagnose_before_tuning(
            workload,
            run_dir,
            device=device,
            settings=dict(settings) if settings is not None else None,
            params=dict(params) if params is not None else None,
        )
    return run_dir, prescribed


def _tune_study(
    config: TuneConfig,
    folder: Path | None,
    hooks: tuple[Callable[[Tuner, int], None], Callable[[Trial, Tuner], None]] | None,
) -> TuneResult:
    """The tune stage's `tune`, looked up when called (tests replace it on the stage)."""
    import importlib

    # By its full name: `torchdoctor.tune` on the package is this API's function.
    stage = importlib.import_module("torchdoctor.tune")
    if hooks is None:
        return stage.tune(config=config, out=folder)
    on_start, on_trial = hooks
    return stage.tune(config=config, out=folder, on_start=on_start, on_trial=on_trial)


def _ladder_progress(
    bar: Any, label: str
) -> tuple[Callable[[Tuner, int], None], Callable[[Trial, Tuner], None]] | None:
    """The tuner's hooks that move a notebook's bar: one step per decided trial, of those
    planned; None outside a notebook."""
    if bar is None:
        return None

    def on_start(tuner: Tuner, planned: int) -> None:
        bar.update(0, max(planned, 1), description=f"tune {label}: measuring the baseline")

    def on_trial(trial: Trial, tuner: Tuner) -> None:
        change = ", ".join(f"{k}={v}" for k, v in getattr(trial, "change", {}).items())
        bar.advance(description=f"tune {label}: {change or 'baseline'} decided")

    return on_start, on_trial


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
