"""The live terminal of `scale` and `serve`: the plan first, then a row for each stage as it
ends and the stage now running; one plain line per stage where no terminal watches. Driven by
fake stage events and fake runners: no job runs, no model is served."""

from __future__ import annotations

import importlib
import io
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console
from rich.live import Live

import torchdoctor.cli.live as live_cli
from torchdoctor.cli.main import main
from torchdoctor.core.errors import ScaleError
from torchdoctor.report.terminal.live_stages import StageWatch

STAGES = ["N=1: training 30 steps", "N=2: collective microbenchmark, then training 30 steps"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_plan_comes_first_and_each_stage_row_as_the_stage_ends() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    clock = FakeClock()
    watch = StageWatch(title="scale mlp", plan=["world sizes N=1, N=2"], expected=2, clock=clock)
    seen: list[str] = []
    with Live(watch, console=console, auto_refresh=False) as live:
        live.refresh()
        seen.append(out.getvalue())
        for what in STAGES:
            watch.begin(what)
            clock.now += 12.0
            live.refresh()
            seen.append(out.getvalue())
        ended = watch.finish()
        live.refresh()
        seen.append(out.getvalue())
    assert "scale mlp" in seen[0] and "world sizes N=1, N=2" in seen[0]
    assert "Done so far" not in seen[0]  # nothing has ended yet
    # While the first stage runs: it is the current one, with its time so far, and no row.
    assert "now: N=1: training 30 steps (12 s) | 0 of 2 done, 12 s so far" in seen[1]
    assert "Done so far" not in seen[1]
    # The second began: the first has its row, with the seconds it took.
    assert "Done so far" in seen[2] and "now: N=2" in seen[2][seen[2].rfind("Done so far") :]
    assert "1 of 2 done" in seen[2]
    assert ended is not None and ended.what == STAGES[1] and ended.seconds == pytest.approx(12.0)
    final = seen[-1][seen[-1].rfind("scale mlp") :]
    assert "2 of 2 done, 24 s so far" in final and "now:" not in final
    assert [row.what for row in watch.rows] == STAGES
    assert final.rfind("world sizes") < final.rfind("Done so far")


def _console(monkeypatch: pytest.MonkeyPatch, *, terminal: bool) -> io.StringIO:
    err = io.StringIO()
    console = Console(file=err, force_terminal=terminal, width=100, color_system=None)
    monkeypatch.setattr(live_cli, "err_console", console)
    monkeypatch.setattr(live_cli, "progress_enabled", lambda: terminal)
    return err


def test_without_a_terminal_each_stage_is_one_plain_line(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _console(monkeypatch, terminal=False)
    with live_cli.stage_progress("serve mlp", ["plan"], prefix="serve mlp: ") as progress:
        progress("latency at batch size 1")
        progress("batch size 2")
    assert err.getvalue().splitlines() == [
        "serve mlp: latency at batch size 1",
        "serve mlp: batch size 2",
    ]
    assert "\x1b[" not in err.getvalue()  # no terminal codes in a log


def test_on_a_terminal_the_view_is_live(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _console(monkeypatch, terminal=True)
    with live_cli.stage_progress("serve mlp", ["on cpu: latency at batch 1"]) as progress:
        progress("latency at batch size 1")
        assert "now: latency at batch size 1" in err.getvalue()
        progress("batch size 2")
    text = err.getvalue()
    assert "on cpu: latency at batch 1" in text and "Done so far" in text
    assert "latency at batch size 1" in text[text.rfind("Done so far") :]
    assert "\x1b[" in text  # drawn in place, not line by line


def _failing_runner(stages: list[str]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        progress = kwargs.get("progress") or args[-1]
        for what in stages:
            progress(what)
        raise ScaleError("stopped by the test after its stages")

    return run


def test_scale_reports_each_world_as_a_stage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # By its full name: `torchdoctor.scale` on the package is the API's function.
    scale = importlib.import_module("torchdoctor.scale")

    err = _console(monkeypatch, terminal=False)
    monkeypatch.setattr(scale, "run_worlds", _failing_runner(STAGES))
    assert main(["scale", "mlp", "--nproc", "1,2", "--backend", "gloo"]) == 2
    assert err.getvalue().splitlines()[-2:] == STAGES
    assert capsys.readouterr().out == ""


def test_serve_reports_its_stages(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    serve = importlib.import_module("torchdoctor.serve")

    err = _console(monkeypatch, terminal=False)
    monkeypatch.setattr(serve, "serve_target", _failing_runner(["latency at batch size 1"]))
    assert main(["serve", "mlp"]) == 2
    assert "serve mlp: latency at batch size 1" in err.getvalue().splitlines()
    assert capsys.readouterr().out == ""


def test_serve_redraws_only_as_its_stages_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve times requests in this process: no refresh thread may take the GIL meanwhile."""
    import threading

    _console(monkeypatch, terminal=True)
    before = {t.name for t in threading.enumerate()}
    with live_cli.stage_progress("serve mlp", [], ticking=False) as progress:
        progress("latency at batch size 1")
        assert {t.name for t in threading.enumerate()} == before
    with live_cli.stage_progress("scale mlp", []) as progress:
        progress("N=1: training 30 steps")
        assert {t.name for t in threading.enumerate()} != before  # rich's refresh thread
