"""Rich rendering of a `ScriptRun` (terminal output of `torchdoctor run --recipe R -- ...`)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from torchdoctor.collect import ScriptRun
from torchdoctor.report.format import rate, seconds, value_text


def render_script_run(console: Console, run: ScriptRun) -> None:
    recipe = " ".join(f"{k}={value_text(v)}" for k, v in run.recipe.items()) or "no knobs"
    target = " ".join(run.argv)
    summary = Table(title=escape(f"{target}: {recipe}"), show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    summary.add_row("steps seen", f"{run.steps} ({run.steady_steps} after warm-up)")
    summary.add_row("step time median (steady state)", seconds(run.step_s_median))
    summary.add_row("throughput (steady state)", rate(run.samples_per_s))
    summary.add_row(
        "ended", run.ended_by + (f", exit code {run.exit_code}" if run.exit_code else "")
    )
    console.print(summary)
    injection = run.injection
    if injection is None:
        console.print("[yellow]no record of the injected knobs was written[/]")
        return
    knobs = Table(title="knobs", show_lines=False)
    knobs.add_column("knob")
    knobs.add_column("value")
    knobs.add_column("status")
    knobs.add_column("where / why")
    for k in injection.knobs:
        colour = {"applied": "green", "not_applied": "yellow"}.get(k.status, "dim")
        if k.status == "applied":
            more = k.applied_count - len(k.applied_at)
            note = "; ".join(k.applied_at) + (f" (+{more} more)" if more > 0 else "")
            if k.reason:
                note += f"; not everywhere: {k.reason}"
        elif k.status == "not_applied":
            note = k.reason or ""
        else:
            note = "asks for no change"
        knobs.add_row(k.knob, value_text(k.value), f"[{colour}]{k.status}[/]", escape(note))
    console.print(knobs)
    if injection.model is not None:
        console.print(f"trained module: {escape(injection.model)} on {injection.device_type}")
    console.print(f"run folder: {escape(run.run_dir)}", soft_wrap=True)
