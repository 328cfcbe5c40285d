"""`torchdoctor serve MODEL`: latency as requests see it, curves, batching, and an SLA search."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from torchdoctor.api import MIN_SERVE_BUDGET_S, serve_into, serve_options
from torchdoctor.cli import options
from torchdoctor.cli.live import stage_progress
from torchdoctor.cli.main import app
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import emit, err_console
from torchdoctor.core import defaults

if TYPE_CHECKING:
    from torchdoctor.serve import SlaSpec


@app.command("serve")
def serve_command(
    model: str = typer.Argument(
        ...,
        help="A built-in workload's model (mlp, cnn, gpt, recsys) or path/to/model.py:make_model, "
        "where make_model() returns (module, example_inputs).",
    ),
    sla: str | None = typer.Option(
        None, "--sla", help="Latency objective, e.g. p99<=20ms (p50, p95 or p99; us, ms, s)."
    ),
    search: str = typer.Option(
        defaults.SERVE_SEARCH,
        "--search",
        help="How the SLA search walks the rates: binary or sweep.",
    ),
    arrivals: str = typer.Option(
        defaults.SERVE_ARRIVALS,
        "--arrivals",
        help="Arrival process of the open-loop load: poisson, gamma, constant.",
    ),
    max_batch: int = typer.Option(
        defaults.SERVE_MAX_BATCH, "--max-batch", min=1, help="Largest batch the curve tries."
    ),
    max_delay_ms: float = typer.Option(
        defaults.SERVE_MAX_DELAY_MS,
        "--max-delay-ms",
        min=0.0,
        help="The batcher's max queue delay (Triton's default 0).",
    ),
    budget: float = options.budget_option(
        options.duration_text(defaults.SERVE_BUDGET_S),
        f"At most this long for the batch-1 latency windows (at least {MIN_SERVE_BUDGET_S:g} s).",
    ),
    threads: bool = typer.Option(
        True, "--sweep-threads/--no-sweep-threads", help="Also sweep intra-op threads (CPU only)."
    ),
    no_threads: bool = typer.Option(
        False, "--no-threads", hidden=True, help="Deprecated: --no-sweep-threads."
    ),
    instances: bool = typer.Option(
        False,
        "--instances/--no-instances",
        help="Also sweep model instances x intra-op threads (CPU only): 1, 2, 4, ... processes "
        "each with cores/instances threads, serving side by side. Each instance is a process "
        "with its own copy of the model, so it is off unless asked.",
    ),
    variants: str | None = typer.Option(
        None,
        "--variants",
        help="Comma-separated inference variants to compare with the eager model at batch 1, "
        "each first gated on accuracy against fp32 eager: no_grad, inference_mode, eval, "
        "compile, compile_max_autotune, compile_freezing, export, torchscript, int8_dynamic, "
        "bf16_autocast, fp16_autocast, bf16, fp16, channels_last, threads:N.",
    ),
    out: Path | None = options.out_option(),
    force: bool = options.force_option(),
    device: str | None = options.device_option(),
    seed: int = options.seed_option(),
) -> None:
    """Serve MODEL request by request and say how fast requests are answered.

    - Per-request latency at batch size 1: the first call (compilation, lazy set-up) and the
      warm-up apart; windows of 100 requests until the p50 and p99 of the last three agree
      within 10%, and at least 459 requests (MLPerf LoadGen's count for a p99 claim at 99%);
      each percentile with a distribution-free 95% interval.
    - Throughput and p50/p95/p99 versus batch size (and intra-op threads on a CPU; with
      --instances also model instances x threads), the knee marked, stopping once a step
      gains under 5%.
    - The batching simulation's predicted percentiles under Poisson load at 25-90% of the
      capacity the batch curve implies, calibrated on one short real batcher run at 45% (its
      loop overhead, its sleeps' overshoot, its service times after idling).
    - With --sla: the highest arrival rate whose percentile stays under the bound, measured
      open-loop under a dynamic batcher (latency from each request's scheduled arrival), by a
      binary search or a sweep, then confirmed. VALID or INVALID with the reason and the
      closest point (INVALID exits 0: it is a finding).

        torchdoctor serve mlp --sla 'p99<=5ms'
        torchdoctor serve my_model.py:make_model --device cuda
        torchdoctor serve mlp --variants inference_mode,compile,int8_dynamic
        torchdoctor serve cnn --instances      # 1 x 16 threads, 2 x 8, ... 16 x 1

    A variant that does not apply here (bf16 on a device without it) or fails its accuracy
    gate is named with the reason and not timed.
    """
    spec, names = serve_options(
        sla, search, arrivals, variants.split(",") if variants is not None else None, budget
    )
    if no_threads:
        err_console.print("warning: --no-threads is deprecated; use --no-sweep-threads")
        threads = False
    options.check_out(out, force=force)
    from torchdoctor.core.rundir import new_run_dir
    from torchdoctor.serve import load_target

    device = options.default_device(device)
    target = load_target(model, device=device)  # a failing factory or model stops here
    # Progress on stderr (a live view on a terminal), so that --json's stdout holds the one
    # document.
    with stage_progress(
        f"serve {model}",
        _plan_lines(device, max_batch, budget, threads, spec, search, names),
        prefix=f"serve {model}: ",
        ticking=False,  # the requests are timed in this process
    ) as progress:
        result, run_dir = serve_into(
            lambda: new_run_dir("serve", model, out=out),
            target,
            spec=spec,
            variants=names,
            search=search,
            arrivals=arrivals,
            max_batch=max_batch,
            max_delay_ms=max_delay_ms,
            budget_s=budget,
            sweep_threads=threads,
            instances=instances,
            seed=seed,
            progress=progress,
        )

    def render(console: Console) -> None:
        from torchdoctor.report import render_sections

        render_sections(console, run_dir, only=("serving",))

    emit(result, render)
    write_run_reports(run_dir)


def _plan_lines(
    device: str,
    max_batch: int,
    budget: float,
    threads: bool,
    sla: SlaSpec | None,
    search: str,
    variants: list[str],
) -> list[str]:
    """What the live view shows of the plan before the first stage."""
    curves = f"throughput and latency up to batch {max_batch}"
    if threads and device == "cpu":
        curves += ", then by intra-op threads"
    lines = [f"on {device}: latency at batch 1 (at most {budget:g} s of windows), then {curves}"]
    if sla is not None:
        lines.append(f"the highest rate that meets {sla.text} ({search} search), confirmed")
    if variants:
        lines.append(f"variants against eager, each gated on accuracy: {', '.join(variants)}")
    return lines
