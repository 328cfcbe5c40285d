"""Kineto's informational C++ log lines are filtered out of fd 2; everything else stays."""

from __future__ import annotations

import os

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from torchdoctor.collect.quiet import kineto_quiet, quiet_profiling

USDT = b"USDT:2026-11-22 00:56:53 1342:1342 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
STAGE = b"STAGE:2026-11-22 00:57:02 1428:1428 SyncActivityProfilerHandler.cpp:51] Completed\n"
ERROR = b"ERROR:2026-11-22 00:56:45 1243:1285 IpcFabricConfigClient.cpp:178] Failed to send\n"


def test_informational_lines_go_and_the_rest_stays_in_order(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with kineto_quiet():
        os.write(2, USDT)
        os.write(2, b"a warning of the user's own\n")
        os.write(2, STAGE)
        os.write(2, ERROR)
    err = capfd.readouterr().err
    assert err == "a warning of the user's own\n" + ERROR.decode()


def test_a_real_profiler_start_and_stop_print_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    prof = profile(activities=[ProfilerActivity.CPU])
    with quiet_profiling(prof):
        torch.ones(4).sum()
    assert "USDT" not in capfd.readouterr().err
    assert any(e.name == "aten::sum" for e in prof.events())


def test_stderr_still_works_after_the_block(capfd: pytest.CaptureFixture[str]) -> None:
    with kineto_quiet():
        pass
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
