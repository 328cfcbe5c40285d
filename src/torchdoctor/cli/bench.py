"""`torchdoctor bench STMT [--setup S] [--vs STMT2]`: time a statement or compare two."""

from __future__ import annotations

import typer

from torchdoctor.cli.main import app
from torchdoctor.cli.options import budget_option, duration_text
from torchdoctor.cli.state import emit
from torchdoctor.core.defaults import (
    BENCH_BUDGET_S,
    BENCH_CONFIDENCE,
    BENCH_SETUP,
    BENCH_TARGET_REL_CI,
)
from torchdoctor.core.errors import UsageError


def _check_device(device: str) -> None:
    """A device the timer can use, or the user's error (exit 2) before anything runs."""
    from torchdoctor.core.errors import TorchDoctorError
    from torchdoctor.engine import resolve_device

    try:
        resolve_device(device)
    except TorchDoctorError as exc:
        raise UsageError(f"--device {device}: {exc.message}", hint=exc.hint) from None


@app.command("bench")
def bench_command(
    stmt: str = typer.Argument(..., help="Python statement to time, e.g. 'a @ b'."),
    setup: str = typer.Option(BENCH_SETUP, "--setup", "-s", help="Statement run once before."),
    vs: str | None = typer.Option(
        None, "--vs", help="A second statement to compare against STMT (the baseline)."
    ),
    budget: float = budget_option(duration_text(BENCH_BUDGET_S), "Time to spend at most."),
    confidence: float = typer.Option(
        BENCH_CONFIDENCE, "--confidence", help="Confidence level, 0..1."
    ),
    target: float = typer.Option(
        BENCH_TARGET_REL_CI,
        "--target",
        help="Stop once the CI half-width is this fraction of the median.",
    ),
    device: str | None = typer.Option(
        None,
        "--device",
        help="cpu or cuda[:N]: cuda times each block with CUDA events on that device. "
        "Unset: host clock, synchronizing CUDA whenever the statements initialized it.",
    ),
) -> None:
    """Time STMT (warm-up, adaptive repetition, CI of the median), or compare it with --vs."""
    if not 0.0 < confidence < 1.0:
        raise UsageError(f"--confidence {confidence:g} must be between 0 and 1", hint="e.g. 0.95")
    if not target > 0:
        raise UsageError(f"--target {target:g} must be positive", hint="e.g. 0.01 for ±1%")
    if device is not None:
        _check_device(device)
    if vs == stmt:
        raise UsageError("--vs is the same statement as STMT", hint="compare two different ones")
    from torchdoctor.api import time_statements
    from torchdoctor.measure import Measurement
    from torchdoctor.report import render_comparison, render_measurement

    timed = time_statements(
        stmt,
        setup=setup,
        vs=vs,
        budget_s=budget,
        confidence=confidence,
        target_rel_ci=target,
        device=device,
    )

    if isinstance(timed, Measurement):
        emit(timed, lambda console: render_measurement(console, timed))
    else:
        emit(timed, lambda console: render_comparison(console, timed))
