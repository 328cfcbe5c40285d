"""`MachineLoad`: how much other work shared the machine while something was measured.

A measurement taken while another process used the CPU (or the GPU) is a measurement of a
different machine: on a 2-core host a training script diagnosed beside a CPU hog ran its
step 8x slower and came out compute-bound, where on the quiet machine it is bound by host
work. So every measuring command records the load it ran under, and says so when it was
disturbed. The figures are taken in `torchdoctor.measure.load`; this is the record (core, so
that `Ceilings` can carry one) and the judgement of what counts as disturbed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from pydantic import Field

from torchdoctor.core.records import Record

#: Average cores' worth of CPU time taken by other processes above which a measurement is
#: disturbed. torch's intra-op pool uses every core by default and its parallel regions end
#: at a barrier, so one core shared with another process slows the whole region to that
#: core's pace: half a core taken on average already moves step times by tens of percent (on
#: the project's 2-core host one busy-loop process, 1 core, made a script's step 8x slower).
DISTURBED_OTHER_CORES: Final = 0.5
#: Shortest window judged. /proc/stat counts CPU time in 10 ms ticks (USER_HZ = 100), so over
#: 0.2 s a core's reading is off by at most 2 ticks = 0.1 core, well under the threshold above.
MIN_WINDOW_S: Final = 0.2


class MachineLoad(Record):
    """Other work on the machine during one measured interval.

    `other_cpu_s` is the CPU time (user + system + interrupts + hypervisor steal) of the
    cores this process may run on, minus the CPU time of this process and its children;
    `other_cores` is that over the interval (how many cores other work kept busy on
    average), `cores` how many there were. `load_avg_1m` (the 1-minute load average, this
    process's own threads included) is supporting evidence. `gpu_other_pids` are processes
    outside this process tree that held the GPU (from NVML, where installed; None where not
    looked at).
    """

    schema_name: ClassVar[str] = "machine_load"

    interval_s: float = Field(ge=0)
    cores: int = Field(ge=1)
    own_cpu_s: float = Field(ge=0)
    other_cpu_s: float = Field(ge=0)
    other_cores: float = Field(ge=0)
    load_avg_1m: float | None = None
    gpu_other_pids: list[int] | None = None
    #: Sub-intervals (e.g. A/B rounds) judged disturbed on their own, out of `windows`.
    disturbed_windows: int = Field(ge=0, default=0)
    windows: int = Field(ge=1, default=1)
    disturbed: bool = False
    warning: str | None = None


def judge(
    *,
    interval_s: float,
    cores: int,
    own_cpu_s: float,
    other_cpu_s: float,
    load_avg_1m: float | None = None,
    gpu_other_pids: Sequence[int] | None = None,
    disturbed_windows: int = 0,
    windows: int = 1,
) -> MachineLoad:
    """A `MachineLoad` with its verdict and warning (thresholds above)."""
    other_cpu_s = max(0.0, other_cpu_s)
    other_cores = other_cpu_s / interval_s if interval_s > 0 else 0.0
    judged = interval_s >= MIN_WINDOW_S
    cpu_busy = judged and other_cores > DISTURBED_OTHER_CORES
    gpu_busy = bool(gpu_other_pids)
    disturbed = cpu_busy or gpu_busy or disturbed_windows > 0
    reasons = []
    if cpu_busy or disturbed_windows:
        reasons.append(
            f"other processes used {other_cores:.2f} of {cores} CPU cores on average"
            + (f" (load average {load_avg_1m:.2f})" if load_avg_1m is not None else "")
        )
    if disturbed_windows and windows > 1:
        reasons.append(f"{disturbed_windows} of {windows} measured rounds were disturbed")
    if gpu_busy:
        pids = ", ".join(str(p) for p in gpu_other_pids or [])
        reasons.append(f"other processes on the GPU (pid {pids})")
    warning = (
        "machine disturbed during the measurement: "
        + "; ".join(reasons)
        + "; its timings are not this machine's and may mislead; measure again when it is quiet"
        if disturbed
        else None
    )
    return MachineLoad(
        interval_s=interval_s,
        cores=max(cores, 1),
        own_cpu_s=max(0.0, own_cpu_s),
        other_cpu_s=other_cpu_s,
        other_cores=other_cores,
        load_avg_1m=load_avg_1m,
        gpu_other_pids=list(gpu_other_pids) if gpu_other_pids is not None else None,
        disturbed_windows=disturbed_windows,
        windows=max(windows, 1),
        disturbed=disturbed,
        warning=warning,
    )


def combine(readings: Sequence[MachineLoad]) -> MachineLoad | None:
    """One reading for consecutive windows: totals over all, and how many were disturbed."""
    if not readings:
        return None
    gpu: list[int] | None = None
    for r in readings:
        if r.gpu_other_pids is not None:
            gpu = sorted({*(gpu or []), *r.gpu_other_pids})
    averages = [r.load_avg_1m for r in readings if r.load_avg_1m is not None]
    return judge(
        interval_s=sum(r.interval_s for r in readings),
        cores=max(r.cores for r in readings),
        own_cpu_s=sum(r.own_cpu_s for r in readings),
        other_cpu_s=sum(r.other_cpu_s for r in readings),
        load_avg_1m=max(averages) if averages else None,
        gpu_other_pids=gpu,
        disturbed_windows=sum(
            r.disturbed_windows if r.windows > 1 else r.disturbed for r in readings
        ),
        windows=sum(r.windows for r in readings),
    )
