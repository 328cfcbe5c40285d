"""Rules that point at a Python line: host_python_lines, and the line in dataloader_wait's
and host_sync's findings."""

from __future__ import annotations

import pytest
from diagnose_builders import evidence, phases

from torchdoctor.core.hostlines import HostLine, HostLineProfile
from torchdoctor.diagnose import diagnose_evidence
from torchdoctor.diagnose.evidence import DataLoaderEvidence, SyncEvidence
from torchdoctor.diagnose.rules import dataloader_wait, host_python_lines, host_sync


def line(n: int, share: float, function: str = "f", **phases: float) -> HostLine:
    return HostLine(
        file="train.py",
        line=n,
        function=function,
        share=share,
        seconds_per_step=share * 0.01,
        phases=phases or {"other": 1.0},
        callers=["train.py:90 in main"],
    )


def profile(*lines: HostLine) -> HostLineProfile:
    return HostLineProfile(
        sampler="test", interval_s=0.005, samples=400, steps=40, sampled_s=0.4, lines=list(lines)
    )


def test_fires_on_the_line_with_most_time_outside_the_phases() -> None:
    # Line 12 holds more time, but in the forward: the fix for `other` is at line 30.
    lines = profile(line(12, 0.5, "main", forward=1.0), line(30, 0.4, "tokenize"), line(31, 0.05))
    f = host_python_lines.check(evidence(steps=phases(other=0.45), host_lines=lines))
    assert f is not None and f.bottleneck == "other_host"
    assert f.evidence["top_line"] == "train.py:30" and f.prescription.site == "train.py:30"
    assert f.evidence["top_line_called_from"] == "train.py:90 in main"
    assert f.evidence["line_2"] == "train.py:31 (5%)"
    assert f.share == 0.4 and f.severity == "high"


def test_silent_without_lines_or_below_the_floor() -> None:
    assert host_python_lines.check(evidence(steps=phases(other=0.5))) is None
    small = profile(line(3, 0.02), line(4, 0.9, forward=1.0))
    assert host_python_lines.check(evidence(host_lines=small)) is None


def test_the_diagnosis_names_other_host_with_the_line() -> None:
    d = diagnose_evidence(
        evidence(steps=phases(other=0.7), host_lines=profile(line(30, 0.65, "tokenize")))
    )
    assert d.primary_bottleneck == "other_host"
    assert d.findings[0].rule_id == "host_python_lines"


def test_dataloader_wait_names_the_line_the_wait_is_spent_at() -> None:
    lines = profile(line(8, 0.3, "__getitem__", data_wait=0.9, other=0.1), line(30, 0.5))
    ev = evidence(
        steps=phases(data_wait=0.3),
        dataloader=DataLoaderEvidence(uses_dataloader=True, num_workers=0),
        host_lines=lines,
    )
    f = dataloader_wait.check(ev)
    assert f is not None and f.evidence["top_line"] == "train.py:8"
    assert f.evidence["top_line_function"] == "__getitem__"
    assert f.prescription.site == "train.py:8" and "train.py:8" in f.prescription.code_change
    no_lines = dataloader_wait.check(ev.model_copy(update={"host_lines": None}))
    assert no_lines is not None and "top_line" not in no_lines.evidence


def test_host_sync_hands_back_the_site_and_an_accumulate_snippet() -> None:
    syncs = SyncEvidence(per_step={"item": 3.0}, sites={"train.py:44": 90, "a.py:1": 3})
    f = host_sync.check(
        evidence(steps=phases(other=0.3), syncs=syncs.model_copy(update={"time_share": 0.2}))
    )
    assert f is not None and f.prescription.site == "train.py:44"
    assert f.prescription.snippet is not None and "loss.detach()" in f.prescription.snippet


def test_framework_overhead_points_at_the_line_issuing_the_ops() -> None:
    from torchdoctor.diagnose.evidence import BatchScalingEvidence
    from torchdoctor.diagnose.rules import framework_overhead

    lines = profile(line(33, 0.5, "main", backward=1.0), line(22, 0.3, "forward", forward=1.0))
    ev = evidence(
        steps=phases(forward=0.4, backward=0.5),
        batch_scaling=BatchScalingEvidence(points={2: 0.010, 8: 0.011}),
        host_lines=lines,
    )
    f = framework_overhead.check(ev)
    assert f is not None and f.prescription.site == "train.py:22"  # not backward's line
    assert f.prescription.snippet is not None and "torch.bmm" in f.prescription.snippet
    bare = framework_overhead.check(ev.model_copy(update={"host_lines": None}))
    assert bare is not None and bare.prescription.site is None


def test_a_workload_samples_about_a_second_of_its_steps() -> None:
    from types import SimpleNamespace

    from torchdoctor.diagnose.workload_profile import LINE_SAMPLE_S, MIN_LINE_STEPS, line_steps

    def run(median: float) -> object:
        return SimpleNamespace(step_time=SimpleNamespace(median=median))

    assert line_steps(run(LINE_SAMPLE_S / 10), 40) == 10  # type: ignore[arg-type]
    assert line_steps(run(LINE_SAMPLE_S / 100), 40) == 40  # type: ignore[arg-type]
    assert line_steps(run(LINE_SAMPLE_S * 5), 40) == MIN_LINE_STEPS  # type: ignore[arg-type]


def test_a_line_that_syncs_is_left_to_host_sync_and_the_share_is_capped() -> None:
    lines = profile(line(44, 0.5, "log"), line(30, 0.2, "tokenize"))
    syncs = SyncEvidence(
        per_step={"print": 1.0}, sites={"train.py:44": 40}, outside_phases_share=0.45
    )
    f = host_python_lines.check(evidence(steps=phases(other=0.6), syncs=syncs, host_lines=lines))
    assert f is not None and f.evidence["top_line"] == "train.py:30"
    assert f.share == pytest.approx(0.6 - 0.45)


def test_too_few_samples_are_shown_but_not_acted_on() -> None:
    few = profile(line(30, 0.7, "tokenize")).model_copy(update={"samples": 3})
    assert not few.enough
    assert host_python_lines.check(evidence(steps=phases(other=0.7), host_lines=few)) is None
