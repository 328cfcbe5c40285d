"""The Python API of the commands that run studies of many processes or many requests:
`scale`, `serve`, `demo`.

Each does what its command does, with the command's defaults (core/defaults.py), and returns
the record the command prints (`--json`); the run folder is `out`, else a new one under
torchdoctor-runs/. The commands call the same functions below (`scale_into`, `serve_into`,
`demo_config`) and add their live views and rendering.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from torchdoctor.api.command_line import (
    Target,
    TorchDoctorWarning,
    _command,
    resolve_device,
)
from torchdoctor.core.defaults import (
    SCALE_BATCH,
    SCALE_JOB_TIMEOUT_S,
    SCALE_MODE,
    SCALE_NPROC,
    SCALE_PROJECT_TO,
    SCALE_STEPS,
    SERVE_ARRIVALS,
    SERVE_BUDGET_S,
    SERVE_MAX_BATCH,
    SERVE_MAX_DELAY_MS,
    SERVE_SEARCH,
)
from torchdoctor.core.errors import UsageError

if TYPE_CHECKING:
    from torchdoctor.scale import ScalingStudy, StudyPlan
    from torchdoctor.serve import InferenceTarget, Request, ServeResult, SlaSpec, VariantSetup
    from torchdoctor.tune import TuneResult

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    """The progress of a study nobody watches."""


def scale(
    target: Target,
    *,
    nproc: Sequence[int] = SCALE_NPROC,
    mode: str = SCALE_MODE,
    batch: int = SCALE_BATCH,
    steps: int = SCALE_STEPS,
    threads: int | None = None,
    backend: str | None = None,
    quick: bool = False,
    project_to: Sequence[int] = SCALE_PROJECT_TO,
    bandwidth: Sequence[float] = (),
    bench_sizes: Sequence[int] = (),
    job_timeout_s: float = SCALE_JOB_TIMEOUT_S,
    out: str | Path | None = None,
) -> ScalingStudy:
    """How a job scales over processes on this machine, and why not linearly
    (`torchdoctor scale`).

    `target`: a workload (`"mlp"`, `"path/to/file.py:factory"`) or a script's command line
    (`["python", "train.py", "--epochs", "1"]`). torchrun at each of `nproc` world sizes: a
    collective microbenchmark in the ranks (its alpha-beta fit; `bench_sizes` in bytes,
    `quick` fewer), then `steps` training steps (`mode` "weak": `batch` samples per rank;
    "strong": one global `batch` split over N), each job ended after `job_timeout_s`. Returns
    the `ScalingStudy`: speedup and efficiency per N, the gap to linear, and the model T(N)
    projected to `project_to` ranks and to other link bandwidths (`bandwidth`, GB/s). Several
    machines are studied from the command line (`--nnodes`, one command per node).

    Example:
        >>> s = torchdoctor.scale("mlp", nproc=[1, 2], steps=20)
        >>> [(w.world_size, w.speedup) for w in s.worlds]
    """
    from torchdoctor.core.rundir import new_run_dir
    from torchdoctor.scale import check_request, plan_study

    if any(v <= 0 for v in bandwidth):
        shown = ",".join(f"{v:g}" for v in bandwidth)
        raise UsageError(f"bandwidth needs positive GB/s, got {shown}", hint="e.g. [1, 10, 100]")
    command = _command(target)
    script = scale_script(*command) if command is not None else []
    workload = None if command is not None else str(target)
    check_request(
        workload=workload,
        script=script,
        mode=mode,
        job_timeout_s=job_timeout_s,
        nnodes=1,
        rdzv_endpoint=None,
    )
    plan = plan_study(
        nprocs=list(nproc),
        workload=workload,
        script=script,
        mode=mode,
        batch=batch,
        steps=steps,
        threads=threads,
        backend=backend,
        quick=quick,
        project_to=list(project_to),
        bandwidths=[v * 1e9 for v in bandwidth],
        nnodes=1,
        node_rank=None,
        rdzv_endpoint=None,
        local_addr=None,
        bench_sizes=list(bench_sizes),
        job_timeout_s=job_timeout_s,
    )
    for w in plan.warnings:  # N larger than the cores: warned, not refused
        warnings.warn(w, TorchDoctorWarning, stacklevel=2)
    run_dir = new_run_dir("scale", plan.target, out=Path(out) if out is not None else None)
    # One node: it is node 0, which gathers the study.
    return cast("ScalingStudy", scale_into(plan, run_dir, _quiet))


def scale_script(rest: list[str], module: bool) -> list[str]:
    """A script to scale, its command line as `parse_command` read it: a .py file with its
    arguments, checked to exist and parse, or the user's error."""
    if module or not rest[0].endswith(".py"):
        raise UsageError(
            "scale runs a script file after --",
            hint="torchdoctor scale --nproc 1,2 -- python train.py",
        )
    from torchdoctor.collect import check_script

    check_script(rest[0])
    return rest


def scale_into(plan: StudyPlan, run_dir: Path, progress: Progress) -> ScalingStudy | None:
    """Run the planned study into `run_dir`, each world size a stage told to `progress`:
    node 0's `ScalingStudy` (scaling.json written), or None on another node, whose results
    node 0 gathers. The folder is marked complete, or failed with why."""
    from torchdoctor.core.errors import TorchDoctorError
    from torchdoctor.core.rundir import SCALING, finish_run_dir
    from torchdoctor.measure import watch_load
    from torchdoctor.scale import build_study, run_worlds

    try:
        with watch_load() as load:  # the other work on the machine while the jobs ran
            run_worlds(plan, run_dir, progress)
        if plan.node_rank != 0:
            finish_run_dir(run_dir)
            return None
        study = build_study(plan, run_dir).model_copy(update={"machine_load": load.reading})
        study.write(run_dir / SCALING)
    except TorchDoctorError as exc:
        finish_run_dir(run_dir, error=str(exc))
        raise
    finish_run_dir(run_dir)
    return study


#: serve's `search` and `arrivals` values.
SEARCHES: Final = ("binary", "sweep")
ARRIVALS: Final = ("poisson", "gamma", "constant")
#: The shortest budget for the latency windows: a window of 100 requests needs some time
#: even for a fast model, and the percentiles need several windows.
MIN_SERVE_BUDGET_S: Final = 0.5


def serve(
    model: str,
    *,
    sla: str | None = None,
    search: str = SERVE_SEARCH,
    arrivals: str = SERVE_ARRIVALS,
    max_batch: int = SERVE_MAX_BATCH,
    max_delay_ms: float = SERVE_MAX_DELAY_MS,
    budget_s: float = SERVE_BUDGET_S,
    sweep_threads: bool = True,
    instances: bool = False,
    variants: Sequence[str] | None = None,
    device: str | None = None,
    seed: int = 0,
    out: str | Path | None = None,
) -> ServeResult:
    """Serve a model request by request and say how fast requests are answered
    (`torchdoctor serve MODEL`).

    `model`: a built-in workload's model (`"mlp"`, `"cnn"`, `"gpt"`, `"recsys"`) or
    `"path/to/model.py:make_model"` (returning the module and example inputs). Latency at
    batch 1 for at most `budget_s` of windows, each percentile with a distribution-free
    interval; throughput and percentiles against batch size up to `max_batch` (and intra-op
    threads on a CPU, `sweep_threads`; model instances with `instances`); the batching
    simulation; with `sla` (`"p99<=20ms"`) the highest arrival rate that meets it, open-loop
    under a dynamic batcher (`max_delay_ms` of queue delay, `arrivals` poisson, gamma or
    constant, a `search` binary or sweep), confirmed. `variants` (`["inference_mode",
    "compile"]`) are each gated on accuracy against fp32 eager, then timed against it.
    Returns the `ServeResult` (also the run folder's serve.json).

    Example:
        >>> r = torchdoctor.serve("mlp", sla="p99<=5ms", device="cpu")
        >>> r.sla_result
    """
    from torchdoctor.core.rundir import new_run_dir
    from torchdoctor.serve import load_target

    spec, names = serve_options(sla, search, arrivals, variants, budget_s)
    device_name = resolve_device(device)
    target = load_target(model, device=device_name)  # a failing factory or model stops here
    result, _ = serve_into(
        lambda: new_run_dir("serve", model, out=Path(out) if out is not None else None),
        target,
        spec=spec,
        variants=names,
        search=search,
        arrivals=arrivals,
        max_batch=max_batch,
        max_delay_ms=max_delay_ms,
        budget_s=budget_s,
        sweep_threads=sweep_threads,
        instances=instances,
        seed=seed,
        progress=_quiet,
    )
    return result


def serve_options(
    sla: str | None,
    search: str,
    arrivals: str,
    variants: Sequence[str] | None,
    budget_s: float,
) -> tuple[SlaSpec | None, list[str]]:
    """serve's options checked before anything is built (the user's error, exit 2, names
    the option): the SLA read, the variants' names known and given once each."""
    from torchdoctor.serve import parse_sla, variant_spec

    if budget_s < MIN_SERVE_BUDGET_S:
        raise UsageError(
            f"--budget {budget_s:g}s is under {MIN_SERVE_BUDGET_S:g} s", hint="e.g. 10s"
        )
    spec = parse_sla(sla) if sla is not None else None
    for value, allowed, option in (
        (search, SEARCHES, "--search"),
        (arrivals, ARRIVALS, "--arrivals"),
    ):
        if value not in allowed:
            raise UsageError(f"{option} {value!r} is not one of {', '.join(allowed)}")
    names = [n.strip() for n in (variants or []) if n.strip()]
    if len(set(names)) != len(names):
        raise UsageError(f"--variants names a variant twice: {','.join(variants or [])}")
    for name in names:
        variant_spec(name)
    return spec, names


def serve_into(
    make_run_dir: Callable[[], Path],
    target: InferenceTarget,
    *,
    spec: SlaSpec | None,
    variants: list[str],
    search: str,
    arrivals: str,
    max_batch: int,
    max_delay_ms: float,
    budget_s: float,
    sweep_threads: bool,
    instances: bool,
    seed: int,
    progress: Progress,
) -> tuple[ServeResult, Path]:
    """What `serve` measures once its model is built, for this API and the command: the
    variants prepared and gated (each stage told to `progress`), then the serving study into
    the run folder `make_run_dir` makes once they are (serve.json; the folder marked failed
    with why on an error). Returns the result and the folder."""
    from torchdoctor.core.rundir import SERVE, finish_run_dir
    from torchdoctor.measure import watch_load
    from torchdoctor.serve import ServePlan, serve_target

    calls, setups, variant_notes = _prepare_variants(variants, target, progress)
    plan = ServePlan(
        max_batch_size=max_batch,
        latency_budget_s=budget_s,
        threads=sweep_threads,
        instances=instances,
        sla=spec,
        search=search,  # type: ignore[arg-type]  # checked by serve_options
        arrivals=arrivals,  # type: ignore[arg-type]
        max_queue_delay_s=max_delay_ms / 1e3,
        seed=seed,
        variants=calls,
    )
    run_dir = make_run_dir()
    try:
        with watch_load() as load:
            result = serve_target(target, plan, progress=progress)
        result = result.model_copy(
            update={
                "machine_load": load.reading,
                "variant_setups": setups,
                "notes": [*variant_notes, *result.notes],
            }
        )
        result.write(run_dir / SERVE)
    except BaseException as exc:
        finish_run_dir(run_dir, error=f"{type(exc).__name__}: {exc}")
        raise
    finish_run_dir(run_dir)
    return result, run_dir


def _prepare_variants(
    names: list[str], target: InferenceTarget, progress: Progress
) -> tuple[dict[str, Request], list[VariantSetup], list[str]]:
    """Each variant built and gated on accuracy; only those that pass are timed."""
    from torchdoctor.serve import VariantUnavailable, prepare_variant

    calls: dict[str, Request] = {}
    setups: list[VariantSetup] = []
    notes: list[str] = []
    args = target.batch(1)
    for name in names:
        progress(f"preparing the variant {name}")
        try:
            prepared = prepare_variant(name, target.model, args, device=target.device)
        except VariantUnavailable as exc:
            notes.append(f"{name}: not measured, it does not apply here ({exc.reason})")
            continue
        setups.append(prepared.record())
        if not prepared.accuracy.passed:
            notes.append(
                f"{name}: not measured, it fails the accuracy gate against fp32 eager "
                f"({prepared.accuracy.tolerance.describe()})"
            )
            continue
        calls[name] = functools.partial(prepared.call, args)
    return calls, setups, notes


def demo(
    *,
    budget_s: float | None = None,
    quick: bool = False,
    device: str | None = None,
    params: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
) -> TuneResult:
    """Diagnose and tune a built-in workload end to end (`torchdoctor demo`): the cnn on a
    CPU, GPT-2 small on a GPU (tune/demo.py says why), its diagnosis's prescriptions first.

    `budget_s`: the tuning budget (default core/defaults.py `DEMO_BUDGET_S`, 8 minutes; with
    `quick`, one sized for the device from the step just diagnosed); `quick`: a few knobs,
    shorter A/Bs and no batch search, what that costs said in the result's notes; `params`:
    the workload's own parameters. Returns the `TuneResult` (its `run_dir` holds the
    diagnosis, the trials and the report's records).

    Example:
        >>> t = torchdoctor.demo(quick=True, device="cpu")
        >>> t.best_recipe, t.speedup, t.notes
    """
    from torchdoctor.api.command_line import workload_options
    from torchdoctor.api.progress import notebook_progress
    from torchdoctor.api.tuning import diagnosed_run_dir, ladder_progress, tune_into
    from torchdoctor.tune import demo_config, demo_story

    device_name = resolve_device(device)
    workload, _, _ = demo_story(device_name)
    if params:  # a bad parameter fails before the run folder exists
        from torchdoctor.workloads import get_workload

        get_workload(workload, **dict(params))
    with notebook_progress(f"demo {workload}: diagnosing") as bar:
        run_dir, prescribed = diagnosed_run_dir(
            workload,
            Path(out) if out is not None else None,
            device=device_name,
            params=dict(params or {}),
        )
        config = demo_config(
            run_dir,
            prescribed,
            device=device_name,
            budget_s=budget_s,
            quick=quick,
            factory_options=workload_options(params),
        )
        return tune_into(config, run_dir, ladder_progress(bar, f"tune demo {workload}"))
