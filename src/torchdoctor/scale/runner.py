"""`run_study`: torchrun at each world size, the collectives measured there, the study built.

Per world size N (a subfolder `n<N>/` of the run folder), one torchrun job through the
launcher of `collect/`: at N >= 2 its ranks first run the collective microbenchmark in a
process group of their own (`_rank_bench.bench_if_asked`), then train; the launcher's
instrumentation writes each rank's steps (`script_profile.rank<R>.json`) as it does for
`diagnose -- torchrun`. A built-in workload runs as `_rank_train` (a plain DDP loop); a user's
script as itself under `_rank_script`. Both record the parameters DDP reduces
(`ddp_params.json`). `build_study` reads the folder back, so a study run on several nodes
into one shared folder is gathered by the same code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchdoctor.collect import ScriptProfile, read_profiles
from torchdoctor.core.errors import ScaleError
from torchdoctor.procs import run_script
from torchdoctor.scale._ddp_params import read_ddp_parameters
from torchdoctor.scale._fsdp_probe import FsdpProbe, read_fsdp_probe
from torchdoctor.scale._fsdp_units import FsdpJob, read_fsdp_job
from torchdoctor.scale.buckets import DEFAULT_BUCKET_CAP_MB, ddp_buckets
from torchdoctor.scale.collectives import BENCH_ENV, BENCH_FILE, CollectiveBench
from torchdoctor.scale.fsdp import FsdpProjection, Overlap, fsdp_collectives, project_fsdp
from torchdoctor.scale.launch import (
    JOB_TIMEOUT_S,
    Topology,
    rank_env,
    torchrun_args,
)
from torchdoctor.scale.projection import ScalingModel, projections
from torchdoctor.scale.strategy_steps import (
    StrategyComparison,
    compare_steps,
    ddp_model,
    fsdp_pays_from,
)
from torchdoctor.scale.study import ScalingStudy, world_result
from torchdoctor.scale.worlds import MeasuredWorld, ScalingMode, measured_world

Progress = Callable[[str], None]
#: Seconds node 0 waits for the other nodes' ranks to write their records into the shared run
#: folder after its own job ended (they exit within moments of it; a slow shared file system
#: may take a few seconds to show a file).
GATHER_WAIT_S = 30.0


@dataclass(frozen=True)
class StudyPlan:
    """What to run: a workload (`workload`) or a script (`script`: its argv)."""

    nprocs: Sequence[int]
    workload: str | None = None
    script: Sequence[str] = ()
    mode: ScalingMode = "weak"
    batch: int = 256
    steps: int = 30
    threads: int = 1
    backend: str = "gloo"
    quick: bool = False
    bench_sizes: Sequence[int] = ()
    project_to: Sequence[int] = (4, 8, 16)
    bandwidths: Sequence[float] = ()
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    local_addr: str | None = None
    #: Seconds one world size's job (microbenchmark and training) may take: past it, the job
    #: and every process it started are ended and the study stops, saying which job it was.
    job_timeout_s: float = JOB_TIMEOUT_S
    warnings: list[str] = field(default_factory=list)

    @property
    def target(self) -> str:
        return self.workload or " ".join(self.script)

    def per_rank_batch(self, world: int) -> int:
        if self.mode == "weak":
            return self.batch
        if self.batch % world:
            raise ScaleError(
                f"strong scaling splits the global batch {self.batch} over {world} ranks, "
                "which does not divide it",
                hint="pick --batch a multiple of every world size",
            )
        return self.batch // world


def world_dir(run_dir: Path, world: int) -> Path:
    return run_dir / f"n{world}"


def _train(plan: StudyPlan, topology: Topology, out: Path) -> None:
    world = topology.world_size
    argv = ["torch.distributed.run", *torchrun_args(topology, run_id=f"train{world}")]
    if plan.workload is not None:
        argv += ["-m", "torchdoctor.scale._rank_train", plan.workload, "--batch"]
        argv += [
            str(plan.per_rank_batch(world)),
            "--steps",
            str(plan.steps),
            "--backend",
            plan.backend,
        ]
        steps = None
    else:
        argv += ["-m", "torchdoctor.scale._rank_script", *plan.script]
        steps = plan.steps
    env = rank_env(plan.threads, str(out))
    if world >= 2:  # the collectives first, in the same ranks (`_rank_bench.bench_if_asked`)
        bench = {"backend": plan.backend, "quick": plan.quick, "sizes": list(plan.bench_sizes)}
        env[BENCH_ENV] = json.dumps({**bench, "out_dir": str(out)})
    started = time.monotonic()
    profile = run_script(
        argv,
        module=True,
        steps=steps,
        profile_steps=0,
        out_dir=out,
        timeout_s=plan.job_timeout_s,
        env=env,
        output=out / f"output.node{plan.node_rank}.log",
        kill_tree=True,
    )
    took = time.monotonic() - started
    if took >= plan.job_timeout_s:
        raise ScaleError(
            f"the job at N={world} (node {plan.node_rank}) did not finish within its deadline "
            f"of {plan.job_timeout_s:.0f} s: it and the processes it started were ended",
            hint=f"see {out}/output.node*.log; a slow link needs a longer --job-timeout",
        )
    if profile.exit_code not in (0, None):
        why = profile.error or f"see {out}/output.node*.log"
        raise ScaleError(f"the job at N={world} exited {profile.exit_code}: {why}")


def run_worlds(plan: StudyPlan, run_dir: Path, progress: Progress) -> None:
    """Every world size's benchmark and training job, into `run_dir/n<N>/`."""
    for nproc in plan.nprocs:
        topology = Topology(
            nproc, plan.nnodes, plan.node_rank, plan.rdzv_endpoint, local_addr=plan.local_addr
        )
        out = world_dir(run_dir, topology.world_size)
        out.mkdir(parents=True, exist_ok=True)
        what = "collective microbenchmark, then " if topology.world_size >= 2 else ""
        progress(f"N={topology.world_size}: {what}training {plan.steps} steps")
        _train(plan, topology, out)


def _rank_profiles(out: Path, world: int, wait_s: float) -> list[ScriptProfile]:
    """The ranks' profiles in `out`, waiting up to `wait_s` for all `world` of them: on
    several nodes, the others' ranks write theirs as they exit, after this node's job ended."""
    deadline = time.monotonic() + wait_s
    while True:
        profiles = [p for p in read_profiles(out) if p.rank is not None]
        if len(profiles) >= world or time.monotonic() >= deadline:
            return [p for p in profiles if p.steps]
        time.sleep(0.5)


def _measured(out: Path, world: int, per_rank_batch: int | None, wait_s: float) -> MeasuredWorld:
    profiles = _rank_profiles(out, world, wait_s)
    if not profiles:
        raise ScaleError(
            f"{out}: no rank recorded a training step", hint=f"see {out}/output.node*.log"
        )
    return measured_world([p.steps for p in profiles], per_rank_batch=per_rank_batch)


def build_study(plan: StudyPlan, run_dir: Path) -> ScalingStudy:
    """Read every world's results from `run_dir` and build the study (the model included
    when N=1 and a benchmark at N >= 2 were measured and DDP's parameters were recorded)."""
    worlds = sorted(int(p.name[1:]) for p in run_dir.glob("n*") if p.name[1:].isdigit())
    if not worlds:
        raise ScaleError(f"{run_dir}: no world size was measured")
    wait = GATHER_WAIT_S if plan.nnodes > 1 else 0.0
    measured = {
        n: _measured(
            world_dir(run_dir, n), n, plan.per_rank_batch(n) if plan.workload else None, wait
        )
        for n in worlds
    }
    benches = {
        n: CollectiveBench.read(world_dir(run_dir, n) / BENCH_FILE)
        for n in worlds
        if (world_dir(run_dir, n) / BENCH_FILE).is_file()
    }
    params = next(
        (
            read_ddp_parameters(world_dir(run_dir, n))
            for n in worlds
            if read_ddp_parameters(world_dir(run_dir, n))
        ),
        None,
    )
    job = next((j for n in worlds if (j := read_fsdp_job(world_dir(run_dir, n))) is not None), None)
    warnings = list(plan.warnings)
    if 1 not in measured:
        warnings.append("no N=1 run: speedups and projections need one (add 1 to --nproc)")
    if params is None and job is None:
        warnings.append(
            "the job wrapped no model in DistributedDataParallel or fully_shard: no projection"
        )

    def model_at(n: int) -> ScalingModel | None:
        if 1 not in measured or params is None or n not in benches:
            return None
        sizes, cap = params
        bench = benches[n]
        probe = bench.colocation
        buckets = ddp_buckets(sizes, bucket_cap_mb=cap or DEFAULT_BUCKET_CAP_MB)
        return ScalingModel(
            mode=plan.mode,
            base=measured[1],
            gradient_bytes=sum(sizes),
            buckets=buckets,
            # fitted around the buckets' sizes: what the model evaluates (fit.py)
            ring=bench.fit_near("all_reduce", buckets),
            parameter_server=bench.fit_near("reduce_broadcast", buckets),
            ring_cpu=bench.cpu_fit_near("all_reduce", buckets),
            threads_per_core=bench.threads_per_core,
            colocation_slowdown=probe.slowdown if probe else 1.0,
            colocation_ci=probe.slowdown_ci if probe else (1.0, 1.0),
        )

    base = measured.get(1) or measured[worlds[0]]
    results = [world_result(base, measured[n], plan.mode, model_at(n)) for n in worlds]
    largest = max(benches) if benches else None
    model = model_at(largest) if largest is not None else None
    projected = []
    if model is not None:
        sizes = sorted({*worlds, *plan.project_to} - {1})
        projected = projections(model, sizes, bandwidths=[None, *plan.bandwidths])
    fsdp: list[FsdpProjection] = []
    strategies: list[StrategyComparison] = []
    if job is not None and 1 in measured and benches:
        sizes = sorted({*(n for n in worlds if n in benches), *plan.project_to} - {1})
        for n in sizes:
            at = n if n in benches else max(benches)
            bench = benches[at]
            probe = read_fsdp_probe(world_dir(run_dir, at))
            replicated = ddp_model(measured[1], job, bench) if "all_reduce" in bench.fits else None
            for busbw in [None, *plan.bandwidths]:
                fsdp.append(fsdp_at(measured[1], job, bench, n, busbw, probe))
                if replicated is not None:
                    strategies.append(compare_steps(fsdp[-1], replicated, plan.backend, busbw))
    return ScalingStudy(
        target=plan.target,
        kind="workload" if plan.workload else "script",
        mode=plan.mode,
        backend=plan.backend,
        threads_per_rank=plan.threads,
        nnodes=plan.nnodes,
        worlds=results,
        benches=[benches[n] for n in sorted(benches)],
        model=model,
        projections=projected,
        fsdp=fsdp,
        strategies=strategies,
        fsdp_pays_from=fsdp_pays_from(strategies),
        warnings=warnings,
    )


def fsdp_overlap(job: FsdpJob, backend: str) -> Overlap:
    """What of the job's communication can run under its compute (`fsdp.Overlap`): on GPUs
    (NCCL) FSDP2's collectives run on their own streams; on the CPU (gloo) only all-gathers
    the job prefetches and issues asynchronously."""
    if backend == "nccl":
        return "prefetch"
    return "all_gather" if job.forward_prefetch and job.unshard_async else "none"


def fsdp_at(
    base: MeasuredWorld,
    job: FsdpJob,
    bench: CollectiveBench,
    world_size: int,
    busbw: float | None = None,
    probe: FsdpProbe | None = None,
) -> FsdpProjection:
    """An FSDP2 job's step at `world_size` from its N = 1 steps and the microbenchmark of
    `bench`: the all-gather and reduce-scatter fitted around the step's own sizes (at the
    bench's N), the co-location slowdown, and, where the ranks fill the cores, the share of an
    all-gather's time its CPU work takes (what a hidden collective takes from the compute);
    and `probe`, FSDP2's own CPU work timed in the same ranks (`_fsdp_probe`)."""
    collectives = fsdp_collectives(
        job.shape,
        bench.world_size,
        param_dtype_bytes=job.param_dtype_bytes,
        reduce_dtype_bytes=job.reduce_dtype_bytes,
        reshard_after_forward=job.reshard_after_forward,
    )
    gathers = [c.size_bytes for c in collectives if c.kind == "all_gather"]
    reduces = [c.size_bytes for c in collectives if c.kind == "reduce_scatter"]
    all_gather = bench.fit_near("all_gather", gathers)
    reduce_scatter = (
        bench.fit_near("reduce_scatter", reduces) if "reduce_scatter" in bench.fits else None
    )
    cpu_share = None
    cpu = bench.cpu_fit_near("all_gather", gathers)
    if cpu is not None and (bench.threads_per_core or 0.0) >= 1.0:
        cpu_share = min(1.0, sum(map(cpu.predict, gathers)) / sum(map(all_gather.predict, gathers)))
    co = bench.colocation
    colocation = (co.slowdown, *co.slowdown_ci) if co is not None else (1.0, 1.0, 1.0)
    total = sum(base.phases.values())
    return project_fsdp(
        step_s=base.step_s,
        # the phases are means, the step a median: the optimizer's share of the step, as
        # scale/projection.py calibrates N = 1's phases to its step
        optimizer_s=base.step_s * base.phases.get("optimizer", 0.0) / total if total > 0 else 0.0,
        shape=job.shape,
        world_size=world_size,
        all_gather=all_gather,
        reduce_scatter=reduce_scatter,
        param_dtype_bytes=job.param_dtype_bytes,
        reduce_dtype_bytes=job.reduce_dtype_bytes,
        reshard_after_forward=job.reshard_after_forward,
        overlap=fsdp_overlap(job, bench.backend),
        colocation=colocation,
        cpu_share=cpu_share,
        busbw=busbw,
        step_times=base.step_times,
        probe=probe,
    )
