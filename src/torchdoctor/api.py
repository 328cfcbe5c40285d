"""The Python API: `torchdoctor.diagnose(...)`, `torchdoctor.tune(...)`, `torchdoctor.run(...)`.

Each does what its command does and returns the record the command prints (`--json`):

    import torchdoctor

    d = torchdoctor.diagnose(["python", "train.py", "--epochs", "1"])   # a Diagnosis
    d.primary_bottleneck, [f.title for f in d.findings]
    t = torchdoctor.tune("cnn", budget_s=300)                             # a TuneResult
    t.best_recipe, t.speedup, t.speedup_ci
    r = torchdoctor.run("cnn", recipe=t.best_recipe)                     # a RunResult
    r.samples_per_s

Each writes the run folder its command writes (`out=`, else a new one under
torchdoctor-runs/) and raises the command's errors (`TorchDoctorError` subclasses) instead of
exiting. The stages behind them are imported on the first call, so `import torchdoctor` stays
light. `torchdoctor.diagnose` and `torchdoctor.tune` are also the stage packages of those
names: calling the package calls the function here (core/lazy.py, `callable_module`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchdoctor.core.errors import DiagnoseError, UsageError

if TYPE_CHECKING:
    from torchdoctor.core.vocabulary import Objective
    from torchdoctor.diagnose import Diagnosis
    from torchdoctor.engine import RunResult
    from torchdoctor.tune import TuneConfig, TuneResult

Target = str | Path | Sequence[str]

#: The CLI's defaults (`torchdoctor diagnose --warmup 5 --profile-steps 5`, `tune --budget 8m`).
DEFAULT_WARMUP = 5
DEFAULT_PROFILE_STEPS = 5
DEFAULT_TUNE_BUDGET_S = 480.0


#: The module a torchrun launch becomes (`torchrun ARGS` is `python -m torch.distributed.run
#: ARGS`): the job is launched as that module, each rank inside (tune/torchrun.py reads it).
TORCHRUN_MODULE = "torch.distributed.run"


def parse_command(words: Sequence[str]) -> tuple[list[str], bool]:
    """A script's command line -> (argv, module): the one reading of a command, used by every
    command that runs one (`diagnose`, `tune`, `run`, `memory`, `scale` after `--`) and by
    this API.

    `python train.py a b` and `train.py a b` -> (["train.py", "a", "b"], False);
    `python -m pkg.train a` -> (["pkg.train", "a"], True); a torchrun launch
    (`torchrun --nproc_per_node 2 train.py`, `python -m torch.distributed.run ...`) ->
    (["torch.distributed.run", "--nproc_per_node", "2", "train.py"], True): the job, each
    rank inside. Raises UsageError for an empty line, `-m` without a module or `python`
    alone.
    """
    rest = [str(w) for w in words]
    if not rest:
        raise UsageError("no command to run", hint="e.g. -- python train.py")
    if Path(rest[0]).name.startswith("python"):
        rest = rest[1:]
    if rest[:1] == ["-m"]:
        if len(rest) < 2:
            raise UsageError("-m needs a module name", hint="e.g. -- python -m pkg.train")
        return rest[1:], True
    if not rest:
        raise UsageError("no script after python", hint="e.g. -- python train.py")
    if Path(rest[0]).name == "torchrun" or rest[0].endswith(TORCHRUN_MODULE):
        return [TORCHRUN_MODULE, *rest[1:]], True
    return rest, False


def _command(target: Target) -> tuple[list[str], bool] | None:
    """(argv, module) when `target` is a script's command line; None for a workload or trace.

    A sequence is a command line (`["python", "train.py", ...]`, `["-m", "pkg.train"]`,
    `["torchrun", "--nproc_per_node", "2", "train.py"]`); a string is one when it names a .py
    file or starts with `python` or `torchrun`.
    """
    if isinstance(target, Path):
        words = [str(target)] if target.suffix == ".py" else []
    elif isinstance(target, str):
        split = shlex.split(target)
        first = split[0] if split else ""
        is_script = first.endswith(".py") or first.startswith(("python", "torchrun"))
        words = split if is_script else []
    else:
        words = [str(w) for w in target]
    if not words:
        return None
    return parse_command(words)


def workload_options(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tuning study's factory options that build its workload with `params` (its own
    parameters, `--param`): the engine's factory takes them (procs `engine_session`)."""
    return {"params": dict(params)} if params else {}


def _settings(settings: Mapping[str, Any] | None) -> dict[str, str]:
    return {
        k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (settings or {}).items()
    }


def _device(device: str | None) -> str:
    """The device given, else the GPU when there is one (as the commands choose)."""
    if device is not None:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def diagnose(
    target: Target,
    *,
    steps: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    profile_steps: int = DEFAULT_PROFILE_STEPS,
    settings: Mapping[str, Any] | None = None,
    device: str | None = None,
    out: str | Path | None = None,
    params: Mapping[str, Any] | None = None,
) -> Diagnosis:
    """`torchdoctor diagnose`: a script (a command line), a workload (its name or
    `path/to/file.py:factory`) or a profiler trace (a path). Returns the `Diagnosis` (of rank 0
    for a torchrun job; every rank's is in the run folder).

    `settings`: knob values for a workload (`{"threads": 2}`); `params`: the workload's own
    parameters (`{"attention": "manual"}`); `device`: a workload's device (default: CUDA when
    present). Raises `DiagnoseError` when nothing could be diagnosed.
    """
    from torchdoctor.diagnose import examine_script, examine_trace, examine_workload

    folder = Path(out) if out is not None else None
    command = _command(target)
    if command is not None:
        argv, module = command
        exam = examine_script(
            argv, module=module, steps=steps, warmup=warmup, profile_steps=profile_steps, out=folder
        )
    elif Path(str(target)).exists() and not str(target).endswith(".py"):
        exam = examine_trace(Path(str(target)), out=folder)
    else:
        exam = examine_workload(
            str(target),
            _settings(settings),
            steps=steps or 20,
            warmup=warmup,
            profile_steps=profile_steps,
            out=folder,
            device=_device(device),
            params=params,
        )
    if exam.diagnosis is None:
        raise DiagnoseError(exam.error or "nothing was diagnosed", hint=f"see {exam.run_dir}")
    return exam.diagnosis


def tune_config(
    target: Target,
    *,
    budget_s: float = DEFAULT_TUNE_BUDGET_S,
    settings: Mapping[str, Any] | None = None,
    knobs: Sequence[str] | None = None,
    device: str | None = None,
    seed: int = 0,
    min_gain: float | None = None,
    objective: Objective = "throughput",
    max_memory_bytes: int | None = None,
    max_memory_fraction: float | None = None,
    params: Mapping[str, Any] | None = None,
    pairs: int | None = None,
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
    """
    from torchdoctor.knobs import Recipe
    from torchdoctor.tune import TuneConfig

    device_name = _device(device)
    assignments = [f"{k}={v}" for k, v in _settings(settings).items()]
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
    }
    if min_gain is not None:
        common["min_gain"] = min_gain
    if pairs is not None:
        common["final_pairs"] = pairs
    command = _command(target)
    if command is not None:
        argv, module = command
        name = argv[0] if module else Path(argv[0]).stem
        return TuneConfig(
            workload=f"script:{name}",
            command=argv,
            module=module,
            cwd=os.getcwd(),
            baseline_recipe=Recipe.parse(assignments, device=device_name).to_dict(),
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
    return TuneConfig(
        workload=workload,
        factory_options=workload_options(params),
        baseline_recipe=Recipe.parse(assignments, workload=job, device=device_name).to_dict(),
        hold_effective_batch=hold_effective_batch,
        search_batch=search_batch,
        **common,
    )


def tune(
    target: Target,
    *,
    budget_s: float = DEFAULT_TUNE_BUDGET_S,
    settings: Mapping[str, Any] | None = None,
    knobs: Sequence[str] | None = None,
    device: str | None = None,
    seed: int = 0,
    min_gain: float | None = None,
    diagnose_first: bool = True,
    out: str | Path | None = None,
    objective: Objective = "throughput",
    max_memory_bytes: int | None = None,
    max_memory_fraction: float | None = None,
    params: Mapping[str, Any] | None = None,
) -> TuneResult:
    """`torchdoctor tune`: a workload or a script (a command line) climbs the ladder within
    `budget_s` seconds (a hard stop); returns the `TuneResult`.

    `settings`: the baseline's knob values; `knobs`: only these knobs are tried;
    `diagnose_first`: a workload is diagnosed first and the prescribed knobs lead the ladder
    (as `tune` does unless `--no-diagnose`). `objective="fit"`: the memory ladder under
    `max_memory_bytes`, or `max_memory_fraction` of the baseline's peak (`tune --objective
    fit`; its result's `fit` holds the memory ladder); a `batch_size` in `settings` is the
    batch to fit, else the largest batch that fits is searched. `params`: a workload's own
    parameters (`tune --param`), with which every trial builds it. The study is
    `tune_config`'s.
    """
    from torchdoctor.tune import diagnose_before_tuning
    from torchdoctor.tune import tune as tune_study

    config = tune_config(
        target,
        budget_s=budget_s,
        settings=settings,
        knobs=knobs,
        device=device,
        seed=seed,
        min_gain=min_gain,
        objective=objective,
        max_memory_bytes=max_memory_bytes,
        max_memory_fraction=max_memory_fraction,
        params=params,
    )
    folder = Path(out) if out is not None else None
    if config.command is None and diagnose_first and objective != "fit":
        # The memory ladder's order is its own; a script is not diagnosed first.
        from torchdoctor.core.rundir import new_run_dir

        folder = new_run_dir("tune", config.workload, out=folder)
        prescribed = diagnose_before_tuning(
            config.workload, folder, device=config.device, params=dict(params or {})
        )
        config = config.model_copy(update={"prescribed": prescribed})
    return tune_study(config=config, out=folder)


def run(
    target: str,
    *,
    recipe: Mapping[str, Any] | None = None,
    steps: int | None = None,
    warmup: int = 3,
    device: str | None = None,
    seed: int = 0,
    measure_phases: bool = True,
    params: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """`torchdoctor run WORKLOAD`: a built-in or user workload under `recipe` (knob -> value,
    e.g. a `TuneResult.best_recipe`); returns the `RunResult` (steady throughput, the phase
    split, peak memory, the loss at every step). `params`: the workload's own parameters
    (`run --param`); `progress(done, total)` is called as steps complete. A script is run
    with a recipe by `torchdoctor run --recipe R -- python train.py`."""
    if _command(target) is not None:
        raise UsageError(
            "torchdoctor.run() runs a workload",
            hint="run a script with a recipe by `torchdoctor run --recipe R -- python train.py`",
        )
    from torchdoctor.engine import run_workload
    from torchdoctor.knobs import Recipe
    from torchdoctor.measure import watch_load
    from torchdoctor.workloads import get_workload

    device_name = _device(device)
    job = get_workload(target, **dict(params or {}))
    pairs = [f"{k}={v}" for k, v in _settings(recipe).items()]
    parsed = Recipe.parse(pairs, workload=job, device=device_name)
    with watch_load() as load:
        result = run_workload(
            job,
            parsed,
            steps=steps,
            warmup_steps=warmup,
            measure_phases=measure_phases,
            device=device_name,
            seed=seed,
            progress=progress,
        )
    return result.model_copy(update={"machine_load": load.reading})
