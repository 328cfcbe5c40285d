"""`torchdoctor demo --quick` at a real terminal (a pseudo-terminal): the diagnosis table is on
the screen while the first trial (the baseline) runs, and each trial's ladder row appears in
the live view as that trial is decided, before the study ends and its result is printed.

Two runs of the same checks: the real demo (a study: a diagnosis, a baseline, the report), and
the real CLI with its diagnosis and tuning replaced by sample records
(tests/scripts/demo_fake_tuning.py), which proves the terminal path in the fast tier. Order is
read from the terminal stream itself, which is the order things were drawn; the read times
only label what the failure messages show. The view fed fake events in-process:
tests/unit/report/test_live_tune.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pty_terminal import TerminalRun, run_in_terminal
from torchdoctor.measure import get_ceilings
from torchdoctor.report.terminal.live import row_of
from torchdoctor.tune.records import read_trial

#: The demo's tuning budget in the study. The diagnosis runs before it and is not counted. A
#: study ends as soon as no further trial fits (tune/budget.py holds back about six baseline
#: measurements for the final A/B), so on a 2-core machine this budget measures the baseline
#: and stops, and the run costs the diagnosis, the baseline and the report; a faster machine
#: fits a knob trial in it, whose row the test then checks too. A budget close to the
#: baseline's own time would fail whenever a busy machine slows the baseline (the demo then
#: says its budget is too small).
BUDGET = "60s"
#: Past this, the demo is killed and the test fails: a guard against a hang, not a bound on
#: the demo's time (on a 2-core machine shared with other test runs the diagnosis alone has
#: taken six minutes; benchmarks/bench_demo_quick.py times the demo on an idle one).
TIMEOUT_S = 600.0
FAKE_TUNING = Path(__file__).resolve().parents[1] / "scripts" / "demo_fake_tuning.py"


def _frames(text: str, start: int, end: int) -> list[str]:
    """The live ladder as drawn, frame by frame: from each 'Ladder so far' title to the
    frame's status line ('... ends by HH:MM:SS'), between `start` and `end`."""
    frames = []
    for m in re.finditer("Ladder so far", text[start:end]):
        begin = start + m.start()
        stop = text.find("ends by", begin, end)
        frames.append(text[begin : stop if stop != -1 else end])
    return frames


def _first_frame_with(frames: list[str], number: int, what: str) -> int | None:
    # The start of the row's trial name: a long one folds onto a second line.
    name = re.escape(what.split(" ")[0][:12])
    row = re.compile(rf"^\s*{number}\s+{name}", re.MULTILINE)
    return next((k for k, frame in enumerate(frames) if row.search(frame)), None)


def _shown(run: TerminalRun, what: str, offset: int) -> str:
    when = f" (read at {run.seen_at(offset):.1f} s)" if offset >= 0 else ""
    return f"{what} at {offset}{when}"


def assert_diagnosis_first_and_rows_as_trials_end(run: TerminalRun, out: Path) -> None:
    text = run.text
    assert run.exit_code == 0, text[-3000:]
    diagnosis = text.find("primary bottleneck")
    first_row = text.find("Ladder so far")
    final = text.find("Ladder: cnn")  # the result, printed once the study has ended
    report = text.find("Report:")
    assert 0 <= diagnosis < first_row < final < report, (
        _shown(run, "diagnosis", diagnosis),
        _shown(run, "first row", first_row),
        _shown(run, "result", final),
        _shown(run, "report", report),
    )
    # The diagnosis table, with the ladder's planned order, while the baseline runs.
    before_any_row = text[diagnosis:first_row]
    assert "ladder, in order" in before_any_row and "now: the baseline" in before_any_row

    trials = [read_trial(p) for p in sorted((out / "trials").glob("*.json"))]
    assert trials and trials[0].kind == "baseline"
    frames = _frames(text, first_row, final)
    names = [row_of(t).what for t in trials]
    firsts = [_first_frame_with(frames, i, what) for i, what in enumerate(names)]
    # Every decided trial has its row in the live view, each in a later frame than the one
    # before it: drawn as it was decided, not all at the end.
    assert None not in firsts, (firsts, names, frames[-1])
    assert firsts == sorted(set(firsts)), firsts  # type: ignore[type-var]
    # The live view ends with every row.
    assert _first_frame_with(frames[-1:], len(trials) - 1, names[-1]) == 0, frames[-1]
    # Nothing printed that the demo did not mean to (a traceback, a leaked-semaphore report).
    assert "Traceback" not in text and "resource_tracker" not in text


def test_the_cli_draws_the_diagnosis_first_and_each_row_as_its_trial_ends(
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo"
    argv = [sys.executable, str(FAKE_TUNING), "demo", "--quick", "--out", str(out)]
    run = run_in_terminal(argv, timeout_s=TIMEOUT_S)
    assert_diagnosis_first_and_rows_as_trials_end(run, out)
    assert len(list((out / "trials").glob("*.json"))) == 5  # the sample study's trials


@pytest.mark.study
def test_demo_quick_draws_the_diagnosis_first_and_each_row_as_its_trial_ends(
    tmp_path: Path,
) -> None:
    get_ceilings(device="cpu")  # cached here (the test's brief measurement) for the demo's own
    out = tmp_path / "demo"
    argv = [sys.executable, "-m", "torchdoctor", "demo", "--quick", "--budget", BUDGET]
    run = run_in_terminal([*argv, "--out", str(out)], timeout_s=TIMEOUT_S)
    assert_diagnosis_first_and_rows_as_trials_end(run, out)
