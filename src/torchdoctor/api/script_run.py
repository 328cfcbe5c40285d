"""A script run unmodified, as it is or with a recipe injected (collect/inject): what
`torchdoctor.run(command)` and `torchdoctor run [--recipe R] -- python train.py` share
(`run_script_into`): steady step time, throughput, which knobs applied.

Run folder: run.json (manifest), collect/ (the launch's script_profile.json and
injection.json), script_run.json (`ScriptRun`).
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from torchdoctor.api.command_line import (
    RecipeSource,
    TorchDoctorWarning,
    read_recipe,
    recipe_folder,
)
from torchdoctor.core.errors import TorchDoctorError, UsageError

if TYPE_CHECKING:
    from torchdoctor.collect import ScriptRun

SCRIPT_RUN: Final = "script_run.json"
COLLECT_SUBDIR: Final = "collect"

#: Where a remark about the run goes (the command: a `note:` line; the API: a warning).
Note = Callable[[str], None]


def script_run(
    command: tuple[list[str], bool],
    recipe: RecipeSource | None,
    *,
    params: Mapping[str, Any] | None,
    steps: int | None,
    warmup: int,
    device: str | None,
    measure_phases: bool,
    out: str | Path | None,
) -> ScriptRun:
    """`torchdoctor.run`'s script: what the workload's keywords would change is refused, not
    ignored; a recipe tuned at another world size is said with a `TorchDoctorWarning`."""
    given = [name for name, value in (("params", params), ("device", device)) if value is not None]
    if not measure_phases:
        given.append("measure_phases")
    if given:
        raise UsageError(
            f"{', '.join(f'{name}=' for name in given)} cannot be honoured for a script",
            hint="a script's recipe comes from recipe=; its parameters, device and phases are "
            "its own",
        )
    return run_script_into(
        command,
        read_recipe(recipe),
        steps=steps,
        warmup=warmup,
        out=Path(out) if out is not None else None,
        tuned_in=recipe_folder(recipe),
        note=_warn,
    )


def run_script_into(
    command: tuple[list[str], bool],
    recipe: dict[str, Any],
    *,
    steps: int | None,
    warmup: int,
    out: Path | None,
    tuned_in: Path | None,
    note: Note,
    stdout_to_stderr: bool = False,
) -> ScriptRun:
    """Run the script (`command`, as `parse_command` read it) with `recipe` injected (none:
    as it is) into a new run folder (`out`, else one under torchdoctor-runs/), marked
    complete, or failed with the launch's error or the script's own exit code. Returns the
    `ScriptRun` (script_run.json); a script that failed is recorded, not raised (its
    `exit_code`, `error`). `tuned_in`: the folder the recipe was read from, whose study says
    at which world size it was tuned (a different one is told to `note`).
    `stdout_to_stderr`: the script's output goes to stderr (`--json`'s stdout holds the record
    only)."""
    from torchdoctor.collect import (
        INJECTION_STEM,
        InjectionRecord,
        ScriptRun,
        check_command,
        check_ranks_agree,
    )
    from torchdoctor.core import rundir
    from torchdoctor.measure import steady_rate, warmup_length
    from torchdoctor.procs import run_script

    argv, module = command
    check_command(argv, module)  # a script that cannot start leaves no run folder
    target = argv[0] if argv else "script"
    run_dir = rundir.new_run_dir("run", target, out=out)
    collect_dir = run_dir / COLLECT_SUBDIR
    try:
        profile = run_script(
            argv,
            module=module,
            steps=steps,
            warmup=warmup,
            profile_steps=0,
            out_dir=collect_dir,
            recipe=recipe,
            stdout_to_stderr=stdout_to_stderr,
        )
        check_ranks_agree(collect_dir)  # a torchrun job: one recipe on every rank
    except TorchDoctorError as exc:
        rundir.finish_run_dir(run_dir, error=str(exc))
        raise
    rank = f".rank{profile.rank}" if profile.rank is not None else ""
    injection_file = collect_dir / f"{INJECTION_STEM}{rank}.json"
    injection = InjectionRecord.read(injection_file) if injection_file.exists() else None
    # The steady state by the rule `torchdoctor run WORKLOAD` and the tuner use: warm-up until
    # step times settle (a compiled forward recompiles once the instrumentation moves its
    # module hooks), then the median over chunks of at least 0.3 s, which one slow step cannot
    # move. At most half the steps go to warm-up, so a short run still gets a figure.
    skip = min(
        warmup_length([s.total_s for s in profile.steps], min_steps=warmup),
        len(profile.steps) // 2,
    )
    kept = list(profile.steps[skip:])
    known = bool(kept) and all(s.samples is not None for s in kept)
    run = ScriptRun(
        argv=argv,
        module=module,
        recipe=recipe,
        run_dir=str(run_dir),
        exit_code=profile.exit_code,
        ended_by=profile.ended_by,
        error=profile.error,
        device=profile.device,
        steps=len(profile.steps),
        steady_steps=len(kept),
        step_s_median=statistics.median(s.total_s for s in kept) if kept else None,
        samples_per_s=steady_rate(kept) if known else None,
        injection=injection,
    )
    run.write(run_dir / SCRIPT_RUN)
    if tuned_in is not None:
        batch = profile.dataloaders[0].batch_size if profile.dataloaders else None
        tell_world_size(tuned_in, profile.world_size, batch, note)
    rundir.finish_run_dir(run_dir, error=script_error(run))
    return run


def script_error(run: ScriptRun) -> str | None:
    """Why a script's run failed (its launch's error, else its own exit code), or None."""
    code = run.exit_code
    return run.error or (f"the script exited with code {code}" if code else None)


def tell_world_size(tuned_in: Path, world_size: int | None, batch: int | None, note: Note) -> None:
    """A recipe tuned on a torchrun job run at another world size: said to `note` (the run's
    record is the run's own; `tune.world_size_note`)."""
    from torchdoctor.tune import world_size_note

    said = world_size_note(tuned_in, world_size, batch)
    if said is not None:
        note(said)


def _warn(message: str) -> None:
    # Raised at the caller of torchdoctor.run: past this, tell_world_size, run_script_into,
    # script_run, run and its keyword wrapper.
    warnings.warn(message, TorchDoctorWarning, stacklevel=7)
