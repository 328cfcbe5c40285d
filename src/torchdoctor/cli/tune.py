"""`torchdoctor tune WORKLOAD`: find the fastest recipe that still learns the same, with proof.

`torchdoctor tune [options] -- python train.py ARGS` (or `-- python -m pkg.train ARGS`) tunes a
user's unmodified script the same way: each recipe's knobs injected into the script, the
script driven at its step boundaries: optimizer steps, or backward calls when it has no
torch.optim optimizer (tune/sources.py).

The command reads its options, refuses what only its command line can tell, calls
`torchdoctor.api.tune` with its live view (`watched_progress`, a `TuneProgress`) and renders
the result and the run folder's report; `demo` shares the live view, its diagnosis line and
the report (`run_with_progress`, `diagnose_into_run_dir`, `finish_with_report`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from torchdoctor.api import (
    TuneProgress,
    check_objective,
    check_study_out,
    check_target,
    diagnosed_run_dir,
    open_storage,
    tune,
    tune_into,
)
from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    budget_option,
    check_out,
    device_option,
    duration_text,
    force_option,
    given,
    out_option,
    pairs_option,
    param_option,
    parse_settings,
    parse_size,
    parse_workload_params,
    refuse_given,
    seed_option,
)
from torchdoctor.cli.state import emit, err_console, progress_enabled
from torchdoctor.core.defaults import DEFAULT_MIN_GAIN, TUNE_BUDGET_S
from torchdoctor.core.errors import TorchDoctorError, UsageError
from torchdoctor.core.interrupt import Interrupted
from torchdoctor.core.rundir import display_path
from torchdoctor.core.vocabulary import Objective
from torchdoctor.measure import DEFAULT_REPLICATES, MIN_REPLICATES
from torchdoctor.report import render_records
from torchdoctor.tune import Trial, TuneConfig, Tuner, TuneResult

#: Options a script's study cannot honour, with why (`tune -- python train.py`).
SCRIPT_REFUSES = ("batch_search", "hold_effective_batch", "params")
#: Options a resumed study cannot honour: its stored config decides them.
RESUME_REFUSES = (
    "budget", "objective", "max_memory", "out", "force", "settings", "params", "knobs", "joint",
    "hold_effective_batch", "batch_search", "min_gain", "pairs", "final_pairs", "device", "seed",
    "diagnose",
)  # fmt: skip


def watched_progress() -> TuneProgress:
    """What `tune` and `demo` show as a study goes (report/terminal/live.py's `TuneWatch`).

    On a terminal: a live view on stderr while the study runs, the diagnosis table first,
    then the ladder filling in as trials are decided, the current trial and the budget left.
    Without one: one plain line per event on stderr, which a log keeps. With --json: only the
    notes (stdout holds the record only). Notes are `warning:` lines.
    """
    from torchdoctor.report import TuneWatch

    if settings_json():
        return TuneProgress(note=_warn)
    live_view = progress_enabled()
    state: dict[str, Any] = {}

    def on_start(tuner: Tuner, planned: int) -> None:
        watch = TuneWatch(budget_s=tuner.settings.budget_s)
        watch.diagnosis = _diagnosis_of(tuner)
        watch.start(tuner.planned_order)
        tuner.on_begin = watch.begin
        tuner.on_look = watch.look
        state["watch"] = watch
        if live_view:
            state["live"].update(watch, refresh=True)

    def say(line: str) -> None:
        err_console.print(line, highlight=False, markup=False, soft_wrap=True)

    def on_trial(result: Trial, tuner: Tuner) -> None:
        watch = state["watch"]
        first = not watch.rows
        row = watch.decided(result, tuner.budget.elapsed_s())
        if live_view:
            state["live"].refresh()
            return
        if first:
            # Said with the first decided trial, not at the start: a baseline that fails
            # leaves its one error line alone.
            for line in watch.diagnosis_lines():
                say(line)
        say(watch.line_of(row))

    @contextlib.contextmanager
    def watching() -> Iterator[None]:
        if not live_view:
            yield
            return
        with Live(
            Text("tuning: measuring the baseline first"),
            console=err_console,
            refresh_per_second=LIVE_REFRESH_PER_S,
        ) as live:
            state["live"] = live
            yield

    return TuneProgress(
        note=_warn,
        diagnosed=_say_prescribed,
        started=on_start,
        decided=on_trial,
        watching=watching,
    )


def run_with_progress(config: TuneConfig, out: Path | None) -> TuneResult:
    """The study `config` run into `out` (`torchdoctor.api.tune_into`), shown as it goes
    (`watched_progress`): `demo`'s study."""
    return tune_into(config, out, watched_progress())


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
    budget: float = budget_option(
        duration_text(TUNE_BUDGET_S), "Wall-time budget of the study, a hard stop."
    ),
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
        "postgresql+psycopg://td@db.example.org/studies (password from PGPASSWORD, "
        "~/.pgpass or a service file; one given in the URL is used with a warning, never "
        "written). Each ladder step runs in one tuner; the others replay its result. With "
        "--resume: the study's storage, given again.",
    ),
    resume: Path = typer.Option(
        None,
        "--resume",
        help="Continue the study in this run folder. What runs is given again and checked "
        "against the folder: its workload file, or its script after --, and --storage.",
    ),
    out: Path = out_option(),
    force: bool = force_option(),
    settings: list[str] = typer.Option([], "--set", help="Baseline knob setting knob=value."),
    params: list[str] = param_option(),
    knobs: str = typer.Option(None, "--knobs", help="Only try these knobs (comma-separated)."),
    joint: int = typer.Option(0, "--joint", min=0, help="Joint-refinement trials (Optuna)."),
    hold_effective_batch: bool = typer.Option(
        False, "--hold-effective-batch", help="Keep batch_size x grad_accum fixed."
    ),
    batch_search: bool = typer.Option(
        True, "--batch-search/--no-batch-search", help="Grow the batch for throughput."
    ),
    min_gain: float = typer.Option(
        DEFAULT_MIN_GAIN, "--min-gain", min=0.0, help="Smallest gain kept."
    ),
    pairs: int = pairs_option(
        DEFAULT_REPLICATES,
        MIN_REPLICATES,
        "At most this many in the final A/B (the best recipe against the baseline). Fewer end "
        "sooner and their interval, from the pairs run, is wider: at 95% "
        f"{MIN_REPLICATES} pairs give about 1.5x the width of {DEFAULT_REPLICATES} for the "
        "same spread between processes.",
    ),
    final_pairs: int | None = typer.Option(
        None, "--final-pairs", min=MIN_REPLICATES, hidden=True, help="Deprecated: --pairs."
    ),
    device: str | None = device_option(),
    seed: int = seed_option(),
    diagnose: bool = typer.Option(
        True,
        "--diagnose/--no-diagnose",
        help="Diagnose first; try its prescriptions first (a script after --: when no --knobs "
        "names what to try).",
    ),
) -> None:
    """Tune WORKLOAD (or a script after --): prove each change by interleaved A/B, keep the
    wins, hand back the recipe."""
    with reporting_interruption():
        # Everything after `--` is positional to click: its first word lands in `workload`.
        command = [workload, *ctx.args] if workload is not None and ctx.args else list(ctx.args)
        if workload is not None and not ctx.args and workload.endswith(".py"):
            command = [workload]  # `torchdoctor tune -- train.py`: a script without arguments
        target = command or workload
        if resume is not None:
            refuse_given(
                ctx,
                RESUME_REFUSES,
                case="with --resume",
                hint=f"a resumed study keeps the settings stored in {resume}; start a new study "
                "with --out to change them",
            )
            finish_with_report(
                tune(target, resume=resume, storage=storage, progress=watched_progress())
            )
            return
        if final_pairs is not None:
            if given(ctx, "pairs"):
                raise UsageError(
                    "--final-pairs is the old name of --pairs", hint="give --pairs only"
                )
            err_console.print("warning: --final-pairs is deprecated; use --pairs", highlight=False)
            pairs = final_pairs
        # The API's checks, called in turn with the command line's own (--force's rule, an
        # option given that a script cannot honour, a malformed value), so that the first
        # refusal is the one the command has always given; `tune` checks them again and
        # takes the storage as opened here.
        check_objective(objective, capped=bool(max_memory))
        check_study_out(out)
        check_out(out, force=force)
        if command:
            refuse_given(
                ctx,
                SCRIPT_REFUSES,
                case="for a script",
                hint="a script's batch and parameters are its own",
            )
        check_target(target, objective)
        shared = open_storage(storage, _warn)
        max_memory_bytes, max_memory_fraction = _memory_cap(max_memory, objective)
        result = tune(
            target,
            budget_s=budget,
            recipe=parse_settings(settings),
            params=parse_workload_params(params),
            knobs=[k.strip() for k in knobs.split(",") if k.strip()] if knobs else None,
            device=device,
            seed=seed,
            min_gain=min_gain,
            pairs=pairs,
            joint_trials=joint,
            hold_effective_batch=hold_effective_batch,
            search_batch=batch_search,
            diagnose_first=diagnose,
            objective=cast(Objective, objective),  # checked by check_objective
            max_memory_bytes=max_memory_bytes,
            max_memory_fraction=max_memory_fraction,
            storage=shared,
            out=out,
            progress=watched_progress(),
        )
        finish_with_report(result)


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


def _warn(line: str) -> None:
    err_console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)


def _say_prescribed(prescribed: list[str]) -> None:
    shown = ", ".join(prescribed) or "none"
    err_console.print(f"diagnosis: prescribed knobs in order: {shown}", highlight=False)


def finish_with_report(result: TuneResult) -> None:
    """Render the run folder's report (report.html / report.md), then show the result and it."""
    from torchdoctor.core.rundir import finishing
    from torchdoctor.report import write_reports

    reports: list[Path] = []
    # A report the disk refuses marks the study's folder failed, in one line (rundir.py).
    with finishing(
        Path(result.run_dir), reports=lambda: reports.extend(write_reports(result.run_dir))
    ):
        pass

    def render(console: Console) -> None:
        render_records(console, {"tune": result})
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
    params: dict[str, Any] | None = None,
) -> tuple[Path, list[str]]:
    """Diagnose on `device`, with the baseline's `settings` and the workload's `params`, into
    the (new) run folder (`torchdoctor.api.diagnosed_run_dir`), and say what it prescribed;
    returns the folder and the prescribed knobs: `demo`'s diagnosis."""
    run_dir, prescribed = diagnosed_run_dir(
        workload, out, device=device, settings=settings, params=params
    )
    if not settings_json():
        _say_prescribed(prescribed)
    return run_dir, prescribed


def settings_json() -> bool:
    from torchdoctor.cli.state import settings

    return settings.json
