"""`torchdoctor serve MODEL`: latency as requests see it, curves, batching, and an SLA search."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import typer
from rich.console import Console

from torchdoctor.cli.live import stage_progress
from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    budget_option,
    check_out,
    default_device,
    device_option,
    force_option,
    out_option,
    seed_option,
)
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import emit, err_console
from torchdoctor.core.errors import UsageError

if TYPE_CHECKING:
    from torchdoctor.serve import InferenceTarget, Request, SlaSpec, VariantSetup

SEARCHES: Final = ("binary", "sweep")
ARRIVALS: Final = ("poisson", "gamma", "constant")
#: The shortest --budget for the latency windows: a window of 100 requests needs some time
#: even for a fast model, and the percentiles need several windows.
MIN_BUDGET_S: Final = 0.5


def _choice(value: str, allowed: tuple[str, ...], option: str) -> str:
    if value not in allowed:
        raise UsageError(f"{option} {value!r} is not one of {', '.join(allowed)}")
    return value


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
        "binary", "--search", help="How the SLA search walks the rates: binary or sweep."
    ),
    arrivals: str = typer.Option(
        "poisson",
        "--arrivals",
        help="Arrival process of the open-loop load: poisson, gamma, constant.",
    ),
    max_batch: int = typer.Option(64, "--max-batch", min=1, help="Largest batch the curve tries."),
    max_delay_ms: float = typer.Option(
        0.0, "--max-delay-ms", min=0.0, help="The batcher's max queue delay (Triton's default 0)."
    ),
    budget: float = budget_option(
        "10s", f"At most this long for the batch-1 latency windows (at least {MIN_BUDGET_S:g} s)."
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
    out: Path | None = out_option(),
    force: bool = force_option(),
    device: str | None = device_option(),
    seed: int = seed_option(),
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
    from torchdoctor.serve import parse_sla

    if budget < MIN_BUDGET_S:
        raise UsageError(f"--budget {budget:g}s is under {MIN_BUDGET_S:g} s", hint="e.g. 10s")
    if no_threads:
        err_console.print("warning: --no-threads is deprecated; use --no-sweep-threads")
        threads = False
    check_out(out, force=force)
    spec = parse_sla(sla) if sla is not None else None
    _choice(search, SEARCHES, "--search")
    _choice(arrivals, ARRIVALS, "--arrivals")
    names = _variant_names(variants)
    from torchdoctor.core.rundir import SERVE, finish_run_dir, new_run_dir
    from torchdoctor.measure import watch_load
    from torchdoctor.serve import ServePlan, load_target, serve_target

    device = default_device(device)
    target = load_target(model, device=device)  # a failing factory or model stops here
    # Progress on stderr (a live view on a terminal), so that --json's stdout holds the one
    # document.
    with stage_progress(
        f"serve {model}",
        _plan_lines(device, max_batch, budget, threads, spec, search, names),
        prefix=f"serve {model}: ",
        ticking=False,  # the requests are timed in this process
    ) as progress:
        calls, setups, variant_notes = _prepare_variants(names, target, progress)
        plan = ServePlan(
            max_batch_size=max_batch,
            latency_budget_s=budget,
            threads=threads,
            instances=instances,
            sla=spec,
            search=search,  # type: ignore[arg-type]  # checked by _choice
            arrivals=arrivals,  # type: ignore[arg-type]
            max_queue_delay_s=max_delay_ms / 1e3,
            seed=seed,
            variants=calls,
        )
        run_dir = new_run_dir("serve", model, out=out)
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

    def render(console: Console) -> None:
        from torchdoctor.report import render_sections

        render_sections(console, run_dir, only=("serving",))

    emit(result, render)
    write_run_reports(run_dir)


def _variant_names(text: str | None) -> list[str]:
    """The --variants list, each name checked before anything is built (exit 2 if unknown)."""
    from torchdoctor.serve import variant_spec

    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if len(set(names)) != len(names):
        raise UsageError(f"--variants names a variant twice: {text}")
    for name in names:
        variant_spec(name)
    return names


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


def _prepare_variants(
    names: list[str], target: InferenceTarget, progress: Callable[[str], None]
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
