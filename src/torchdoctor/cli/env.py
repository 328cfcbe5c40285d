"""`torchdoctor env`: torchdoctor's version, this machine's fingerprint and measured ceilings."""

from __future__ import annotations

import typer
from rich.console import Console

from torchdoctor.cli.main import app
from torchdoctor.cli.options import DEVICE_HELP, device_option
from torchdoctor.cli.state import emit, err_console, progress_enabled


@app.command("env")
def env_command(
    refresh: bool = typer.Option(False, "--refresh", help="Re-measure the ceilings."),
    device: str | None = device_option(f"Device whose ceilings to show: {DEVICE_HELP}"),
) -> None:
    """Show this machine's fingerprint and measured ceilings (cached; --refresh re-measures)."""
    from torchdoctor.api import env

    def say(step: str) -> None:
        if progress_enabled():
            err_console.print(f"measuring {step} ...", highlight=False)

    version, fp, ceilings = env(refresh=refresh, device=device, progress=say)

    def render(console: Console) -> None:
        from torchdoctor.report import render_records

        console.print(f"torchdoctor {version}", highlight=False)
        render_records(console, {"env": {"fingerprint": fp, "ceilings": ceilings}})

    emit(
        {
            "torchdoctor": version,
            "fingerprint": fp.to_json_dict(),
            "ceilings": ceilings.to_json_dict(),
        },
        render,
    )
