"""The collective microbenchmark's plan and record: what sizes, how timed, what came out.

Each rank runs `_rank_bench` (under torchrun); this module holds what both sides share. A
point is timed as NCCL-tests and torch's own distributed benchmarks do: warm-up calls first
(the first calls build the communicator's buffers and connections), then per repeat a
barrier, so every rank starts together, and the call timed on each rank (after a device
synchronize on a GPU). A repeat's time is the slowest rank's, since the collective is done
only when it is done everywhere; the repeats' median and spread come from `measure.summarize`.

Before the collectives, the same ranks measure how much slower their computation runs when they
all compute at once than when one computes alone (`ColocationProbe`): ranks that share a
machine share its cores, caches and memory bandwidth (and a virtual machine's vCPUs may be one
physical core's two hardware threads), so the N=1 phases, measured with the machine to one
rank, are not what a rank computes in at N. The work timed is the workload's whole training
step as N=1 runs it, less DDP (a batch from a DataLoader, forward, backward, the workload's own
optimizer: `_rank_train.whole_step`) when the job is a built-in workload, else a generic kernel
(a matrix product and a memory-bound sum). The whole step, not the forward and backward alone:
each phase slows by its own amount when ranks share the cores (the interpreter's work in data
loading and in a small model's optimizer is not a matrix product), and the model applies one
slowdown to every phase, so it must be the step's mix. Rounds alternate alone (rank 0, the
others waiting at a barrier) and all together, so a drift of the host's speed falls on both; a
round's ratio is the ranks' mean time together over rank 0's time alone, and the slowdown the
median of the rounds' ratios.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from torchdoctor.core.records import Record, SubRecord
from torchdoctor.measure import Measurement
from torchdoctor.scale.fit import (
    MIN_FIT_POINTS,
    AlphaBetaFit,
    Collective,
    bus_bandwidth,
    fit_near,
)

_KB: Final = 1024
#: 1 KiB to 64 MiB in steps of 4: the issue's range, a point every 2 binary orders.
FULL_SIZES: Final[tuple[int, ...]] = tuple(_KB * 4**k for k in range(9))
#: --quick: 1 KiB to 4 MiB in steps of 16, enough points for the two-parameter fit.
QUICK_SIZES: Final[tuple[int, ...]] = tuple(_KB * 16**k for k in range(4))
#: Warm-up calls per point (the first one sets up the connection; torch's
#: `benchmarks/distributed` scripts use a handful too).
WARMUP_CALLS: Final = 3
#: Timed repeats per point: `measure.summarize`'s MIN_SAMPLES_FOR_STATS for an interval.
REPEATS: Final = 10
QUICK_REPEATS: Final = 5
#: Rounds of the co-location probe (each: alone, then together), and --quick's.
COLOCATION_ROUNDS: Final = 7
QUICK_COLOCATION_ROUNDS: Final = 3
#: Seconds of work per timed block of the probe: a block repeats the work enough times to
#: last this long, so that a timer's resolution and a single preemption weigh little.
COLOCATION_BLOCK_S: Final = 0.05
#: The most calls in one block (a very short step).
COLOCATION_MAX_CALLS: Final = 50
#: The file rank 0 writes into the run folder.
BENCH_FILE: Final = "collectives.json"
#: Set in a rank's environment: run the benchmark before the job (`_rank_bench.bench_if_asked`).
BENCH_ENV: Final = "TORCHDOCTOR_SCALE_BENCH"


class CollectivePoint(SubRecord):
    """One collective at one size: its timings (the slowest rank's per repeat)."""

    collective: Collective
    size_bytes: int
    time: Measurement
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    #: CPU seconds one call took in a rank's process (the median over repeats of the ranks'
    #: mean: gloo's threads, the kernel's socket work); None in an older record.
    cpu_s: float | None = None


class ColocationProbe(SubRecord):
    """How much slower a rank computes with all ranks computing at once (see the module).

    `alone`, `together`: the time of one call of `work` (per round); `slowdown`: the median of
    the rounds' ratios together/alone, `slowdown_ci` its 95% interval.
    """

    work: str
    calls_per_block: int
    alone: Measurement
    together: Measurement
    slowdown: float
    slowdown_ci: tuple[float, float]


class CollectiveBench(Record):
    """The microbenchmark at one world size: every point, and a fit per collective."""

    schema_name: ClassVar[str] = "collective_bench"

    world_size: int
    backend: str
    device: str
    points: list[CollectivePoint]
    fits: dict[Collective, AlphaBetaFit]
    colocation: ColocationProbe | None = None
    #: The node's ranks' compute threads over its cores: at 1 or more, every core runs a
    #: rank's computation, and a collective's CPU work overlapping it is taken from it.
    threads_per_core: float | None = None

    def fit(self, collective: Collective) -> AlphaBetaFit:
        return self.fits[collective]

    def fit_near(self, collective: Collective, targets: Sequence[float]) -> AlphaBetaFit:
        """`collective`'s fit over the measured sizes around `targets` (`fit.fit_near`): what
        the scaling model times a gradient bucket with."""
        mine = [p for p in self.points if p.collective == collective]
        if not mine:  # a record whose points were not kept
            return self.fits[collective]
        return fit_near(
            collective,
            self.world_size,
            [p.size_bytes for p in mine],
            [p.time.median for p in mine],
            targets,
        )

    def cpu_fit_near(self, collective: Collective, targets: Sequence[float]) -> AlphaBetaFit | None:
        """The CPU seconds a call of `collective` takes in a rank, fitted as its time is, over
        the sizes around `targets`; None where the record has no CPU times (or some are 0)."""
        mine = [p for p in self.points if p.collective == collective]
        cpu = [p.cpu_s for p in mine]
        if len(mine) < MIN_FIT_POINTS or any(c is None or c <= 0 for c in cpu):
            return None
        return fit_near(
            collective,
            self.world_size,
            [p.size_bytes for p in mine],
            [float(c) for c in cpu if c is not None],
            targets,
        )


def point(
    collective: Collective,
    world_size: int,
    size: int,
    time: Measurement,
    cpu_s: float | None = None,
) -> CollectivePoint:
    return CollectivePoint(
        collective=collective,
        size_bytes=size,
        time=time,
        algbw_bytes_per_s=size / time.median,
        busbw_bytes_per_s=bus_bandwidth(collective, world_size, size, time.median),
        cpu_s=cpu_s,
    )
