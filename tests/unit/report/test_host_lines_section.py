"""The host-lines section: the top lines of a script's profile or a workload's run, in every
form the registry gives a `Blocks` view."""

from __future__ import annotations

from pathlib import Path

from torchdoctor.core.hostlines import HostLine, HostLineProfile
from torchdoctor.report.adapters.host_lines import host_lines_view
from torchdoctor.report.blocks import blocks_markdown
from torchdoctor.report.load import RunRecords


def lines_json() -> dict[str, object]:
    top = HostLine(
        file="train.py",
        line=23,
        function="tokenize",
        share=0.75,
        seconds_per_step=0.0075,
        phases={"other": 1.0},
        callers=["train.py:43 in main"],
    )
    profile = HostLineProfile(
        sampler="current_frames_thread",
        interval_s=0.005,
        samples=120,
        steps=30,
        sampled_s=0.3,
        phase_shares={"forward": 0.2, "other": 0.8},
        lines=[top],
    )
    return profile.model_dump(mode="json")


def test_a_scripts_top_line_is_shown_with_its_share_and_phase() -> None:
    found = RunRecords(source=Path("."), records={"profile": {"host_lines": lines_json()}})
    view = host_lines_view(found)
    assert view is not None
    assert view.tables[0].rows[0][:3] == ["train.py:23", "tokenize", "75.0%"]
    assert view.tables[0].rows[0][4] == "other (100%)"
    assert view.notes == ["train.py:23 called from train.py:43 in main"]
    text = "\n".join(blocks_markdown(view))
    assert "## Host time by Python line" in text and "train.py:23" in text


def test_a_workloads_run_result_feeds_it_and_nothing_shows_nothing() -> None:
    found = RunRecords(source=Path("."), records={"run_result": {"host_lines": lines_json()}})
    assert host_lines_view(found) is not None
    assert host_lines_view(RunRecords(source=Path("."), records={"profile": {}})) is None


def test_the_sampler_fact_says_when_the_period_grew() -> None:
    slowed = {**lines_json(), "last_interval_s": 0.010}
    found = RunRecords(source=Path("."), records={"profile": {"host_lines": slowed}})
    view = host_lines_view(found)
    assert view is not None
    sampler = next(kv.value for kv in view.facts if kv.label == "sampler")
    assert "every 5" in sampler and "slowing to every 10" in sampler
    steady = RunRecords(source=Path("."), records={"profile": {"host_lines": lines_json()}})
    view = host_lines_view(steady)
    assert view is not None
    assert "slowing" not in next(kv.value for kv in view.facts if kv.label == "sampler")
