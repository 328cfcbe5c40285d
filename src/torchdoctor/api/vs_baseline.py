"""A recipe against the job as it is, in fresh process pairs: `torchdoctor.recheck`, the
function of `torchdoctor run --recipe R --vs-baseline` (for a workload, a script or a torchrun
job), and the steps the command shares with it (`plan_recheck`, `recheck_into`).

Run folder: run.json, vs_baseline.json (`Confirmation`), logs/ (each launch's output).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from torchdoctor.api.command_line import (
    RecipeSource,
    Target,
    TorchDoctorWarning,
    _command,
    read_recipe,
    recipe_folder,
    resolve_device,
)
from torchdoctor.core.defaults import DEFAULT_REPLICATES
from torchdoctor.core.errors import TorchDoctorError, UsageError

if TYPE_CHECKING:
    from torchdoctor.tune import Confirmation

VS_BASELINE: Final = "vs_baseline.json"
RECHECK_LOGS: Final = "logs"

#: Where a remark goes (the command: a line on stderr; the API: nowhere, or a warning).
Say = Callable[[str], None]


@dataclass(frozen=True)
class RecheckPlan:
    """A re-check, checked and ready to run: the run folder's target, the job as shown, and
    the A/B to run with the folder for each launch's output."""

    target: str
    shown: str
    pairs: int
    measure: Callable[[Path], Confirmation]


def recheck(
    target: Target,
    *,
    recipe: RecipeSource,
    pairs: int = DEFAULT_REPLICATES,
    steps: int | None = None,
    device: str | None = None,
    seed: int = 0,
    out: str | Path | None = None,
) -> Confirmation:
    """The recipe against the job as it is, in fresh process pairs: the tuner's final A/B
    run again, to see its claim for yourself (`torchdoctor run --recipe R --vs-baseline`).

    `target`: a workload (`"cnn"`, `"path/to/file.py:factory"`), a script's command line
    (`["python", "train.py"]`) or a torchrun job (`["torchrun", "--nproc_per_node", "2",
    "train.py"]`, each job of a pair on a rendezvous of its own). `recipe`: knob -> value, or
    the path of a recipe file (best_recipe.json, tune.json) or a tune run folder. Each of
    `pairs` pairs starts the job twice, once as it is and once with the recipe, warms both up
    until their step times settle and times `steps` steady steps of each (default: `run`'s
    window) in alternating chunks. Returns the `Confirmation`: `speedup` and its 95% interval
    over the pairs (`speedup_ci`); `ok` is false, with its `reason`, when no interval came out.
    `device` and `seed` are a workload's (a script's are its own). A recipe tuned at another
    world size than the job's is said with a `TorchDoctorWarning`. The run folder is `out`,
    else a new one under torchdoctor-runs/.

    Example:
        >>> c = torchdoctor.recheck("mlp", recipe={"threads": 1}, pairs=3, device="cpu")
        >>> c.speedup, c.speedup_ci
    """
    plan = plan_recheck(
        target, recipe, pairs=pairs, steps=steps, device=device, seed=seed, note=_warn
    )
    check, _ = recheck_into(plan, Path(out) if out is not None else None, _quiet)
    return check


def plan_recheck(
    target: Target,
    recipe: RecipeSource,
    *,
    pairs: int,
    steps: int | None,
    device: str | None,
    seed: int,
    note: Say,
) -> RecheckPlan:
    """A re-check checked before anything runs or is written (a bad knob, a missing script,
    a torchrun job that pins its rendezvous: the user's error), for this API and the
    command. `note`: what is worth saying first (a recipe tuned at another world size)."""
    from torchdoctor.api.script_run import tell_world_size

    values = read_recipe(recipe)
    command = _command(target)
    if command is None:
        return _workload_plan(
            str(target), values, pairs=pairs, steps=steps, device=device, seed=seed
        )
    if device is not None:
        raise UsageError(
            "device= cannot be honoured for a script", hint="a script's device is its own"
        )
    from torchdoctor.tune import (
        ScriptCommand,
        check_tunable,
        is_torchrun,
        job_world_size,
        recheck_script,
    )

    argv, module = command
    if not module and not Path(argv[0]).is_file():
        raise UsageError(
            f"script {argv[0]!r} not found", hint="e.g. -- python train.py, from its folder"
        )
    if is_torchrun(argv, module):
        # Each pair runs the two jobs at once, as the tuner's arms do: each gets a rendezvous
        # of its own (`tune.torchrun.arm_argv`), which a pinned port or a second node forbids.
        check_tunable(argv)
        # The pairs' ratio is this world size's: a recipe tuned at another one says so first.
        folder = recipe_folder(recipe)
        if folder is not None:
            tell_world_size(folder, job_world_size(argv), None, note)
    script = ScriptCommand(tuple(argv), module=module)
    return RecheckPlan(
        target=argv[0],
        shown=script.display(),
        pairs=pairs,
        measure=lambda logs: recheck_script(script, values, pairs=pairs, steps=steps, log_dir=logs),
    )


def _workload_plan(
    workload: str,
    recipe: dict[str, Any],
    *,
    pairs: int,
    steps: int | None,
    device: str | None,
    seed: int,
) -> RecheckPlan:
    """A workload's re-check: each arm a fresh workload worker, as the tuner's final A/B."""
    from torchdoctor.knobs import Recipe
    from torchdoctor.tune import recheck_workload
    from torchdoctor.workloads import get_workload

    device_name = resolve_device(device)
    # A bad workload or knob fails here, before a run folder or a worker exists.
    job = get_workload(workload)
    checked = Recipe.from_dict(dict(recipe), workload=job, device=device_name).to_dict()
    return RecheckPlan(
        target=workload,
        shown=f"{workload} on {device_name}",
        pairs=pairs,
        measure=lambda logs: recheck_workload(
            workload,
            checked,
            device=device_name,
            pairs=pairs,
            steps=steps,
            seed=seed,
            log_dir=logs,
        ),
    )


def recheck_into(plan: RecheckPlan, out: Path | None, progress: Say) -> tuple[Confirmation, Path]:
    """Run the planned A/B into a new run folder (`out`, else one under torchdoctor-runs/:
    vs_baseline.json, logs/), telling `progress` what it starts. The folder is marked
    complete, or failed with why no interval came out (the record is returned all the
    same: `ok` false). Returns the record and the folder."""
    from torchdoctor.core import rundir

    run_dir = rundir.new_run_dir("run", plan.target, out=out)
    logs = run_dir / RECHECK_LOGS
    logs.mkdir(exist_ok=True)
    progress(
        f"{plan.shown}: {plan.pairs} fresh process pairs, the recipe against it as it is (each "
        "pair starts it twice)"
    )
    try:
        check = plan.measure(logs)
    except TorchDoctorError as exc:
        rundir.finish_run_dir(run_dir, error=str(exc))
        raise
    check.write(run_dir / VS_BASELINE)
    rundir.finish_run_dir(run_dir, error=None if check.ok else check.reason or check.status)
    return check, run_dir


def _warn(message: str) -> None:
    # Raised at the caller of torchdoctor.recheck: past this, tell_world_size, plan_recheck
    # and recheck.
    warnings.warn(message, TorchDoctorWarning, stacklevel=5)


def _quiet(message: str) -> None:
    """The progress of a re-check nobody watches."""
