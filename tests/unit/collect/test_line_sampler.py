"""The line sampler on fake frames and fake steps: which frames are the user's, how samples
fold and aggregate by phase, which steps count, and the probe's view of the recorder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

from torchdoctor.collect.line_sampler import (
    LineSampler,
    SampleCounts,
    aggregate,
    is_user_file,
    steady_indices,
    user_stack,
)
from torchdoctor.collect.probes.lines import LineProbe
from torchdoctor.collect.step_recorder import StepRecorder
from torchdoctor.core.steps import StepTiming

USER = "/home/me/train.py"
LIB = "/usr/lib/python3.12/json/encoder.py"


@dataclass
class Code:
    """A code object whose one instruction, at byte offset 2 * `line`, is on `line`."""

    co_filename: str
    co_name: str
    co_firstlineno: int
    line: int = 0

    def co_lines(self) -> list[tuple[int, int, int]]:
        return [(2 * self.line, 2 * self.line + 2, self.line)]


@dataclass
class FakeFrame:
    f_code: Code
    f_lineno: int
    f_back: Any = None

    @property
    def f_lasti(self) -> int:
        return 2 * self.f_lineno


def stack(*frames: tuple[str, int, str, int]) -> FakeFrame:
    """A frame chain from outermost to innermost; returns the innermost."""
    frame = None
    for file, line, name, first in frames:
        frame = FakeFrame(Code(file, name, first, line), line, frame)
    assert frame is not None
    return frame


def only_user(name: str) -> bool:
    return name == USER


def step(index: int, total: float, **phases: float) -> StepTiming:
    named = sum(phases.values())
    return StepTiming(index=index, total_s=total, phases={**phases, "other": total - named})


def test_user_stack_keeps_user_frames_innermost_first_and_folds_a_genexpr() -> None:
    frame = stack(
        (USER, 50, "<module>", 1),
        (USER, 40, "main", 30),
        (USER, 23, "tokenize", 20),
        (USER, 23, "<genexpr>", 23),  # run from line 23 of tokenize: that line, tokenize's
        (LIB, 200, "encode", 190),
    )
    assert user_stack(frame, is_user=only_user) == (
        (USER, 23, "tokenize", 20),
        (USER, 40, "main", 30),
        (USER, 50, "<module>", 1),
    )
    assert user_stack(frame, is_user=only_user, limit=2)[-1] == (USER, 40, "main", 30)


def test_library_and_frozen_files_are_not_the_users() -> None:
    import json

    assert not is_user_file(json.__file__)
    assert not is_user_file("<frozen runpy>")
    assert not is_user_file(pytest.__file__)  # site-packages
    assert is_user_file(__file__)


def test_aggregate_weighs_samples_by_their_phases_measured_time() -> None:
    """Forward drew most samples (the GIL), but took 20% of the step: the forward line gets
    20%, and the other 80% goes to the lines the `other` samples saw, 3 to 1."""
    counts = SampleCounts()
    fwd = ((USER, 39, "main", 30),)
    hot = ((USER, 23, "tokenize", 20), (USER, 43, "main", 30))
    log = ((USER, 44, "main", 30),)
    for i in range(2, 6):
        for _ in range(9):
            counts.add((i, "forward", fwd))
        for _ in range(3):
            counts.add((i, "other", hot))
        counts.add((i, "other", log))
    counts.add((0, "other", log))  # a warm-up step: not kept
    steps = [step(i, 0.010, forward=0.002) for i in range(2, 6)]
    found = aggregate(counts, steps, interval_s=0.005)
    top = found.top()
    assert top is not None and top.site == f"{USER}:23" and top.function == "tokenize"
    assert top.share == pytest.approx(0.6)
    assert top.seconds_per_step == pytest.approx(0.006)
    assert top.phases == {"other": pytest.approx(1.0)}
    assert top.callers == [f"{USER}:43 in main"]
    assert [h.line for h in found.lines] == [23, 39, 44]
    assert found.lines[1].share == pytest.approx(0.2)
    assert found.samples == 4 * 13 and found.steps == 4
    assert found.phase_shares == {"forward": pytest.approx(0.2), "other": pytest.approx(0.8)}
    assert found.top("forward") is not None and found.top("forward").line == 39  # type: ignore[union-attr]
    assert found.top("data_wait") is None
    main = next(f for f in found.functions if f.function == "main")
    assert main.share == pytest.approx(0.8 * 0.75 + 0.2 + 0.8 * 0.25)  # inclusive


def test_a_phase_without_samples_is_unsampled_and_no_user_frame_is_counted() -> None:
    counts = SampleCounts()
    counts.add((1, "other", ()))  # the main thread was only in library code
    counts.add((1, "other", ((USER, 5, "f", 1),)))
    found = aggregate(counts, [step(1, 0.010, backward=0.004)])
    assert found.unsampled_share == pytest.approx(0.4)
    assert found.outside_user_share == pytest.approx(0.3)
    assert found.lines[0].share == pytest.approx(0.3)
    assert aggregate(SampleCounts(), [step(1, 0.01)]).samples == 0


def test_steady_indices_drop_the_warm_up_and_the_profiled_window() -> None:
    steps = [step(i, 0.5 if i == 0 else 0.01) for i in range(20)]
    kept = steady_indices(steps, exclude=range(5, 10))
    assert 0 not in kept and not kept & set(range(5, 10)) and 19 in kept
    # never more than half of a short run is dropped
    assert len(steady_indices(steps[:4])) >= 2


def test_sampler_samples_only_inside_steps_the_given_thread() -> None:
    where: list[tuple[int, str] | None] = [None]
    frame = stack((USER, 7, "main", 1))
    sampler = LineSampler(lambda: where[0], thread_id=11, frames=lambda: {11: frame})  # type: ignore[arg-type,return-value]
    sampler.sample_once()
    assert not sampler.counts.count
    where[0] = (3, "data_wait")
    sampler.sample_once()
    assert sampler.counts.count == {(3, "data_wait", ((USER, 7, "main", 1),)): 1}


def test_probe_reads_the_open_step_and_phase_from_the_recorder() -> None:
    recorder = StepRecorder()
    probe = LineProbe(recorder)
    assert probe._where() is None  # before the first step
    recorder.begin("forward")
    assert probe._where() == (0, "forward")
    recorder.end("forward")
    assert probe._where() == (0, "other")
    recorder.optimizer_step_end()
    assert probe._where() == (1, "other")


def test_the_real_thread_starts_and_stops_and_sees_this_test() -> None:
    import sys
    import time

    from torchdoctor.collect.line_sampler import SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    sampler = LineSampler(lambda: (0, "other"), interval_s=0.001)
    sampler.start()
    assert sys.getswitchinterval() == pytest.approx(min(before, SWITCH_INTERVAL_S))
    deadline = time.monotonic() + 5
    while not sampler.counts.count and time.monotonic() < deadline:
        sum(i * i for i in range(1000))  # Python work for the sampler to catch
    sampler.stop()
    assert sys.getswitchinterval() == before
    stacks = [key[2] for key in sampler.counts.count]
    assert any(f[0] == __file__ for s in stacks for f in s)


def test_the_builtin_workloads_are_user_code_and_the_console_script_is_not() -> None:
    import sysconfig

    from torchdoctor.collect.line_sampler import WORKLOADS_DIR

    assert is_user_file(WORKLOADS_DIR + "gpt.py")
    assert not is_user_file(sysconfig.get_paths()["scripts"] + "/torchdoctor")


def test_without_stratification_each_sample_is_an_equal_part_of_wall_time() -> None:
    counts = SampleCounts()
    for _ in range(3):
        counts.add((1, "forward", ((USER, 39, "main", 30),)))
    counts.add((1, "other", ((USER, 23, "tokenize", 20),)))
    found = aggregate(counts, [step(1, 0.010, forward=0.009)], stratify=False)
    assert found.top() is not None and found.top().line == 39  # type: ignore[union-attr]
    assert found.lines[0].share == pytest.approx(0.75)
    assert found.phase_shares == {"forward": pytest.approx(0.75), "other": pytest.approx(0.25)}


def test_a_probe_on_a_device_clock_does_not_stratify() -> None:
    class DeviceClock:
        def mark(self) -> float:
            return 0.0

        def seconds(self, start: float, end: float) -> float:
            return 0.0

    probe = LineProbe(StepRecorder(DeviceClock()))
    probe.sampler.counts.add((0, "other", ((USER, 5, "f", 1),)))
    found = probe.profile([step(0, 0.01, forward=0.009)])
    assert found is not None and found.lines[0].share == pytest.approx(1.0)


def _blocked_in_a_genexpr(ready: Any, release: Any) -> int:
    ready.set()
    return sum(int(release.wait()) for _ in range(1))  # the line the blocked thread is on


def test_a_sample_of_a_real_thread_resolves_to_the_frames_f_lineno_reads() -> None:
    """What a sample records (code and instruction offset) resolves to the stack the frames
    themselves read (`user_stack`, by `f_lineno`), the generator expression folded."""
    import sys
    import threading

    ready, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=_blocked_in_a_genexpr, args=(ready, release))
    thread.start()
    try:
        ready.wait()
        frame = sys._current_frames()[thread.ident]  # type: ignore[index]
        while "_blocked_in_a_genexpr" not in {f[2] for f in user_stack(frame)}:
            frame = sys._current_frames()[thread.ident]  # type: ignore[index]
        expected = user_stack(frame)
        calls: list[str] = []

        def is_user(name: str) -> bool:
            calls.append(name)
            return is_user_file(name)

        sampler = LineSampler(lambda: (0, "other"), thread_id=thread.ident, is_user=is_user)
        for _ in range(5):
            sampler.sample_once()
        ((key, n),) = sampler.counts.count.items()
    finally:
        release.set()
        thread.join()
    assert n == 5 and key[2] == expected
    assert expected[0][2] == "_blocked_in_a_genexpr"  # the genexpr folded into its line
    # Each code object is judged user or not once, not at every sample.
    assert len(calls) == len(sampler._codes)


def test_line_at_reads_the_line_f_lineno_reads() -> None:
    import sys

    from torchdoctor.collect.line_sampler import line_at

    frame = sys._getframe()
    assert line_at(frame.f_code, frame.f_lasti) == frame.f_lineno
    caller = frame.f_back
    assert caller is not None and line_at(caller.f_code, caller.f_lasti) == caller.f_lineno
    assert line_at(frame.f_code, -1) == frame.f_code.co_firstlineno


def test_the_interval_grows_once_the_shares_have_the_samples_they_need() -> None:
    from torchdoctor.collect.line_sampler import SAMPLES_NEEDED, interval_after

    assert interval_after(0, 0.005) == interval_after(SAMPLES_NEEDED, 0.005) == 0.005
    assert interval_after(3 * SAMPLES_NEEDED, 0.005) == pytest.approx(0.015)
    frame = stack((USER, 7, "main", 1))
    sampler = LineSampler(lambda: (0, "other"), thread_id=11, frames=lambda: {11: frame})  # type: ignore[arg-type,return-value]
    for _ in range(2 * SAMPLES_NEEDED):
        sampler.sample_once()
    assert sampler.current_interval_s() == pytest.approx(2 * sampler.interval_s)
    ((_key, weight),) = sampler.counts.weight.items()
    # The first SAMPLES_NEEDED stand for one interval each, the later ones for more.
    assert weight > 2 * SAMPLES_NEEDED * sampler.interval_s


def test_samples_taken_at_a_longer_interval_stand_for_more_time() -> None:
    """Steps 1-2 sampled every 5 ms, steps 3-4 every 10 ms, each step half in line 23 and
    half in line 44 while sampled densely, all in line 44 while sparsely: line 44 holds 3/4 of
    the time, not the 2/3 of the samples it drew."""
    counts = SampleCounts()
    dense, sparse = 0.005, 0.010
    for i in (1, 2):
        counts.add((i, "other", ((USER, 23, "tokenize", 20),)), 1, dense)
        counts.add((i, "other", ((USER, 44, "main", 30),)), 1, dense)
    for i in (3, 4):
        counts.add((i, "other", ((USER, 44, "main", 30),)), 1, sparse)
    found = aggregate(counts, [step(i, 0.010) for i in (1, 2, 3, 4)])
    assert found.samples == 6
    assert found.lines[0].line == 44 and found.lines[0].share == pytest.approx(0.75)
    assert found.lines[1].share == pytest.approx(0.25)


class _Unreadable:
    """The frame torch.compile intercepted, not yet whole: reading it crashed the interpreter
    (here: any attribute read fails the test)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the sampler read {name} below the compiler's frames")


def test_a_walk_stops_at_the_compilers_frames_and_drops_the_sample() -> None:
    dynamo = f"/venv/site-packages{os.sep}torch{os.sep}_dynamo{os.sep}convert_frame.py"
    compiling = FakeFrame(Code(dynamo, "__call__", 1, 5), 5, _Unreadable())
    top = FakeFrame(Code(LIB, "dumps", 1, 3), 3, compiling)
    sampler = LineSampler(lambda: (3, "forward"), thread_id=11, frames=lambda: {11: top})  # type: ignore[arg-type,return-value]
    sampler.sample_once()
    sampler.sample_once()  # the compiler's code is known now: still nothing read below it
    assert not sampler.counts.count


def test_no_frame_is_read_while_torch_compile_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.compiler

    sampler = LineSampler(lambda: (3, "forward"), thread_id=11, frames=lambda: {11: _Unreadable()})  # type: ignore[arg-type,return-value]
    monkeypatch.setattr(torch.compiler, "_is_compiling_flag", True)
    sampler.sample_once()
    assert not sampler.counts.count
