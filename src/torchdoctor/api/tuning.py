"""`torchdoctor.tune`: the Python API of `torchdoctor tune`, and the steps the command shares.

`tune` checks what it is given (`check_objective`, `check_study_out`, `check_target`), opens
a shared study's storage (`open_storage`), builds the study (`tune_config`), diagnoses a
workload first (`diagnosed_run_dir`) and runs the study, or continues a stored one
(`tune_into`), telling a `TuneProgress` as it goes. The command calls `tune` with its own
`TuneProgress` (the live view, or a plain line per event on stderr) and renders the result;
`torchdoctor demo` shares `diagnosed_run_dir` and `tune_into`. What either refuses is refused
by these checks, in the command's words, before anything is written; the command calls them
first, in turn with what only its command line can tell (an option given that the case
cannot honour, `--force`), so that an input with two faults is told the first.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from torchdoctor.api.command_line import (
    Target,
    TorchDoctorWarning,
    _command,
    accepts_old_names,
    assignments,
    command_words,
    parse_command,
    recipe_strings,
    resolve_device,
    workload_options,
)
from torchdoctor.api.progress import notebook_progress
from torchdoctor.api.training import _shown
from torchdoctor.core import rundir
from torchdoctor.core.defaults import DEFAULT_MIN_GAIN, DEFAULT_REPLICATES, TUNE_BUDGET_S
from torchdoctor.core.errors import UsageError
from torchdoctor.core.vocabulary import OBJECTIVES, check_fit_capped, check_fit_target

if TYPE_CHECKING:
    from torchdoctor.core.vocabulary import Objective
    from torchdoctor.tune import StorageURL, Trial, TuneConfig, Tuner, TuneResult

#: Files of a stored study in a run folder: `out` naming such a folder would reopen the
#: study, which resuming it says out loud.
STORED_STUDY_FILES: Final = (rundir.TUNE_CONFIG, rundir.STUDY)

#: What a storage URL that carries its password is told.
PASSWORD_IN_URL: Final = (
    "the --storage URL carries a password, which any user of this machine can read in the "
    "command line (/proc/PID/cmdline); give it in PGPASSWORD, a password file (~/.pgpass or "
    "PGPASSFILE) or a service file (PGSERVICEFILE) instead"
)


def _warn(message: str) -> None:
    # Raised at the caller of torchdoctor.tune: past this, open_storage, tune and its keyword
    # wrapper.
    warnings.warn(message, TorchDoctorWarning, stacklevel=5)


@dataclass(frozen=True)
class TuneProgress:
    """What a study tells as it goes, each optional: `note`, a remark worth saying (a storage
    URL that carries its password; the API: a `TorchDoctorWarning`); `diagnosed`, the knobs
    the diagnosis prescribed, in the order the ladder tries them; `started`, the tuner and
    the trials it plans, once the ladder is ordered; `decided`, each trial as it is decided;
    `watching`, the context the study runs in (the command's live view)."""

    note: Callable[[str], None] = _warn
    diagnosed: Callable[[list[str]], None] | None = None
    started: Callable[[Tuner, int], None] | None = None
    decided: Callable[[Trial, Tuner], None] | None = None
    watching: Callable[[], AbstractContextManager[Any]] = nullcontext


def check_objective(objective: str, *, capped: bool) -> None:
    """An objective the ladder knows, and `fit` with the cap to fit under (`capped`)."""
    if objective not in OBJECTIVES:
        raise UsageError(f"unknown objective {objective!r}", hint="use throughput, latency or fit")
    check_fit_capped(objective, capped=capped)


def check_study_out(out: Path | None) -> None:
    """Never a new study in a folder that holds a stored one: opening it would continue that
    study, which resuming says out loud."""
    if out is not None and any((out / name).exists() for name in STORED_STUDY_FILES):
        raise UsageError(
            f"--out {out} holds a stored study",
            hint=f"continue it with --resume {out}, or pass a new folder",
        )


def check_target(target: Target | None, objective: str) -> Target:
    """Something to tune, and the memory ladder for a workload only (a script's batch is its
    own); returns `target`."""
    if target is None:
        raise UsageError("no workload to tune", hint="name one, e.g. `torchdoctor tune cnn`")
    check_fit_target(objective, is_script=bool(command_words(target)))
    return target


def open_storage(storage: str | None, note: Callable[[str], None]) -> StorageURL | None:
    """A shared study's storage URL, opened once: a URL that does not parse or a database
    that refuses fails at once, before any folder exists (the password, if the URL has one,
    stays in memory: tune/storage.py); what is worth knowing about it is told to `note`."""
    if not storage:
        return None
    from torchdoctor.tune import StorageURL, Study, cleartext_note

    url = StorageURL.parse(storage)
    if url.carries_password:
        note(PASSWORD_IN_URL)
    said = cleartext_note(url)
    if said is not None:
        note(said)
    Study(url, shared=True).close()
    return url


def _opened(storage: str | StorageURL | None, progress: TuneProgress | None) -> StorageURL | None:
    """`storage` opened (`open_storage`), unless the caller opened it already."""
    if storage is None or not isinstance(storage, str):
        return storage
    return open_storage(storage, (progress or TuneProgress()).note)


def _refuse(given: Mapping[str, bool], *, case: str, hint: str) -> None:
    """Keywords this case cannot honour, given anyway (the command refuses their options)."""
    names = [f"{name}=" for name, is_given in given.items() if is_given]
    if names:
        raise UsageError(f"{', '.join(names)} cannot be honoured {case}", hint=hint)


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
    diagnosis: the one place a study's config is built.

    A script's batch is its own: its study searches none (`search_batch` is for workloads).
    A bad workload, parameter or knob raises here, before anything is written. `pairs`: most
    fresh process pairs of the final A/B; `storage`: a shared study's public URL.

    Example:
        >>> torchdoctor.api.tune_config("mlp", budget_s=60, knobs=["threads"]).budget_s
        60.0
    """
    from torchdoctor.knobs import Recipe, get_knob
    from torchdoctor.tune import TuneConfig

    for name in knobs or ():
        get_knob(name)  # KnobError: a knob to try that does not exist is refused, not skipped
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
    target: Target | None,
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
    storage: str | StorageURL | None = None,
    resume: str | Path | None = None,
    out: str | Path | None = None,
    progress: TuneProgress | None = None,
) -> TuneResult:
    """Find the fastest recipe that still learns the same, with proof (`torchdoctor tune`).

    `target`: a workload (`"cnn"`, `"path/to/file.py:factory"`) or a script's command line
    (`["python", "train.py", "--epochs", "1"]`, a torchrun job). It climbs the ladder within
    `budget_s` seconds (a hard stop): each change measured against the best so far, kept only
    when the lower bound of its speedup clears `1 + min_gain` and its loss matches; then the
    best recipe against the baseline in up to `pairs` fresh process pairs. Returns the
    `TuneResult` (`best_recipe`, `speedup`, `speedup_ci`, the ladder in `trials`).

    `recipe`: the baseline's knob values (`--set`); `knobs`: only these knobs are tried;
    `params`: a workload's own parameters, with which every trial builds it;
    `diagnose_first`: the job is diagnosed first and the prescribed knobs lead the ladder
    (`--no-diagnose` turns it off; a script or torchrun job only when `knobs` is not given,
    since each diagnosis is a run of it; its batch and parameters are its own).
    `objective="fit"`: the memory ladder under `max_memory_bytes`, or
    `max_memory_fraction` of the baseline's peak (its result's `fit` holds the ladder); a
    `batch_size` in `recipe` is the batch to fit, else the largest batch that fits is
    searched. `joint_trials`: Optuna trials after the ladder; `storage`: a shared study's
    database URL (a password in it is used, with a warning, never written), or one opened
    already (`open_storage`). `resume`: the
    run folder of a study to continue, `target` given again (None for a built-in workload)
    and checked against it; the folder keeps the other settings. `progress`: what to tell as
    the study goes (in a notebook, a bar is drawn when none is given). The run folder is
    `out`, else a new one under torchdoctor-runs/.

    Example:
        >>> t = torchdoctor.tune("mlp", budget_s=60, knobs=["threads"], device="cpu")
        >>> t.best_recipe, t.speedup, t.speedup_ci
        >>> torchdoctor.tune(None, resume=t.run_dir)  # continue it
    """
    # Not read yet: a malformed command line is refused once the storage is open, where
    # `tune_config` (or, resuming, the line below) reads it.
    words = command_words(target) if target is not None else None
    folder = Path(out) if out is not None else None
    if resume is not None:
        _refuse(
            {
                "budget_s": budget_s != TUNE_BUDGET_S,
                "recipe": bool(recipe),
                "params": bool(params),
                "knobs": knobs is not None,
                "device": device is not None,
                "seed": seed != 0,
                "min_gain": min_gain != DEFAULT_MIN_GAIN,
                "pairs": pairs != DEFAULT_REPLICATES,
                "joint_trials": joint_trials != 0,
                "hold_effective_batch": hold_effective_batch,
                "search_batch": not search_batch,
                "diagnose_first": not diagnose_first,
                "objective": objective != "throughput",
                "max_memory_bytes": max_memory_bytes is not None,
                "max_memory_fraction": max_memory_fraction is not None,
                "out": out is not None,
            },
            case="with resume=",
            hint=f"a resumed study keeps the settings stored in {resume}; start a new study "
            "with out= to change them",
        )
        shared = _opened(storage, progress)
        command = parse_command(words) if words else None
        with _drawn(progress, f"--resume {resume}") as said:
            return tune_into(
                None,
                None,
                said,
                storage=shared,
                resume=Path(resume),
                workload=None if command is not None or target is None else str(target),
                command=command,
            )
    check_objective(
        objective, capped=max_memory_bytes is not None or max_memory_fraction is not None
    )
    check_study_out(folder)
    if words:
        _refuse(
            {
                "params": bool(params),
                "hold_effective_batch": hold_effective_batch,
                "search_batch": not search_batch,
            },
            case="for a script",
            hint="a script's batch and parameters are its own",
        )
    target = check_target(target, objective)
    shared = _opened(storage, progress)
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
        storage=shared.public if shared is not None else None,
    )
    with _drawn(progress, _shown(target)) as said:
        # The memory ladder's order is its own. A script or torchrun job is diagnosed first
        # when the diagnosis chooses what to try (no `knobs`): each diagnosis is a run of it.
        script = config.command is not None
        if script:
            importlib.import_module("torchdoctor.tune").check_script_job(config)
        if diagnose_first and objective != "fit" and not (script and knobs is not None):
            folder, prescribed = diagnosed_run_dir(
                config.workload,
                folder,
                device=config.device,
                settings=recipe_strings(recipe),
                params=dict(params or {}),
                command=(config.command, config.module) if config.command is not None else None,
            )
            if said.diagnosed is not None:
                said.diagnosed(prescribed)
            config = config.model_copy(update={"prescribed": prescribed})
        return tune_into(config, folder, said, storage=shared)


def diagnosed_run_dir(
    workload: str,
    out: Path | None,
    *,
    device: str,
    settings: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    command: tuple[list[str], bool] | None = None,
) -> tuple[Path, list[str]]:
    """A study's diagnosis before its ladder, for this API and the commands (`tune`, `demo`):
    the workload diagnosed on `device` with the baseline's `settings` and its own `params`
    (or a script's `command`, argv and module, as it is) into a new run folder (`out`, else
    one under torchdoctor-runs/), marked "interrupted" if it is. Returns the folder and the
    prescribed knobs, largest bound first."""
    from torchdoctor.core.rundir import marking_interruption, new_run_dir
    from torchdoctor.tune import diagnose_before_tuning, diagnose_script_before_tuning

    run_dir = new_run_dir("tune", workload, out=out)
    with marking_interruption(run_dir):
        if command is not None:
            prescribed = diagnose_script_before_tuning(command, run_dir)
        else:
            prescribed = diagnose_before_tuning(
                workload,
                run_dir,
                device=device,
                settings=dict(settings) if settings is not None else None,
                params=dict(params) if params is not None else None,
            )
    return run_dir, prescribed


def tune_into(
    config: TuneConfig | None,
    out: Path | None,
    progress: TuneProgress,
    *,
    storage: StorageURL | None = None,
    resume: Path | None = None,
    workload: str | None = None,
    command: tuple[list[str], bool] | None = None,
) -> TuneResult:
    """Run the study `config` into `out` (or continue the one in `resume`, its `workload`
    file or script `command` given again), in `progress.watching()`, its trials told to
    `progress`: the tune stage's `tune`, looked up when called (tests replace it on the
    stage). `storage`: the shared study's opened URL (`open_storage`)."""
    # By its full name: `torchdoctor.tune` on the package is this API's function.
    stage = importlib.import_module("torchdoctor.tune")
    kwargs: dict[str, Any]
    if resume is not None:
        kwargs = {"resume": resume, "storage": storage}
        kwargs.update({"command": command} if command is not None else {"workload": workload})
    else:
        kwargs = {"config": config, "out": out}
        if storage is not None:
            kwargs["storage"] = storage
    if progress.started is not None:
        kwargs["on_start"] = progress.started
    if progress.decided is not None:
        kwargs["on_trial"] = progress.decided
    with progress.watching():
        result: TuneResult = stage.tune(**kwargs)
    return result


@contextmanager
def _drawn(progress: TuneProgress | None, label: str) -> Iterator[TuneProgress]:
    """`progress`, else in a notebook a bar that moves one step per decided trial, of those
    planned (else nothing told)."""
    if progress is not None:
        yield progress
        return
    with notebook_progress(f"tune {label}: diagnosing") as bar:
        yield ladder_progress(bar, f"tune {label}")


def ladder_progress(bar: Any, label: str) -> TuneProgress:
    """The progress that moves a notebook's `bar` one step per decided trial, of those
    planned; nothing but notes without a bar (outside a notebook)."""
    if bar is None:
        return TuneProgress()

    def started(tuner: Tuner, planned: int) -> None:
        bar.update(0, max(planned, 1), description=f"{label}: measuring the baseline")

    def decided(trial: Trial, tuner: Tuner) -> None:
        change = ", ".join(f"{k}={v}" for k, v in getattr(trial, "change", {}).items())
        bar.advance(description=f"{label}: {change or 'baseline'} decided")

    return TuneProgress(started=started, decided=decided)
