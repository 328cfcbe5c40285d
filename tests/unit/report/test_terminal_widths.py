"""What `tune` and `demo` print reads at 80 and 120 columns: no label and no knob=value is
broken across lines, in the live view or the final ladder."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from report_samples import diagnosis_record, trials, tune_record
from rich.console import Console

from torchdoctor.report.format import WHOLE_WORD_MAX
from torchdoctor.report.terminal.live import TuneWatch, change_text
from torchdoctor.report.terminal.tune import fmt_change, render_result

#: A ladder order as long as the demo's (about 70 characters joined).
PLANNED = [
    "num_workers",
    "compile",
    "channels_last",
    "precision",
    "optimizer_impl",
    "set_to_none",
    "checkpointing",
    "batch_size",
]


def _console(width: int) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, color_system=None, force_terminal=False), out


def _whole(word: str, text: str) -> bool:
    """`word` appears unbroken on one line of `text` (a word longer than the widest a column is
    held open for, as the samples' hostile value, may fold: it must not widen the table)."""
    return len(word) > WHOLE_WORD_MAX or any(word in line for line in text.splitlines())


@pytest.mark.parametrize("width", [80, 120])
def test_the_live_view_keeps_its_labels_whole(width: int) -> None:
    console, out = _console(width)
    watch = TuneWatch(budget_s=480.0, clock=lambda: 0.0, wall=lambda: 0.0)
    watch.diagnosis = diagnosis_record()
    watch.start(PLANNED)
    for trial in trials():
        watch.decided(trial, elapsed_s=10.0)
    console.print(watch)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width
    assert _whole("primary bottleneck:", text)
    for finding in diagnosis_record().findings:
        for word in finding.title.split():
            assert _whole(word, text), (word, text)
    for knob in PLANNED:
        assert _whole(knob, text), (knob, text)
    for trial in trials():
        for word in change_text(trial.change).split():
            assert _whole(word, text), (word, text)


@pytest.mark.parametrize("width", [80, 120])
def test_the_final_ladder_keeps_each_change_whole(width: int, tmp_path: Path) -> None:
    console, out = _console(width)
    result = tune_record(tmp_path)
    # A kept change as long as the demo's (`channels_last=True`, which a real demo's ladder
    # printed as `channels_last=T` / `rue` at 80 columns).
    rungs = list(result.ladder.rungs)
    rungs[-1] = rungs[-1].model_copy(update={"change": {"channels_last": True}})
    result = result.model_copy(update={"ladder": result.ladder.model_copy(update={"rungs": rungs})})
    render_result(result, console)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width
    changes = [r.change for r in result.ladder.rungs] + [r.change for r in result.ladder.rejected]
    for change in changes:
        for word in fmt_change(change).split():
            assert _whole(word, text), (word, text)
