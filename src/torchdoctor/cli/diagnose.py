"""`torchdoctor diagnose`: name the bottleneck of a script, a workload or a trace.

torchdoctor diagnose [--steps N] [--warmup K] [--profile-steps M] [--out DIR] -- python train.py ...
torchdoctor diagnose WORKLOAD [--set knob=value ...]
torchdoctor diagnose TRACE.json[.gz] | TRACE_FOLDER
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from torchdoctor.cli.main import app
from torchdoctor.cli.options import DEVICE_HELP, default_device
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import emit, err_console
from torchdoctor.core.errors import DiagnoseError, ScriptExit, UsageError
from torchdoctor.core.rundir import display_path
from torchdoctor.diagnose.diagnosis import Diagnosis
from torchdoctor.diagnose.findings import amdahl_bound

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


#: Endings of the trace files `diagnose` reads (Kineto JSON, optionally gzipped).
TRACE_ENDINGS: Final = (".json", ".json.gz", ".gz")


def _looks_like_a_path(target: str) -> bool:
    """A target that names a file (a trace ending, or a folder separator), not a workload."""
    if ":" in target:  # path/to/file.py:factory is a user workload
        return False
    return target.endswith(TRACE_ENDINGS) or "/" in target or os.sep in target


def _split_command(args: list[str]) -> tuple[list[str], bool]:
    """`python train.py a b` / `python -m pkg.mod a` / `train.py a` -> (argv, module)."""
    if not args:
        raise UsageError("no command after --", hint="e.g. torchdoctor diagnose -- python train.py")
    rest = list(args)
    if Path(rest[0]).name.startswith("python"):
        rest = rest[1:]
    if rest and rest[0] == "-m":
        if len(rest) < 2:
            raise UsageError("-m needs a module name", hint="e.g. -- python -m pkg.train")
        return rest[1:], True
    if not rest:
        raise UsageError("no script after python", hint="e.g. -- python train.py")
    if Path(rest[0]).name in ("torchrun",) or rest[0].endswith("torch.distributed.run"):
        return ["torch.distributed.run", *rest[1:]], True  # one diagnosis per rank
    return rest, False


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


def render_diagnosis(d: Diagnosis, out: Console, run_dir: Path | None = None) -> None:
    head = f"rank {d.rank}: " if d.rank is not None and (d.world_size or 0) > 1 else ""
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
    if d.phase_fractions:
        out.print("Step breakdown:\n" + _phase_bar(d))
    for note in d.notes:
        if note.startswith("warning: "):
            out.print(f"[yellow]warning:[/] {escape(note.removeprefix('warning: '))}")
        else:
            out.print(f"[dim]note: {escape(note)}[/]")
    if run_dir is not None:
        out.print(f"Run folder: [bold]{display_path(run_dir)}[/]")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": False},
    help="Name the bottleneck of a script (-- python train.py ...), a workload, or a trace.",
)
def diagnose(
    ctx: typer.Context,
    target: str | None = typer.Argument(None, help="WORKLOAD name, or a TRACE file/folder."),
    steps: int | None = typer.Option(None, "--steps", help="End the script after N steps."),
    warmup: int = typer.Option(5, "--warmup", help="Steps before the profiled window."),
    profile_steps: int = typer.Option(5, "--profile-steps", help="Steps to profile."),
    out: Path | None = typer.Option(None, "--out", help="Run folder to write."),
    set_: list[str] = typer.Option([], "--set", help="knob=value for a workload (repeatable)."),
    device: str | None = typer.Option(
        None, "--device", help=f"For a workload: {DEVICE_HELP} A script picks its own."
    ),
) -> None:
    from torchdoctor.diagnose import runs

    # Everything after `--` is positional to click: its first word lands in `target`.
    command = [target, *ctx.args] if target is not None and ctx.args else list(ctx.args)
    if target is not None and not ctx.args and target.endswith(".py"):
        command = [target]  # `torchdoctor diagnose -- train.py`: a script without arguments
    if command:
        argv, module = _split_command(command)
        exam = runs.examine_script(
            argv, module=module, steps=steps, warmup=warmup, profile_steps=profile_steps, out=out
        )
    elif target is None:
        raise UsageError("nothing to diagnose", hint="torchdoctor diagnose -- python train.py")
    elif Path(target).exists() and not target.endswith(".py"):
        exam = runs.examine_trace(Path(target), out=out)
    elif _looks_like_a_path(target):
        raise UsageError(
            f"no such trace file or folder: {target}",
            hint="give an existing trace (.json, .json.gz or a folder of them), a workload "
            "name (see `torchdoctor workloads`), or a script after `--`",
        )
    else:
        settings: dict[str, str] = {}
        for item in set_:
            key, sep, value = item.partition("=")
            if not sep:
                raise UsageError(f"cannot read --set {item!r}", hint="write it as knob=value")
            settings[key.strip()] = value.strip()
        exam = runs.examine_workload(
            target,
            settings,
            steps=steps or 20,
            warmup=warmup,
            profile_steps=profile_steps,
            out=out,
            device=default_device(device),
        )
    for i, d in enumerate(exam.diagnoses):
        last = i == len(exam.diagnoses) - 1

        def render(c: Console, d: Diagnosis = d, last: bool = last) -> None:
            render_diagnosis(d, c, exam.run_dir if last else None)

        emit(d, render)
    if exam.diagnoses:
        write_run_reports(exam.run_dir)
    else:
        err_console.print(f"whatever was measured is in {display_path(exam.run_dir)}")
    code = exam.exit_code
    if code not in (None, 0):
        raise ScriptExit(exam.error or f"the script exited with code {code}", exit_code=int(code))
    if exam.error:
        where = display_path(exam.run_dir)
        raise DiagnoseError(exam.error, hint=f"what was measured is in {where}")
