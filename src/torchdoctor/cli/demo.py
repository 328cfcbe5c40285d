"""`torchdoctor demo`: diagnose and tune a built-in workload, end to end (the cnn on a CPU,
GPT-2 small on a GPU): the plan is the tune stage's (tune/demo.py), the study `torchdoctor.demo`
runs; this command adds the live view, the notes on stderr and the report.
"""

from __future__ import annotations

from pathlib import Path

import typer

from torchdoctor.api import workload_options
from torchdoctor.cli import options
from torchdoctor.cli.main import app
from torchdoctor.cli.state import err_console, settings
from torchdoctor.cli.tune import diagnose_into_run_dir, finish_with_report, run_with_progress
from torchdoctor.core.rundir import display_path
from torchdoctor.tune import DEFAULT_DEMO_BUDGET, QUICK_KNOBS, demo_config, demo_story


@app.command("demo")
def demo_command(
    budget: float | None = options.budget_option(
        None,
        f"Tuning budget (default {DEFAULT_DEMO_BUDGET}; with --quick, sized for the device).",
    ),
    quick: bool = typer.Option(
        False,
        "--quick",
        help=f"The whole story in about two minutes: {QUICK_KNOBS} knobs, shorter A/Bs, no "
        "batch search; wider intervals, said in the output and the report.",
    ),
    out: Path = options.out_option(),
    force: bool = options.force_option(),
    device: str | None = options.device_option(),
    params: list[str] = options.param_option(),
) -> None:
    """Diagnose and tune a built-in workload (the cnn; GPT-2 small on a GPU); write the run
    folder and print its path."""
    options.check_out(out, force=force)
    device = options.default_device(device)
    workload, _, story = demo_story(device)
    workload_params = options.parse_workload_params(params)
    if workload_params:  # a bad parameter is one line before the run folder exists
        from torchdoctor.workloads import get_workload

        get_workload(workload, **workload_params)
    if story and not settings.json:
        err_console.print(story[0], highlight=False, soft_wrap=True)
    run_dir, prescribed = diagnose_into_run_dir(
        workload, out, device=device, params=workload_params
    )
    config = demo_config(
        run_dir,
        prescribed,
        device=device,
        budget_s=budget,
        quick=quick,
        factory_options=workload_options(workload_params),
    )
    if quick and not settings.json:
        err_console.print(config.notes[-1], highlight=False, soft_wrap=True)
    result = run_with_progress(config=config, out=run_dir)
    finish_with_report(result)
    if not settings.json:
        err_console.print(f"demo run folder: {display_path(Path(result.run_dir))}")
