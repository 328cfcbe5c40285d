"""The verdict section on a terminal: a `Diagnosis` (what `torchdoctor diagnose` prints), with
the findings section printed within it (report/sections/diagnosis.py names these forms)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from torchdoctor.core.rundir import display_path
from torchdoctor.diagnose import Diagnosis, amdahl_bound

if TYPE_CHECKING:
    from torchdoctor.diagnose import JobDiagnosis

_SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}
_PHASE_STYLE = {
    "data_wait": "red",
    "h2d": "magenta",
    "forward": "green",
    "backward": "blue",
    "optimizer": "yellow",
    "other": "white",
}
_WHY = {
    "data_loading": "the loop waits for its next batch",
    "host_device_transfer": "copies to the device hold the step",
    "host_sync": "the host stops at sync points every step",
    "framework_overhead": "per-op dispatch and launch cost dominates the math",
    "compute": "the model's arithmetic dominates the step",
    "memory_bandwidth": "operators wait on memory traffic",
    "optimizer": "the optimizer step dominates",
    "communication": "gradient communication is not hidden behind compute",
    "other_host": "Python between the training phases dominates",
}
BAR_WIDTH = 50


def _phase_bar(d: Diagnosis) -> str:
    parts = []
    for phase, frac in d.phase_fractions.items():
        n = round(frac * BAR_WIDTH)
        if n:
            parts.append(f"[{_PHASE_STYLE[phase]}]{'█' * n}[/]")
    legend = "  ".join(
        f"[{_PHASE_STYLE[p]}]■[/] {p} {f:.0%}" for p, f in d.phase_fractions.items() if f >= 0.005
    )
    return "".join(parts) + "\n" + legend


def render_diagnosis(d: Diagnosis, out: Console) -> None:
    """The verdict section's terminal form: the primary bottleneck and what it is worth, the
    findings, the phases and every note."""
    head = f"rank {d.rank}: " if d.rank is not None and (d.world_size or 0) > 1 else ""
    if d.rank is None and (d.world_size or 0) > 1:
        head = f"job of {d.world_size} ranks: "
    # The bound on fixing the primary bottleneck: its best finding's, else the share's limit.
    own = [f for f in d.findings if f.bottleneck == d.primary_bottleneck]
    gain = own[0].amdahl_bound if own else amdahl_bound(d.primary_share)
    bound = f"; fixing it is worth at most {gain:.2f}x" if d.primary_share < 1 else ""
    out.print(
        f"[bold]{head}Primary bottleneck: [magenta]{d.primary_bottleneck}[/][/] "
        f"({d.primary_share:.0%} of step time) — {_WHY[d.primary_bottleneck]}{bound}."
    )
    step = (
        f"{d.median_step_s * 1e3:.1f} ms median, {d.p95_step_s * 1e3:.1f} ms p95"
        if (d.median_step_s is not None and d.p95_step_s is not None)
        else "no step times"
    )
    out.print(
        f"[dim]{d.step_count} steps ({step}); regime: {d.regime}-bound; device {d.device}"
        f"{' (' + d.device_name + ')' if d.device_name else ''}[/]"
    )
    render_findings(out, d)
    if d.phase_fractions:
        out.print("Step breakdown:\n" + _phase_bar(d))
    for note in d.notes:
        if note.startswith("warning: "):
            out.print(f"[yellow]warning:[/] {escape(note.removeprefix('warning: '))}")
        else:
            out.print(f"[dim]note: {escape(note)}[/]")


def render_run_folder(out: Console, run_dir: Path) -> None:
    """The last line a diagnosis prints: where its run folder is."""
    out.print(f"Run folder: [bold]{display_path(run_dir)}[/]")


def render_findings(out: Console, d: Diagnosis) -> None:
    """The findings section's terminal form: the findings table, largest bound first."""
    if d.findings:
        table = Table(title="Findings, largest bound on gain first", title_justify="left")
        for col in ("severity", "rule", "what was seen", "prescription", "bound"):
            table.add_column(col, overflow="fold")
        for f in d.findings:
            knobs = ", ".join(f"{k}={v}" for k, v in f.prescription.knobs.items())
            table.add_row(
                f"[{_SEVERITY_STYLE[f.severity]}]{f.severity}[/]",
                f.rule_id,
                escape(f.summary),
                escape((knobs + ": " if knobs else "") + f.prescription.code_change),
                f"≤{f.amdahl_bound:.2f}x",
            )
        out.print(table)
    else:
        out.print("[green]No findings: nothing here is worth changing.[/]")


def diagnosis_view(diagnosis: dict[str, Any] | None) -> Diagnosis | None:
    """The verdict's and the findings' terminal view: diagnosis.json as its record."""
    return Diagnosis.from_json_dict(diagnosis) if diagnosis else None


def render_job(job: JobDiagnosis, out: Console, run_dir: Path | None = None) -> None:
    """A distributed job: its ranks side by side, then the job's diagnosis (the ranks first,
    as who holds the job back is what its diagnosis is about)."""
    from torchdoctor.report.terminal.sections import render_records

    if job.cross_rank is not None:
        render_records(out, {"cross_rank": job.cross_rank})
    render_records(out, {"diagnosis": job.job})
    if run_dir is not None:
        render_run_folder(out, run_dir)
