"""The Python API of the commands that measure, read or render without training a study:
`bench`, `profile`, `memory`, `analyze`, `diff`, `report`, `env`, `workloads`.

Each returns the record its command prints (`--json`), with the command's defaults
(core/defaults.py), and writes the run folder its command writes (`out`, else a new one under
torchdoctor-runs/; `report=False` writes none where the command has `--no-report`).
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from torchdoctor.api.command_line import TorchDoctorWarning, assignments, resolve_device
from torchdoctor.core.defaults import (
    ANALYZE_TOP,
    BENCH_BUDGET_S,
    BENCH_CONFIDENCE,
    BENCH_SETUP,
    BENCH_TARGET_REL_CI,
    PROFILE_ACTIVE,
    PROFILE_WAIT,
    PROFILE_WARMUP,
    REPORT_FORMAT,
)
from torchdoctor.core.errors import TorchDoctorError, UsageError

if TYPE_CHECKING:
    from torchdoctor.analyze import TraceAnalysis
    from torchdoctor.collect import ProfileCapture
    from torchdoctor.core.env import Ceilings, EnvFingerprint
    from torchdoctor.core.memory_owners import MemoryPlan
    from torchdoctor.core.shard_memory import ShardPlan
    from torchdoctor.diagnose import RunDiff
    from torchdoctor.knobs import Recipe
    from torchdoctor.measure import Comparison, Measurement
    from torchdoctor.workloads import Workload


def bench(
    stmt: str,
    *,
    setup: str = BENCH_SETUP,
    vs: str | None = None,
    budget_s: float = BENCH_BUDGET_S,
    confidence: float = BENCH_CONFIDENCE,
    target_rel_ci: float = BENCH_TARGET_REL_CI,
    device: str | None = None,
    globals: Mapping[str, Any] | None = None,
) -> Measurement | Comparison:
    """Time a statement, or compare two (`torchdoctor bench STMT [--vs STMT2]`).

    Warm-up, block sizing and adaptive repetition until the interval of the median is
    `target_rel_ci` of it wide (or `budget_s` runs out). Returns a `Measurement`; with `vs`,
    an interleaved A/B (`stmt` the baseline) as a `Comparison`: the ratio of medians, its
    interval and a verdict. The statements see `torch`, `math` and `globals`. `device`:
    "cuda" times each block with CUDA events; unset, the host clock.

    Example:
        >>> m = torchdoctor.bench("a @ a", setup="a = torch.randn(256, 256)", budget_s=2)
        >>> m.median, m.ci
    """
    if not 0.0 < confidence < 1.0:
        raise UsageError(f"confidence {confidence:g} must be between 0 and 1", hint="e.g. 0.95")
    if not target_rel_ci > 0:
        raise UsageError(f"target_rel_ci {target_rel_ci:g} must be positive", hint="e.g. 0.01")
    if vs == stmt:
        raise UsageError("vs is the same statement as stmt", hint="compare two different ones")
    if device is not None:
        from torchdoctor.engine import resolve_device as check_device

        check_device(device)
    return time_statements(
        stmt,
        setup=setup,
        vs=vs,
        budget_s=budget_s,
        confidence=confidence,
        target_rel_ci=target_rel_ci,
        device=device,
        globals=globals,
    )


def time_statements(
    stmt: str,
    *,
    setup: str,
    vs: str | None,
    budget_s: float,
    confidence: float,
    target_rel_ci: float,
    device: str | None,
    globals: Mapping[str, Any] | None = None,
) -> Measurement | Comparison:
    """The timing `bench` does once its options are checked, for this API and the command:
    `stmt` alone (a `Measurement`) or against `vs` (a `Comparison`), the machine's other load
    recorded beside it. The statements run with torch and math already imported, as in a
    quick REPL session, and `globals`."""
    import torch

    from torchdoctor.measure import Timer, compare, watch_load

    namespace: dict[str, Any] = {"torch": torch, "math": math, **dict(globals or {})}
    if vs is None:
        with watch_load() as load:
            m = Timer(stmt, setup, namespace, device=device).adaptive_autorange(
                target_rel_ci=target_rel_ci, budget_s=budget_s, confidence=confidence
            )
        return m.with_load(load.reading)
    with watch_load() as load:
        c = compare(
            {stmt: stmt, vs: vs},
            baseline=stmt,
            setup=setup,
            globals=namespace,
            budget_s=budget_s,
            confidence=confidence,
            target_rel_ci=target_rel_ci,
            device=device,
        )
    return c.with_load(load.reading)


class ProfileRun(NamedTuple):
    """What `profile` leaves: its run folder, the capture and the trace's analysis."""

    run_dir: Path
    capture: ProfileCapture
    analysis: TraceAnalysis


def profile(
    workload: str,
    *,
    recipe: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    wait: int = PROFILE_WAIT,
    warmup: int = PROFILE_WARMUP,
    active: int = PROFILE_ACTIVE,
    seed: int = 0,
    device: str | None = None,
    ceilings: bool = True,
    out: str | Path | None = None,
) -> ProfileRun:
    """Profile a window of a workload's steps (`torchdoctor profile WORKLOAD`).

    `wait` steps unprofiled, `warmup` the profiler's own, then `active` steps recorded: the
    Kineto trace (run folder's trace.json.gz), FLOPs per op and module, memory, and the
    trace's analysis against this machine's measured ceilings (`ceilings=False`: none).

    Example:
        >>> p = torchdoctor.profile("mlp", device="cpu")
        >>> p.analysis.breakdown, p.run_dir / "trace.json.gz"
    """
    from torchdoctor.analyze import analyze_trace
    from torchdoctor.collect import PROFILE_SUMMARY, profile_workload
    from torchdoctor.core.rundir import ANALYSIS, TRACE, marking_outcome, new_run_dir
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    device_name = resolve_device(device)
    job = get_workload(workload, **dict(params or {}))
    parsed = Recipe.parse(assignments(recipe), workload=job, device=device_name)
    machine = _ceilings(device_name) if ceilings else None
    run_dir = new_run_dir("profile", job.name, out=Path(out) if out is not None else None)
    with marking_outcome(run_dir):
        capture = profile_workload(
            job,
            parsed,
            run_dir,
            device=device_name,
            seed=seed,
            wait=wait,
            warmup=warmup,
            active=active,
        )
        capture.write(run_dir / PROFILE_SUMMARY)
        analysis = analyze_trace(run_dir / TRACE, ceilings=machine)
        analysis.write(run_dir / ANALYSIS)
    return ProfileRun(run_dir, capture, analysis)


def _ceilings(device: str) -> Ceilings | None:
    """This machine's measured ceilings (cached after the first measurement), or None with a
    `TorchDoctorWarning`: the trace is then judged without them."""
    from torchdoctor.measure import get_ceilings

    try:
        return get_ceilings(device="cuda" if device.startswith("cuda") else "cpu")
    except TorchDoctorError as exc:
        warnings.warn(f"ceilings unavailable: {exc}", TorchDoctorWarning, stacklevel=3)
        return None


def memory(
    workload: str,
    *,
    max_memory_bytes: int | None = None,
    batch_sizes: Sequence[int] | None = None,
    recipe: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    check_edge: bool = False,
    seed: int = 0,
    device: str | None = None,
    out: str | Path | None = None,
) -> MemoryPlan:
    """Who holds a step's memory, and the largest batch that fits (`torchdoctor memory`).

    One steady step at each of `batch_sizes` (default: a quarter, a half and all of the
    workload's default batch), its peak split into parameters, gradients, optimizer state,
    activations, temporaries and allocator slack, fitted as fixed + per_sample * batch; with
    `max_memory_bytes`, the largest batch predicted to fit. `check_edge` (with
    `max_memory_bytes`, on the CPU, on Linux): the real out-of-memory edge beside the
    prediction, bisected over batches each run in a child process capped at the budget.
    Returns the `MemoryPlan` (also the run folder's memory.json). A script is measured by
    `torchdoctor memory -- python train.py`.

    Example:
        >>> plan = torchdoctor.memory("mlp", max_memory_bytes=64 * 2**20, device="cpu")
        >>> plan.max_batch
    """
    from torchdoctor.core.rundir import new_run_dir
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    if "batch_size" in (recipe or {}):
        raise UsageError(
            "memory sets the batch size itself", hint="give the sizes as batch_sizes=[8, 16, 32]"
        )
    device_name = resolve_device(device)
    if check_edge:
        check_edge_usage(max_memory_bytes, device_name)
    job = get_workload(workload, **dict(params or {}))
    parsed = Recipe.parse(assignments(recipe), workload=job, device=device_name)
    run_dir = new_run_dir("memory", job.name, out=Path(out) if out is not None else None)
    return memory_into(
        run_dir,
        workload,
        job,
        parsed,
        batch_sizes=batch_sizes,
        budget_bytes=max_memory_bytes,
        device=device_name,
        check_edge=check_edge,
        params=params,
        seed=seed,
    )


#: The real edge is searched up to this multiple of the predicted largest batch: room for a
#: prediction twice too small, four times the claim's 10% and more.
EDGE_SEARCH_FACTOR = 2


def check_edge_usage(budget: int | None, device: str) -> None:
    """The real out-of-memory edge needs a budget to cap at and a CPU on Linux to cap it on."""
    if budget is None:
        raise UsageError(
            "--check-edge needs a budget to cap the probes at",
            hint="add --max-memory, e.g. --max-memory 64MiB",
        )
    if not device.startswith("cpu"):
        raise UsageError(
            "--check-edge caps host memory: it runs on the CPU",
            hint="add --device cpu (on a GPU, benchmarks/bench_memory_fit.py --device cuda "
            "caps the caching allocator)",
        )
    if not sys.platform.startswith("linux"):
        raise UsageError(
            "--check-edge needs Linux: it caps the data size (RLIMIT_DATA)",
            hint="run it on Linux",
        )


def memory_into(
    run_dir: Path,
    workload: str,
    job: Workload,
    recipe: Recipe,
    *,
    batch_sizes: Sequence[int] | None,
    budget_bytes: int | None,
    device: str,
    check_edge: bool,
    params: Mapping[str, Any] | None,
    seed: int,
) -> MemoryPlan:
    """What `memory` measures once its workload and recipe are built, for this API and the
    command: the owners at each batch, the fit, with `check_edge` the real edge (its probes
    build `workload`, the name or file.py:factory given, with `params`), written to
    `run_dir`'s memory.json (the folder marked complete, or failed with why)."""
    from torchdoctor.analyze import oom_edge, study_memory
    from torchdoctor.core.rundir import MEMORY, marking_outcome

    with marking_outcome(run_dir):
        plan = study_memory(
            job,
            batch_sizes=batch_sizes,
            budget_bytes=budget_bytes,
            device=device,
            recipe=recipe,
            seed=seed,
        )
        if check_edge and budget_bytes is not None and plan.max_batch is not None:
            dataset = job.build_dataset(seed)
            high = EDGE_SEARCH_FACTOR * plan.max_batch
            if hasattr(dataset, "__len__"):  # a batch past the dataset measures a short one
                high = min(high, len(dataset))
            edge = oom_edge(
                workload,
                budget_bytes,
                high=high,
                guess=plan.max_batch,
                params=dict(params or {}),
                recipe=recipe.to_dict(),
                seed=seed,
            )
            plan = plan.model_copy(update={"oom_edge": edge})
        plan.write(run_dir / MEMORY)
    return plan


#: The parameter dtypes of the mixed-precision policy `shard_memory` estimates under.
SHARD_DTYPES = ("bf16", "fp16", "fp32")


def shard_memory(
    workload: str,
    *,
    nproc: Sequence[int],
    max_memory_bytes: int | None = None,
    param_dtype: str = "bf16",
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    out: str | Path | None = None,
) -> ShardPlan:
    """Each rank's memory with the model sharded by FSDP2 over each of `nproc` ranks, before
    any GPU is bought (`torchdoctor memory WORKLOAD --nproc N`).

    Nothing is materialised: the shapes come from the meta device and the activations from
    two fake steps. Per rank: sharded parameters, gradients and optimizer state, the unsharded
    units, activations per sample; with `max_memory_bytes`, whether it fits and the largest
    batch per rank; DDP, FSDP and FSDP with CPU offload side by side. Returns the `ShardPlan`
    (also the run folder's shard_plan.json).

    Example:
        >>> plan = torchdoctor.shard_memory("gpt", nproc=[1, 8], max_memory_bytes=80 * 2**30)
        >>> [rank.batch for rank in plan.ranks]
    """
    from torchdoctor.core.rundir import new_run_dir

    job = shard_workload(workload, param_dtype=param_dtype, params=params)
    run_dir = new_run_dir("memory", job.name, out=Path(out) if out is not None else None)
    return shard_memory_into(
        run_dir, job, nproc, budget_bytes=max_memory_bytes, param_dtype=param_dtype, seed=seed
    )


def shard_workload(
    workload: str, *, param_dtype: str, params: Mapping[str, Any] | None
) -> Workload:
    """The workload `shard_memory` estimates, built with its `params` once the dtype is known
    (the user's error, exit 2, before anything is built)."""
    from torchdoctor.workloads import get_workload

    if param_dtype not in SHARD_DTYPES:
        raise UsageError(
            f"unknown --param-dtype {param_dtype!r}", hint=f"one of {', '.join(SHARD_DTYPES)}"
        )
    return get_workload(workload, **dict(params or {}))


def shard_memory_into(
    run_dir: Path,
    job: Workload,
    nproc: Sequence[int],
    *,
    budget_bytes: int | None,
    param_dtype: str,
    seed: int,
) -> ShardPlan:
    """What `shard_memory` estimates once its workload is built, for this API and the command
    (`memory --nproc`): each rank's memory at each world size with DDP, FSDP and offload side
    by side, written to `run_dir`'s shard_plan.json (the folder marked complete, or failed)."""
    from torchdoctor.analyze import estimate_shards
    from torchdoctor.core.rundir import SHARD_PLAN, marking_outcome
    from torchdoctor.scale import compare_strategies

    with marking_outcome(run_dir):
        plan = estimate_shards(
            job, list(nproc), param_dtype=param_dtype, budget_bytes=budget_bytes, seed=seed
        )
        strategies = [
            cost
            for rank in plan.ranks
            for cost in compare_strategies(
                plan.shape,
                rank.world_size,
                rank.batch,
                plan.moments,
                param_dtype_bytes=plan.param_dtype_bytes,
                prefetch=plan.prefetch,
            )
        ]
        plan = plan.model_copy(update={"strategies": strategies})
        plan.write(run_dir / SHARD_PLAN)
    return plan


def analyze(
    trace: str | Path,
    *,
    top: int = ANALYZE_TOP,
    out: str | Path | None = None,
    report: bool = True,
) -> TraceAnalysis:
    """Where the time of a profiler trace went (`torchdoctor analyze TRACE`).

    `trace`: a .json or .json.gz Kineto trace (CPU, CUDA or ROCm), or a folder of per-rank
    traces. Returns the `TraceAnalysis`: device timeline, per-step breakdown, the `top` ops
    with their roofline class, launch overhead, sync points, copies, idle gaps. `report`:
    write a run folder with analysis.json (and its report).

    Example:
        >>> a = torchdoctor.analyze("trace.json.gz", report=False)
        >>> a.breakdown
    """
    if top < 1:
        raise UsageError(f"top must be at least 1, got {top}")
    result = _load_analyzer()(Path(trace), top=top)  # a bad trace leaves no run folder
    if report:
        write_analysis(result, trace, out=out, reports=_reports)
    return result


BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def _load_analyzer() -> Callable[..., TraceAnalysis]:
    """`analyze_trace`, with numpy loaded on one BLAS thread if this is the first to load it.

    numpy's OpenBLAS starts a worker thread per core as it loads, and they spin-wait: ~60 ms
    of CPU (and, on a busy 2-core machine, ~70 ms of wall time) per `torchdoctor analyze`,
    which never calls BLAS. The variable is read only when the library loads, so it is set
    for the import and restored at once: the user's own setting, and the environment of
    anything started later, are left alone.
    """
    if "numpy" not in sys.modules and BLAS_THREADS_ENV not in os.environ:
        os.environ[BLAS_THREADS_ENV] = "1"
        try:
            import numpy  # noqa: F401
        finally:
            del os.environ[BLAS_THREADS_ENV]
    from torchdoctor.analyze import analyze_trace

    return analyze_trace


def write_analysis(
    result: TraceAnalysis,
    trace: str | Path,
    *,
    out: str | Path | None,
    reports: Callable[[Path], object],
) -> Path:
    """`analyze`'s run folder: analysis.json, then `reports(run_dir)` (the folder marked
    failed, in one line, when the disk refuses them). Returns the folder."""
    from torchdoctor.core.rundir import ANALYSIS, finishing, new_run_dir

    run_dir = new_run_dir("analyze", str(trace), out=Path(out) if out is not None else None)
    with finishing(run_dir, reports=lambda: reports(run_dir)):
        result.write(run_dir / ANALYSIS)
    return run_dir


def diff(
    a: str | Path,
    b: str | Path,
    *,
    out: str | Path | None = None,
    report: bool = True,
) -> RunDiff:
    """What changed from A to B (`torchdoctor diff A B`).

    Two run folders, two tuning results (a tune folder or its tune.json) or two profiler
    traces: the step and its phases, the ops and kernels that moved most, each with the 95%
    interval of its median shift where both sides hold several steps, and the findings that
    appeared or went away. Returns the `RunDiff` (`regressed`: B significantly slower).
    `report`: write a run folder with diff.json (and its report).

    Example:
        >>> d = torchdoctor.diff("yesterday/", "today/", report=False)
        >>> d.regressed, d.verdict
    """
    from torchdoctor.diagnose import diff_inputs

    result = diff_inputs(a, b)  # bad input fails before a run folder is made
    if report:
        write_diff(result, a, b, out=out, reports=_reports)
    return result


def write_diff(
    result: RunDiff,
    a: str | Path,
    b: str | Path,
    *,
    out: str | Path | None,
    reports: Callable[[Path], object],
) -> Path:
    """`diff`'s run folder: diff.json, then `reports(run_dir)`. Returns the folder."""
    from torchdoctor.core.rundir import DIFF, finish_run_dir, new_run_dir

    folder = Path(out) if out is not None else None
    run_dir = new_run_dir("diff", f"{Path(a).name}-vs-{Path(b).name}", out=folder)
    result.write(run_dir / DIFF)
    finish_run_dir(run_dir)
    reports(run_dir)
    return run_dir


def _reports(run_dir: Path) -> list[Path]:
    from torchdoctor.report import write_reports

    return list(write_reports(run_dir))


def report(
    source: str | Path,
    *,
    fmt: str = REPORT_FORMAT,
    out: str | Path | None = None,
) -> Path:
    """Render a run folder (or one record file) as a report (`torchdoctor report SRC`).

    `fmt`: "html" (one self-contained page), "md" or "json"; written to `out`, else
    report.<fmt> in the run folder. Returns the path written.

    Example:
        >>> torchdoctor.report(t.run_dir, fmt="md")
        PosixPath('torchdoctor-runs/.../report.md')
    """
    from torchdoctor.report import FORMATS, render_report

    if fmt not in FORMATS:
        raise UsageError(f"unknown report format {fmt!r}", hint="use html, md or json")
    return render_report(source, fmt, out)


class Environment(NamedTuple):
    """This machine as `torchdoctor env` shows it."""

    version: str
    fingerprint: EnvFingerprint
    ceilings: Ceilings


def env(
    *,
    refresh: bool = False,
    device: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Environment:
    """This machine's fingerprint and measured ceilings (`torchdoctor env`).

    The ceilings (peak matmul FLOP/s per precision, memory bandwidth) are measured once per
    machine and cached; `refresh=True` measures them again. `device`: whose ceilings
    (default: CUDA when present).

    Example:
        >>> e = torchdoctor.env(device="cpu")
        >>> e.fingerprint.cpu_model, e.ceilings
    """
    from torchdoctor._version import __version__
    from torchdoctor.core.env import fingerprint
    from torchdoctor.measure import get_ceilings

    fp = fingerprint()
    ceilings = get_ceilings(refresh=refresh, device=resolve_device(device), progress=progress)
    return Environment(__version__, fp, ceilings)


def workloads() -> list[Workload]:
    """The built-in workloads (`torchdoctor workloads`), one instance of each with its default
    parameters: `name`, `kind`, `description`, `sample_unit`, `default_batch_size`.

    Example:
        >>> [w.name for w in torchdoctor.workloads()]
        ['mlp', 'cnn', ...]
    """
    from torchdoctor.workloads import list_workloads

    return list_workloads()
