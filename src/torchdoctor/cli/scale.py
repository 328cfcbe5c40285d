"""`torchdoctor scale`: how a job scales over processes, and why not linearly.

torchdoctor scale WORKLOAD --nproc 1,2 [--mode weak|strong] [--batch B] [--steps S]
torchdoctor scale --nproc 1,2 -- python train.py ARGS
torchdoctor scale WORKLOAD --nproc 2 --nnodes 2 --rdzv-endpoint HOST:PORT [--node-rank K]
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from torchdoctor.api import parse_command, scale_into, scale_script
from torchdoctor.cli.live import stage_progress
from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    DURATION_HELP,
    NPROC_HELP,
    check_out,
    force_option,
    out_option,
    parse_duration,
    parse_int_list,
)
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import emit, err_console
from torchdoctor.core import defaults
from torchdoctor.core.errors import UsageError
from torchdoctor.core.rundir import display_path, new_run_dir

if TYPE_CHECKING:
    from torchdoctor.scale import StudyPlan

_HELP = """Measure how a job scales over N processes (torchrun at each N) and why it is not N
times faster: a collective microbenchmark at each N (all-reduce, all-gather, reduce-scatter,
reduce+broadcast; alpha-beta fit, bus bandwidth), the step measured per N against linear scaling
(a gap-to-linear waterfall) and against a model, T(N) = compute + (communication - overlap) +
optimizer + data + skew, projected to larger N, other bandwidths and a parameter server vs a
ring. A script that shards with FSDP2 (`fully_shard`) is projected from its own units' per-step
all-gathers and reduce-scatters.

Examples:
  torchdoctor scale mlp --nproc 1,2
  torchdoctor scale mlp --nproc 1,2 --mode strong --batch 512
  torchdoctor scale --nproc 1,2 -- python train.py --epochs 1
  torchdoctor scale mlp --nproc 2 --nnodes 2 --rdzv-endpoint node0:29500

Several nodes: prints each node's command (one shared --out); node 0 gathers the results.
"""


def _listed(values: tuple[int, ...]) -> str:
    """A default list as the option is written: (1, 2) -> '1,2'."""
    return ",".join(str(v) for v in values)


def _job_timeout(text: str | float) -> float:
    """--job-timeout in seconds: a duration, as every --budget is (a plain number is seconds)."""
    try:
        return parse_duration(text)
    except UsageError as exc:
        raise UsageError(f"--job-timeout {text}: not a positive duration", hint=exc.hint) from None


def _bandwidths(text: str) -> list[float]:
    try:
        values = [float(v) * 1e9 for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"cannot read --bandwidth {text!r}", hint="GB/s, e.g. 1,10,100") from None
    if any(v <= 0 for v in values):
        raise UsageError(f"--bandwidth needs positive GB/s, got {text!r}")
    return values


def _node_commands(
    nnodes: int, what: list[str], options: dict[str, str | None], script: list[str]
) -> list[str]:
    """The command each node runs: this one with its `--node-rank` (and a shared `--out`)."""
    argv = ["torchdoctor", "scale", *what]
    for name, value in options.items():
        if value is not None:
            argv += [name, value]
    tail = ["--", "python", *script] if script else []
    return [shlex.join([*argv, "--node-rank", str(k), *tail]) for k in range(nnodes)]


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": False},
    help=_HELP,
)
def scale(
    ctx: typer.Context,
    target: str | None = typer.Argument(None, help="WORKLOAD name (or a script after --)."),
    nproc: str = typer.Option(
        _listed(defaults.SCALE_NPROC), "--nproc", help=f"{NPROC_HELP} at each step, e.g. 1,2,4."
    ),
    mode: str = typer.Option(
        defaults.SCALE_MODE,
        "--mode",
        help="weak: a batch per rank; strong: one global batch split over N (workloads).",
    ),
    batch: int = typer.Option(
        defaults.SCALE_BATCH, "--batch", help="Samples per rank (weak) or per step (strong)."
    ),
    steps: int = typer.Option(defaults.SCALE_STEPS, "--steps", help="Training steps at each N."),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="Threads per rank, the same at every N (default: cores / largest N).",
    ),
    backend: str | None = typer.Option(
        None, "--backend", help="gloo (CPU) or nccl (GPU); default: nccl with a GPU."
    ),
    quick: bool = typer.Option(False, "--quick", help="Fewer benchmark sizes and repeats."),
    project_to: str = typer.Option(
        _listed(defaults.SCALE_PROJECT_TO), "--project-to", help="World sizes to project to."
    ),
    bandwidth: str = typer.Option(
        "", "--bandwidth", help="Other link bandwidths to project at, GB/s (e.g. 1,10)."
    ),
    nnodes: int = typer.Option(1, "--nnodes", help="Machines; each runs --nproc processes."),
    node_rank: int | None = typer.Option(
        None, "--node-rank", help="This machine's place (several nodes)."
    ),
    rdzv_endpoint: str | None = typer.Option(
        None, "--rdzv-endpoint", help="HOST:PORT of the rendezvous (several nodes)."
    ),
    local_addr: str | None = typer.Option(
        None,
        "--local-addr",
        help="This node's address as the others reach it (several nodes; default: its name's).",
    ),
    out: Path | None = out_option("Run folder to write (shared by the nodes)."),
    force: bool = force_option(),
    bench_sizes: str = typer.Option(
        "",
        "--bench-sizes",
        help="Collective sizes in bytes, e.g. 1024,65536,4194304 (default: 1 KiB to 64 MiB; "
        "a slow link takes minutes over the largest).",
    ),
    job_timeout: float = typer.Option(
        f"{defaults.SCALE_JOB_TIMEOUT_S:g}s",
        "--job-timeout",
        parser=_job_timeout,
        metavar="DURATION",
        help="How long one world size's job may take before it and its ranks are ended. "
        f"{DURATION_HELP}",
    ),
) -> None:
    from torchdoctor.scale import check_request, plan_study

    # Everything after `--` is positional to click: its first word lands in `target`.
    command = [target, *ctx.args] if target is not None and ctx.args else list(ctx.args)
    if target is not None and not ctx.args and target.endswith(".py") and ":" not in target:
        command = [target]  # `torchdoctor scale -- train.py`: a script without arguments
    workload = None if command else target
    if nnodes == 1:  # several nodes share one --out by design, each writing its own files
        check_out(out, force=force)
    script = scale_script(*parse_command(command)) if command else []
    nprocs = parse_int_list(nproc, "--nproc")
    check_request(
        workload=workload,
        script=script,
        mode=mode,
        job_timeout_s=job_timeout,
        nnodes=nnodes,
        rdzv_endpoint=rdzv_endpoint,
    )
    if nnodes > 1 and node_rank is None:
        options = {
            "--nproc": nproc,
            "--mode": mode,
            "--batch": str(batch),
            "--steps": str(steps),
            "--threads": str(threads) if threads else None,
            "--backend": backend,
            "--nnodes": str(nnodes),
            "--rdzv-endpoint": rdzv_endpoint,
            "--out": str(out) if out else "SHARED_FOLDER",
            "--bench-sizes": bench_sizes or None,
            "--job-timeout": f"{job_timeout:g}"
            if job_timeout != defaults.SCALE_JOB_TIMEOUT_S
            else None,
        }
        commands = _node_commands(nnodes, [workload] if workload else [], options, script)
        emit({"nnodes": nnodes, "commands": commands}, lambda c: _print_commands(c, commands))
        return
    plan = plan_study(
        nprocs=nprocs,
        workload=workload,
        script=script,
        mode=mode,
        batch=batch,
        steps=steps,
        threads=threads,
        backend=backend,
        quick=quick,
        project_to=parse_int_list(project_to, "--project-to"),
        bandwidths=_bandwidths(bandwidth),
        nnodes=nnodes,
        node_rank=node_rank,
        rdzv_endpoint=rdzv_endpoint,
        local_addr=local_addr,
        bench_sizes=parse_int_list(bench_sizes, "--bench-sizes") if bench_sizes else (),
        job_timeout_s=job_timeout,
    )
    _run_study(plan, out)


def _run_study(plan: StudyPlan, out: Path | None) -> None:
    """Run the planned study into a new run folder; show it (node 0) or say it is done."""
    for w in plan.warnings:  # N larger than the cores: warned, not refused
        err_console.print(f"[yellow]warning:[/] {w}")
    nnodes, nprocs = plan.nnodes, plan.nprocs
    run_dir = new_run_dir("scale", plan.target, out=out)
    worlds = ", ".join(f"N={n * nnodes}" for n in nprocs)
    shown = [
        f"world sizes {worlds}: {plan.mode} scaling, {plan.steps} steps each, {plan.threads} "
        f"thread(s) per rank, {plan.backend}" + (f", {nnodes} nodes" if nnodes > 1 else ""),
        "each N >= 2: a collective microbenchmark in the same ranks, then the training job",
    ]
    # Each world size a stage.
    with stage_progress(f"scale {plan.target}", shown, expected=len(nprocs)) as progress:
        study = scale_into(plan, run_dir, progress)
    if study is None:
        done = {"node_rank": plan.node_rank, "run_dir": str(run_dir), "gathered_by": 0}
        emit(done, lambda c: c.print(f"node {plan.node_rank} done; node 0 gathers the results"))
        return
    write_run_reports(run_dir)

    def render(console: Console) -> None:
        from torchdoctor.report import render_records

        render_records(console, {"scaling": study}, run_dir)
        console.print(f"Run folder: {display_path(run_dir)}", soft_wrap=True)

    emit(study, render)


def _print_commands(console: Console, commands: list[str]) -> None:
    console.print("Run on each node, with one --out folder they all share:")
    for k, cmd in enumerate(commands):
        console.print(f"  node {k}: {cmd}", soft_wrap=True, markup=False)
