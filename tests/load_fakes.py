"""Fake load signals for tests: the real probe over a modelled machine, or a scripted one.

`FakeMachine` models what /proc/stat and the process table report: a clock, and CPU time
that other processes and this process tree accumulate as the clock advances. The real
`PsutilLoadProbe` reads it, so its arithmetic is what gets tested. `ScriptedLoadProbe` hands
out one verdict per window in order (True = disturbed), for code that only consumes readings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from torchdoctor.core.load import MachineLoad, judge
from torchdoctor.measure.load import PsutilLoadProbe


@dataclass
class FakeMachine:
    cores: int = 2
    now: float = 0.0
    #: Cores other processes keep busy, and cores this process tree keeps busy.
    other_cores: float = 0.0
    own_cores: float = 1.0
    busy_s: float = 0.0
    own_s: float = 0.0
    gpu_pids: list[int] | None = None

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.busy_s += (self.other_cores + self.own_cores) * seconds
        self.own_s += self.own_cores * seconds

    def probe(self) -> PsutilLoadProbe:
        return PsutilLoadProbe(
            clock=lambda: self.now,
            busy=lambda _cpus: self.busy_s,
            own=lambda: self.own_s,
            gpu=lambda: self.gpu_pids,
            load_avg=lambda: self.other_cores + self.own_cores,
            cpus=list(range(self.cores)),
        )


def reading(disturbed: bool, *, cores: int = 2) -> MachineLoad:
    """A one-second window's reading: 1.5 other cores when disturbed, none when quiet."""
    return judge(interval_s=1.0, cores=cores, own_cpu_s=1.0, other_cpu_s=1.5 if disturbed else 0.0)


@dataclass
class _Window:
    load: MachineLoad

    def stop(self) -> MachineLoad:
        return self.load


@dataclass
class ScriptedLoadProbe:
    """Window i reads `script[i]` (True: disturbed); past the script, `then`."""

    script: list[bool] = field(default_factory=list)
    then: bool = False
    opened: int = 0

    @classmethod
    def of(cls, script: Iterable[bool], *, then: bool = False) -> ScriptedLoadProbe:
        return cls(list(script), then)

    def start(self) -> _Window:
        i = self.opened
        self.opened += 1
        return _Window(reading(self.script[i] if i < len(self.script) else self.then))
