"""`torchdoctor memory WORKLOAD`: who holds a step's memory, and the largest batch that fits.

Runs one steady training step at each of two or three small batch sizes, splits each step's
memory into its owners (parameters, gradients, optimizer state, activations saved for
backward, temporaries, allocator slack), fits memory(batch) = fixed + per_sample * batch, and,
given `--max-memory`, predicts the largest batch under it and whether activation
checkpointing pays. Writes a run folder with memory.json (`MemoryPlan`) and the reports.

`torchdoctor memory -- python train.py ...`: the script unmodified, under the injected hooks
(collect/probes/step_memory.py), for two steps, its second split into the same owners at the
script's own batch (no fit, no prediction: a script's batch is its own).

`torchdoctor memory WORKLOAD --nproc 8 --max-memory 80GiB`: the model sharded with FSDP2 over
N ranks, estimated without materialising it (shapes from the `meta` device, activations from
fake steps; collect/shard_memory.py, analyze/shard_memory.py): each rank's parameters,
gradients, optimizer state, unsharded units and activations, whether it fits the budget and
the largest batch per rank that does. Writes shard_plan.json (`ShardPlan`) and the reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from torchdoctor.cli import options
from torchdoctor.cli.main import app
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import emit
from torchdoctor.cli.state import settings as cli_settings
from torchdoctor.core.errors import UsageError
from torchdoctor.report import render_records

if TYPE_CHECKING:
    from torchdoctor.core.memory_owners import MemoryPlan

#: --param-dtype's values (collect/shard_memory.py, `PARAM_DTYPES`), named here so that a
#: wrong one is refused before torch is imported.

#: A script runs this many steps: the first makes its optimizer's state, the second is split
#: (`collect.probes.step_memory.MIN_WARMUP`: the step after the warm-up's first).
SCRIPT_STEPS = 2


def parse_batch_sizes(text: str) -> list[int]:
    """'8,16,32' -> [8, 16, 32]: two or three distinct positive batch sizes."""
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        sizes = []
    if len(sizes) < 2 or sizes[0] < 1:
        raise UsageError(
            f"cannot read batch sizes {text!r}",
            hint="give two or three distinct positive batch sizes, e.g. --batch-sizes 8,16,32",
        )
    return sizes


def script_memory(command: list[str], out: Path | None) -> tuple[MemoryPlan, Path]:
    """`memory -- python train.py ...`: the script's second step split into its owners,
    written to a new run folder's memory.json."""
    from torchdoctor.analyze import owners_plan
    from torchdoctor.api import parse_command
    from torchdoctor.collect import check_command, read_profiles
    from torchdoctor.core.rundir import MEMORY, marking_outcome, new_run_dir
    from torchdoctor.procs import run_script

    argv, module = parse_command(command)
    check_command(argv, module)  # a script that cannot start leaves no run folder
    run_dir = new_run_dir("memory", argv[-1] if module else " ".join(argv), out=out)
    collect = run_dir / "collect"
    with marking_outcome(run_dir):
        main = run_script(
            argv,
            module=module,
            steps=SCRIPT_STEPS,
            warmup=SCRIPT_STEPS,
            profile_steps=0,
            out_dir=collect,
            stdout_to_stderr=cli_settings.json,
            memory_owners=True,
        )
        profiles = [*read_profiles(collect)] if collect.exists() else [main]
        found = next((p for p in profiles if p.memory is not None), None)
        if found is None or found.memory is None:
            why = main.memory_skipped or (
                f"the script ran {main.step_count} step(s), not {SCRIPT_STEPS}"
                if main.step_count < SCRIPT_STEPS
                else main.error or "no step was measured"
            )
            raise UsageError(
                f"no step's memory was measured: {why}",
                hint="the script must step a torch.optim optimizer twice, uncompiled",
            )
        plan = owners_plan(" ".join(command), found.memory)
        plan.write(run_dir / MEMORY)
    return plan, run_dir


@app.command("memory", context_settings={"allow_extra_args": True, "ignore_unknown_options": False})
def memory_command(
    ctx: typer.Context,
    workload: str | None = typer.Argument(
        None, help="Built-in name (see `workloads`) or file.py:factory; or -- python train.py."
    ),
    max_memory: str = typer.Option(
        None,
        "--max-memory",
        help="Memory budget, e.g. 4GiB or 512MiB: predict the largest batch whose step fits.",
    ),
    batch_sizes: str = typer.Option(
        None,
        "--batch-sizes",
        help="Two or three small batch sizes to measure, e.g. 8,16,32 "
        "(default: a quarter, a half and all of the workload's default batch).",
    ),
    settings: list[str] = typer.Option(
        [], "--set", help="Knob setting knob=value (repeatable), e.g. --set precision=bf16."
    ),
    params: list[str] = options.param_option(),
    check_edge: bool = typer.Option(
        False,
        "--check-edge",
        help="With --max-memory on the CPU (Linux): also find the real out-of-memory edge, "
        "bisecting over batches each run in a child process whose memory is capped at the "
        "budget (RLIMIT_DATA), and record it beside the prediction. A probe per batch; "
        "about ten probes of a few seconds each.",
    ),
    nproc: str | None = typer.Option(
        None,
        "--nproc",
        help=f"{options.NPROC_HELP}, e.g. 8 or 1,2,8: the model sharded with FSDP2 over N ranks, "
        "estimated without materialising it (meta device, fake steps).",
    ),
    param_dtype: str = typer.Option(
        "bf16",
        "--param-dtype",
        help="With --nproc: the mixed-precision policy's parameter dtype (bf16, fp16, fp32).",
    ),
    out: Path | None = options.out_option(),
    force: bool = options.force_option(),
    seed: int = options.seed_option(),
    device: str | None = options.device_option(),
) -> None:
    """Split a step's memory into its owners and predict the largest batch that fits.

    Each batch size runs one warm-up step and one measured step. On a GPU the peak is the
    CUDA caching allocator's (allocated, and reserved: the difference is its slack); on the
    CPU it is counted from the live tensors. The footprint is fitted against the batch size
    as fixed + per_sample * batch; with --max-memory the largest batch under the budget is
    predicted, and activation checkpointing is said to pay when activations are at least half
    of the per-sample slope.

    --check-edge checks the prediction against a real out-of-memory edge on the CPU: each
    probe builds the session in a child process, runs a warm-up step, then caps the child's
    data size (setrlimit RLIMIT_DATA; glibc's mmap threshold fixed, so freed tensors are
    given back) at its size then, less the tensors the prediction counts as resident, plus
    the budget; the steady step either fits or fails with the allocator's out-of-memory
    error. The edge is the largest batch that fits, searched from the predicted one outwards
    and then by bisection, to 1%.

    A script (-- python train.py ...) runs unmodified for two steps; the second is split
    into the same owners at the script's own batch, with no fit or prediction.

    --nproc N estimates each rank's memory with the model sharded by FSDP2 over N ranks,
    without building it: the shapes come from the meta device (parameters, gradients and
    optimizer state each divided over the ranks, the root's and the largest unit's parameters
    all-gathered in --param-dtype, the buffers whole), the activations from two fake steps
    (FakeTensorMode, torch's MemTracker). With --max-memory (per rank) it says whether it fits
    and the largest batch per rank that does.

    Example: torchdoctor memory gpt --max-memory 2GiB --batch-sizes 4,8,16
    Example: torchdoctor memory gpt --param layers=32 --param embd=4096 --param heads=32
    --param block=2048 --nproc 8 --max-memory 80GiB
    Example: torchdoctor memory mlp --max-memory 64MiB --batch-sizes 8,16,32 --check-edge
    """
    # Everything after `--` is positional to click: its first word lands in `workload`.
    command = [workload, *ctx.args] if workload is not None and ctx.args else list(ctx.args)
    options.check_out(out, force=force)
    if command:
        if max_memory or batch_sizes or settings or params or check_edge:
            raise UsageError(
                "a script's batch and recipe are its own",
                hint="drop --max-memory, --batch-sizes, --set, --param and --check-edge "
                "for a script",
            )
        options.refuse_given(
            ctx, ("seed", "device"), case="for a script", hint="its seed and device are its own"
        )
        plan, run_dir = script_memory(command, out)
        emit(plan, lambda console: render_records(console, {"memory": plan}))
        write_run_reports(run_dir)
        return
    if workload is None:
        raise UsageError(
            "nothing to measure", hint="torchdoctor memory gpt, or memory -- python train.py"
        )
    if nproc is not None:
        worlds = options.parse_int_list(nproc, "--nproc")
        options.refuse_given(
            ctx,
            ("batch_sizes", "settings", "check_edge", "device"),
            case="with --nproc",
            hint="the estimate builds nothing: drop them, or drop --nproc to measure a step",
        )
        from torchdoctor.api import shard_memory_into, shard_workload
        from torchdoctor.core.rundir import new_run_dir

        budget = options.parse_size(max_memory) if max_memory is not None else None
        job = shard_workload(
            workload, param_dtype=param_dtype, params=options.parse_workload_params(params)
        )
        run_dir = new_run_dir("memory", job.name, out=out)
        shards = shard_memory_into(
            run_dir, job, worlds, budget_bytes=budget, param_dtype=param_dtype, seed=seed
        )
        emit(shards, lambda console: render_records(console, {"shard_plan": shards}))
        write_run_reports(run_dir)
        return
    options.refuse_given(
        ctx, ("param_dtype",), case="without --nproc", hint="it is the sharded policy's dtype"
    )
    from torchdoctor.api import check_edge_usage, memory_into
    from torchdoctor.core.rundir import new_run_dir
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    if any(item.partition("=")[0].strip() == "batch_size" for item in settings):
        raise UsageError(
            "memory sets the batch size itself", hint="give the sizes as --batch-sizes 8,16,32"
        )
    budget = options.parse_size(max_memory) if max_memory is not None else None
    sizes = parse_batch_sizes(batch_sizes) if batch_sizes is not None else None
    device = options.default_device(device)
    if check_edge:
        check_edge_usage(budget, device)
    workload_params = options.parse_workload_params(params)
    job = get_workload(workload, **workload_params)
    recipe = Recipe.parse(settings, workload=job, device=device)
    run_dir = new_run_dir("memory", job.name, out=out)
    plan = memory_into(
        run_dir,
        workload,
        job,
        recipe,
        batch_sizes=sizes,
        budget_bytes=budget,
        device=device,
        check_edge=check_edge,
        params=workload_params,
        seed=seed,
    )

    emit(plan, lambda console: render_records(console, {"memory": plan}))
    write_run_reports(run_dir)
