"""`LineProbe`: the line sampler (collect/line_sampler.py) run inside the script's steps.

The sampler thread asks the step recorder, at each sample, whether a step is open and which
phase the main thread is in; outside steps (set-up, evaluation after the loop) it samples
nothing. It starts at install and stops at uninstall, so a process that never trains pays one
idle thread waking every few milliseconds.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from torchdoctor.collect.line_sampler import SAMPLE_INTERVAL_S, LineSampler
from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.step_recorder import HostClock, StepRecorder
from torchdoctor.core.hostlines import HostLineProfile
from torchdoctor.core.steps import Phase, StepTiming


class LineProbe:
    def __init__(self, recorder: StepRecorder, *, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.recorder = recorder
        self.sampler = LineSampler(self._where, interval_s=interval_s)

    def _where(self) -> tuple[int, Phase] | None:
        recorder = self.recorder
        if not recorder.in_step:
            return None
        return recorder.closed_count, recorder.active_phase or "other"

    def install(self, site: ProbeSite) -> None:
        self.sampler.start()

    def on_step_end(self) -> None:
        pass

    def uninstall(self) -> None:
        self.sampler.stop()

    def profile(
        self, steps: Sequence[StepTiming], *, exclude: Collection[int] = ()
    ) -> HostLineProfile | None:
        """The steady steps' record; None when no sample fell in them (a run too short to
        sample, or no step at all)."""
        # Phases timed by CUDA events are the device's: the host's samples cannot be
        # stratified by them (line_sampler.aggregate).
        stratify = isinstance(self.recorder.clock, HostClock)
        found = self.sampler.profile(steps, exclude=exclude, stratify=stratify)
        return found if found.samples else None
