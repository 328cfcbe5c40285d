"""Constant tensors moved to the device inside the loop, seen by the copy probe (on the meta
device: a device change on a CPU-only machine) and prescribed by constant_to_device."""

from __future__ import annotations

from pathlib import Path

import torch

from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.probes.data import CopyProbe
from torchdoctor.collect.probes.syncs import SyncProbe
from torchdoctor.collect.step_recorder import StepRecorder
from torchdoctor.core.copies import CopyCounts
from torchdoctor.diagnose.evidence import Evidence, StepEvidence
from torchdoctor.diagnose.rules import constant_to_device


def constant_line() -> str:
    text = Path(__file__).read_text().splitlines()
    number = next(i for i, t in enumerate(text, start=1) if t.endswith("# THE CONSTANT"))
    return f"{__file__}:{number}"


def run_steps(steps: int) -> CopyCounts:
    recorder = StepRecorder()
    probe = CopyProbe(recorder, SyncProbe(recorder), on_device=lambda _d: None)
    site = ProbeSite()
    probe.install(site)
    table = torch.ones(16, 4)  # built once
    buffer = torch.zeros(8)  # refilled in place every step: new data each time
    try:
        for i in range(steps):
            torch.randn(8, 4).to("meta")  # a new batch tensor every step
            buffer.fill_(i)
            buffer.to("meta")
            table.to("meta")  # THE CONSTANT
            recorder.begin("forward")
            recorder.end("forward")
            recorder.optimizer_step_end()
    finally:
        site.remove()
    return probe.counts.record(probe.constants)


def test_the_same_unchanged_tensor_copied_each_step_is_a_constant() -> None:
    h2d = run_steps(5)
    assert h2d.calls == 5 * 3
    assert h2d.constant_sources == 1 and h2d.constant_copies == 5
    assert h2d.constant_bytes == 5 * 16 * 4 * 4
    assert h2d.constant_sites == {constant_line(): 5}


def test_two_steps_are_not_yet_a_constant() -> None:
    assert run_steps(2).constant_sources == 0


def evidence(h2d: CopyCounts | None, h2d_share: float = 0.4) -> Evidence:
    steps = StepEvidence(count=5, measured=4, phase_fractions={"h2d": h2d_share})
    return Evidence(source="script", steps=steps, copies=h2d)


def test_rule_points_at_the_line_with_the_constants_share_of_copy_time() -> None:
    h2d = run_steps(5)
    f = constant_to_device.check(evidence(h2d))
    assert f is not None and f.bottleneck == "host_device_transfer"
    assert f.prescription.site == constant_line() and f.prescription.snippet is not None
    assert f.evidence["constant_copies_per_step"] == 1.0
    assert abs(f.share - 0.4 * h2d.constant_bytes / h2d.bytes) < 1e-9


def test_rule_is_silent_without_constants() -> None:
    assert constant_to_device.check(evidence(CopyCounts(calls=10, bytes=100))) is None
    assert constant_to_device.check(evidence(None)) is None
