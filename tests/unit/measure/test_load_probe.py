"""The load probe's arithmetic, read through the real probe from a modelled machine."""

from __future__ import annotations

import pytest

from load_fakes import FakeMachine, reading
from torchdoctor.core.load import DISTURBED_OTHER_CORES, MIN_WINDOW_S, combine
from torchdoctor.measure import load as load_mod
from torchdoctor.measure.load import watch_load


def _window(machine: FakeMachine, seconds: float) -> load_mod.MachineLoad:
    with watch_load(machine.probe()) as watch:
        machine.advance(seconds)
    assert watch.reading is not None
    return watch.reading


def test_own_work_is_not_other_load() -> None:
    # This process tree keeps both cores busy: the machine is busy, but with our own work.
    r = _window(FakeMachine(cores=2, own_cores=2.0, other_cores=0.0), 2.0)
    assert r.own_cpu_s == pytest.approx(4.0) and r.other_cores == pytest.approx(0.0)
    assert not r.disturbed and r.warning is None


def test_other_processes_past_the_threshold_disturb() -> None:
    r = _window(FakeMachine(cores=2, own_cores=1.0, other_cores=1.0), 2.0)
    assert r.other_cores == pytest.approx(1.0) and r.disturbed
    assert r.warning is not None and "1.00 of 2 CPU cores" in r.warning
    assert "load average 2.00" in r.warning
    below = _window(FakeMachine(other_cores=0.9 * DISTURBED_OTHER_CORES), 2.0)
    assert not below.disturbed


def test_a_window_too_short_to_read_is_not_judged() -> None:
    r = _window(FakeMachine(other_cores=2.0), 0.5 * MIN_WINDOW_S)
    assert not r.disturbed


def test_another_process_on_the_gpu_disturbs() -> None:
    r = _window(FakeMachine(gpu_pids=[4242]), 1.0)
    assert r.disturbed and r.gpu_other_pids == [4242]
    assert r.warning is not None and "on the GPU (pid 4242)" in r.warning


def test_combined_rounds_say_how_many_were_disturbed() -> None:
    total = combine([reading(False), reading(True), reading(False)])
    assert total is not None and total.disturbed
    assert (total.disturbed_windows, total.windows) == (1, 3)
    assert total.warning is not None and "1 of 3 measured rounds" in total.warning
    quiet = combine([reading(False)] * 3)
    assert quiet is not None and not quiet.disturbed


def test_real_probe_reads_this_machine() -> None:
    # The real sources answer (numbers depend on the host, so only their shape is checked).
    r = _window_real()
    assert r.cores >= 1 and r.interval_s > 0 and r.own_cpu_s >= 0 and r.other_cpu_s >= 0


def _window_real() -> load_mod.MachineLoad:
    with watch_load(load_mod.PsutilLoadProbe()) as watch:
        sum(range(100_000))
    assert watch.reading is not None
    return watch.reading
