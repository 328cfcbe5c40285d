"""`torchdoctor tune WORKLOAD`: find the fastest recipe that still learns the same, with proof.

`torchdoctor tune [options] -- python train.py ARGS` (or `-- python -m pkg.train ARGS`) tunes a
user's unmodified script the same way: each recipe's knobs injected into the script, the
script driven at its step boundaries: optimizer steps, or backward calls when it has no
torch.optim optimizer (tune/sources.py).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from torchdoctor.cli.main import app
from torchdoctor.cli.options import default_device, device_option, seed_option
from torchdoctor.cli.state import emit, err_console, progress_enabled
from torchdoctor.core.errors import TorchDoctorError, TuneError, UsageError
from torchdoctor.core.interrupt import Interrupted
from torchdoctor.core.rundir import display_path
from torchdoctor.measure import DEFAULT_REPLICATES, MIN_REPLICATES
from torchdoctor.report import render_result
from torchdoctor.tune import StorageURL, Study, Trial, TuneConfig, Tuner, TuneResult, tune

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_duration(text: str) -> float:
    """'10m' -> 600.0; '90s', '1.5h' and plain seconds also work."""
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"cannot read duration {text!r}", hint="write e.g. 10m, 90s or 1h")
    return float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "").lower()]


def parse_size(text: str) -> int:
    """'4GiB' / '4G' / '512MB' -> bytes (binary multiples: memory is sized in pages)."""
    match = _SIZE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"cannot read memory size {text!r}", hint="write e.g. 4GiB or 512MiB")
    return int(float(match.group(1)) * 1024 ** _SIZE_POWERS[match.group(2).lower()])


def run_with_progress(**kwargs: Any) -> TuneResult:
    """Call `tune()` and show it as it goes (report/terminal/live.py's `TuneWatch`).

    On a terminal: a live view on stderr, the diagnosis table first, then the ladder filling
    in as trials are decided, the current trial and the budget left. Without one: one plain
    line per event on stderr, which a log keeps. With --json: nothing (stdout holds the
    record only).
    """
    from torchdoctor.report import TuneWatch

    if settings_json():
        return tune(**kwargs)
    live_view = progress_enabled()
    state: dict[str, TuneWatch] = {}

    def on_start(tuner: Tuner, planned: int) -> None:
        watch = TuneWatch(budget_s=tuner.settings.budget_s)
        watch.diagnosis = _diagnosis_of(tuner)
        watch.start(tuner.planned_order)
        tuner.on_begin = watch.begin
        tuner.on_look = watch.look
        state["watch"] = watch
        if live_view:
            live.update(watch, refresh=True)

    def say(line: str) -> None:
        err_console.print(line, highlight=False, markup=False, soft_wrap=True)

    def on_trial(result: Trial, tuner: Tuner) -> None:
        watch = state["watch"]
        first = not watch.rows
        row = watch.decided(result, tuner.budget.elapsed_s())
        if live_view:
            live.refresh()
            return
        if first:
            # Said with the first decided trial, not at the start: a baseline that fails
            # leaves its one error line alone.
            for line in watch.diagnosis_lines():
                say(line)
        say(watch.line_of(row))

    if not live_view:
        return tune(on_start=on_start, on_trial=on_trial, **kwargs)
    with Live(
        Text("tuning: measuring the baseline first"),
        console=err_console,
        refresh_per_second=LIVE_REFRESH_PER_S,
    ) as live:
        return tune(on_start=on_start, on_trial=on_trial, **kwargs)


#: Redraws of the live view per second: the clock and the current trial's time tick.
LIVE_REFRESH_PER_S = 1


def _diagnosis_of(tuner: Tuner) -> Any:
    """The diagnosis that ordered this study's ladder (RUN_DIR/diagnosis.json), or None."""
    from torchdoctor.core import rundir
    from torchdoctor.diagnose import Diagnosis

    if tuner.log_dir is None:
        return None
    path = tuner.log_dir.parent / rundir.DIAGNOSIS
    try:
        return Diagnosis.read(path) if path.is_file() else None
    except TorchDoctorError:
        return None  # an unreadable diagnosis: the live view shows the ladder alone


@app.command("tune", context_settings={"allow_extra_args": True, "ignore_unknown_options": False})
def tune_command(
    ctx: typer.Context,
    workload: str = typer.Argument(
        None, help="Built-in workload name (omit with --resume, or give -- python train.py)."
    ),
    budget: str = typer.Option("10m", "--budget", help="Wall-time budget, e.g. 10m, 90s, 1h."),
    objective: str = typer.Option(
        "throughput",
        "--objective",
        help="throughput, latency, or fit: the memory ladder (bf16, checkpointing, accumulation "
        "that keeps the effective batch) until the recipe fits --max-memory; with --set "
        "batch_size=N that batch must fit, without it the largest batch that fits is searched.",
    ),
    max_memory: str = typer.Option(
        None,
        "--max-memory",
        help="Memory cap per trial, e.g. 4GiB (with --objective fit: the cap to fit under, "
        "held to each recipe's measured peak; 75% there: three quarters of the baseline's).",
    ),
    storage: str = typer.Option(
        None,
        "--storage",
        help="Database URL of a study shared by several tuners, e.g. "
        "postgresql+psycopg://td@db.example.org/studies (password from PGPASSWORD or "
        "~/.pgpass; one given in the URL is used, never written). Each ladder step runs in "
        "one tuner; the others replay its result.",
    ),
    resume: Path = typer.Option(None, "--resume", help="Continue the study in this run folder."),
    out: Path = typer.Option(None, "--out", help="Run folder to create."),
    settings: list[str] = typer.Option([], "--set", help="Baseline knob setting knob=value."),
    knobs: str = typer.Option(None, "--knobs", help="Only try these knobs (comma-separated)."),
    joint: int = typer.Option(0, "--joint", min=0, help="Joint-refinement trials (Optuna)."),
    hold_effective_batch: bool = typer.Option(
        False, "--hold-effective-batch", help="Keep batch_size x grad_accum fixed."
    ),
    batch_search: bool = typer.Option(
        True, "--batch-search/--no-batch-search", help="Grow the batch for throughput."
    ),
    min_gain: float = typer.Option(0.02, "--min-gain", min=0.0, help="Smallest gain kept."),
    final_pairs: int = typer.Option(
        DEFAULT_REPLICATES,
        "--final-pairs",
        min=MIN_REPLICATES,
        help="Most fresh process pairs of the final A/B (the best recipe against the "
        "baseline, each pair two new processes). Fewer end sooner and their interval, from "
        f"the pairs run, is wider: at 95% {MIN_REPLICATES} pairs give about 1.5x the width "
        f"of {DEFAULT_REPLICATES} for the same spread between processes.",
    ),
    device: str | None = device_option(),
    seed: int = seed_option(),
    diagnose: bool = typer.Option(
        True, "--diagnose/--no-diagnose", help="Diagnose first; try its prescriptions first."
    ),
) -> None:
    """Tune WORKLOAD (or a script after --): prove each change by interleaved A/B, keep the
    wins, hand back the recipe."""
    with reporting_interruption():
        _tune(
            ctx,
            workload=workload,
            budget=budget,
            objective=objective,
            max_memory=max_memory,
            storage=storage,
            resume=resume,
            out=out,
            settings=settings,
            knobs=knobs,
            joint=joint,
            hold_effective_batch=hold_effective_batch,
            batch_search=batch_search,
            min_gain=min_gain,
            final_pairs=final_pairs,
            device=device,
            seed=seed,
            diagnose=diagnose,
        )


@contextlib.contextmanager
def reporting_interruption() -> Iterator[None]:
    """An interrupted tune (Ctrl-C, SIGTERM, SIGHUP) writes the report of what it did and says
    how to go on from it; the interruption then ends the command (exit 128 + the signal)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        stopped = Interrupted.of(exc)
        if stopped.run_dir is not None:
            from torchdoctor.report import write_reports
            from torchdoctor.tune import CONFIG_FILE

            # Reports of a folder cut short say what is missing; one that cannot be rendered
            # must not hide the interruption.
            with contextlib.suppress(TorchDoctorError):
                for path in write_reports(stopped.run_dir):
                    err_console.print(f"Report: {display_path(path)}", highlight=False)
            if (stopped.run_dir / CONFIG_FILE).is_file():
                err_console.print(
                    f"continue it with: torchdoctor tune --resume {display_path(stopped.run_dir)}",
                    highlight=False,
                )
        raise stopped from None


def _tune(
    ctx: typer.Context,
    *,
    workload: str | None,
    budget: str,
    objective: str,
    max_memory: str | None,
    storage: str | None,
    resume: Path | None,
    out: Path | None,
    settings: list[str],
    knobs: str | None,
    joint: int,
    hold_effective_batch: bool,
    batch_search: bool,
    min_gain: float,
    final_pairs: int,
    device: str | None,
    seed: int,
    diagnose: bool,
) -> None:
    # Everything after `--` is positional to click: its first word lands in `workload`.
    command = [workload, *ctx.args] if workload is not None and ctx.args else list(ctx.args)
    shared = _open_storage(storage)
    if workload is not None and not ctx.args and workload.endswith(".py"):
        command = [workload]  # `torchdoctor tune -- train.py`: a script without arguments
    if resume is not None:
        if command:
            from torchdoctor.cli.diagnose import _split_command

            result = run_with_progress(
                resume=resume, command=_split_command(command), storage=shared
            )
        else:
            result = run_with_progress(workload=workload, resume=resume, storage=shared)
    elif command:
        _check_objective(objective, max_memory)
        if objective == "fit":
            raise UsageError(
                "--objective fit tunes a workload, not a script",
                hint="a script's batch is its own; give a workload (built-in or file.py:factory)",
            )
        result = run_with_progress(
            config=_script_config(
                command,
                budget=budget,
                objective=objective,
                max_memory=max_memory,
                storage=shared,
                settings=settings,
                knobs=knobs,
                joint=joint,
                min_gain=min_gain,
                final_pairs=final_pairs,
                device=device,
                seed=seed,
            ),
            out=out,
            storage=shared,
        )
    else:
        if workload is None:
            raise UsageError("no workload to tune", hint="name one, e.g. `torchdoctor tune cnn`")
        _check_objective(objective, max_memory)
        device = default_device(device)
        baseline = _baseline(workload, settings, device)
        budget_s = parse_duration(budget)
        max_memory_bytes, max_memory_fraction = _memory_cap(max_memory, objective)
        prescribed: list[str] = []
        if diagnose and objective != "fit":  # the memory ladder's order is its own
            given = dict(item.split("=", 1) for item in settings)  # checked by _baseline
            out, prescribed = diagnose_into_run_dir(
                workload,
                out,
                device=device,
                settings={k.strip(): v.strip() for k, v in given.items()},
            )
        config = TuneConfig(
            workload=workload,
            prescribed=prescribed,
            objective=objective,
            device=device,
            seed=seed,
            budget_s=budget_s,
            min_gain=min_gain,
            final_pairs=final_pairs,
            max_memory_bytes=max_memory_bytes,
            max_memory_fraction=max_memory_fraction,
            storage=shared.public if shared else None,
            baseline_recipe=baseline,
            knobs=[k.strip() for k in knobs.split(",") if k.strip()] if knobs else None,
            joint_trials=joint,
            hold_effective_batch=hold_effective_batch,
            search_batch=batch_search,
        )
        result = run_with_progress(config=config, out=out, storage=shared)
    finish_with_report(result)


def _memory_cap(text: str | None, objective: str) -> tuple[int | None, float | None]:
    """--max-memory as (bytes, None), or with --objective fit as (None, fraction) for a
    percentage of the baseline's peak ('75%')."""
    if not text:
        return None, None
    if not text.strip().endswith("%"):
        return parse_size(text), None
    if objective != "fit":
        raise UsageError(
            f"--max-memory {text} is a share of the baseline's peak, known only to the memory "
            "ladder",
            hint="give a size (e.g. 4GiB), or use --objective fit",
        )
    try:
        percent = float(text.strip()[:-1])
    except ValueError:
        percent = -1.0
    if not 0 < percent <= 100:
        raise UsageError(f"cannot read memory share {text!r}", hint="write e.g. 75%")
    return None, percent / 100


def _check_objective(objective: str, max_memory: str | None) -> None:
    if objective not in ("throughput", "latency", "fit"):
        raise UsageError(f"unknown objective {objective!r}", hint="use throughput, latency or fit")
    if objective == "fit" and not max_memory:
        raise UsageError(
            "--objective fit needs the memory cap to fit under",
            hint="give --max-memory, e.g. --max-memory 4GiB",
        )


def _script_config(
    command: list[str],
    *,
    budget: str,
    objective: str,
    max_memory: str | None,
    storage: StorageURL | None,
    settings: list[str],
    knobs: str | None,
    joint: int,
    min_gain: float,
    final_pairs: int,
    device: str | None,
    seed: int,
) -> TuneConfig:
    """The study of `tune -- python train.py ARGS` (the batch search is off: a script's batch
    is its own, and changing it changes what the script learns)."""
    import os

    from torchdoctor.cli.diagnose import _split_command
    from torchdoctor.knobs import Recipe

    argv, module = _split_command(command)
    name = argv[0] if module else Path(argv[0]).stem
    device = default_device(device)
    return TuneConfig(
        workload=f"script:{name}",
        command=argv,
        module=module,
        cwd=os.getcwd(),
        objective=objective,
        device=device,
        seed=seed,
        budget_s=parse_duration(budget),
        min_gain=min_gain,
        final_pairs=final_pairs,
        max_memory_bytes=parse_size(max_memory) if max_memory else None,
        storage=storage.public if storage else None,
        baseline_recipe=Recipe.parse(settings, device=device).to_dict(),
        knobs=[k.strip() for k in knobs.split(",") if k.strip()] if knobs else None,
        joint_trials=joint,
        search_batch=False,
    )


def _open_storage(storage: str | None) -> StorageURL | None:
    """The shared study's storage URL, opened once here: a URL that does not parse or a
    database that refuses fails at once, before any folder exists (the password, if the URL
    has one, stays in memory: tune/storage.py)."""
    if not storage:
        return None
    url = StorageURL.parse(storage)
    Study(url, shared=True).close()
    return url


def finish_with_report(result: TuneResult) -> None:
    """Render the run folder's report (report.html / report.md), then show the result and it."""
    from torchdoctor.report import write_reports

    reports = write_reports(result.run_dir)

    def render(console: Console) -> None:
        render_result(result, console)
        for path in reports:
            console.print(f"Report: {display_path(path)}", highlight=False)

    emit(result, render)
    if settings_json():
        # stdout holds the JSON record; the report paths go to stderr.
        for path in reports:
            err_console.print(f"Report: {display_path(path)}", highlight=False)


def diagnose_into_run_dir(
    workload: str,
    out: Path | None,
    *,
    device: str = "cpu",
    settings: dict[str, str] | None = None,
) -> tuple[Path, list[str]]:
    """Diagnose on `device`, with the baseline's `settings`, into the (new) run folder;
    returns it and the prescribed knobs."""
    from torchdoctor.core.rundir import marking_interruption, new_run_dir
    from torchdoctor.tune import diagnose_before_tuning

    run_dir = new_run_dir("tune", workload, out=out)
    with marking_interruption(run_dir):
        prescribed = diagnose_before_tuning(workload, run_dir, device=device, settings=settings)
    if not settings_json():
        shown = ", ".join(prescribed) or "none"
        err_console.print(f"diagnosis: prescribed knobs in order: {shown}", highlight=False)
    return run_dir, prescribed


def settings_json() -> bool:
    from torchdoctor.cli.state import settings

    return settings.json


def _baseline(workload: str, settings: list[str], device: str) -> dict[str, Any]:
    from torchdoctor.core.errors import TorchDoctorError
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    try:
        job = get_workload(workload)
    except TorchDoctorError as exc:
        raise TuneError(f"cannot tune workload {workload!r}: {exc}") from None
    return Recipe.parse(settings, workload=job, device=device).to_dict()
