"""The serving stage's records: latency as requests see it, load runs, curves, the SLA search,
and the whole `torchdoctor serve` result. Typed, frozen, with a versioned JSON form.

Every latency is in seconds and belongs to one request; nothing here is a block average.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record, SubRecord
from torchdoctor.serve.variants import VariantSetup

ArrivalKind = Literal["constant", "poisson", "gamma"]
SlaStatus = Literal["VALID", "INVALID"]
CurveAxis = Literal["batch_size", "threads", "instances"]


class PercentileEstimate(SubRecord):
    """One percentile of request latency and its order-statistic interval."""

    percentile: float
    value_s: float
    ci_low_s: float
    #: None when too few requests bound it from above at the interval's confidence.
    ci_high_s: float | None
    confidence: float
    #: Whether the request count meets LoadGen's minimum for a claim on this percentile.
    enough_samples: bool
    min_samples: int


class LatencySummary(SubRecord):
    """Per-request latencies summarized: count, mean, the percentiles with their intervals."""

    n: int = Field(ge=1)
    mean_s: float
    max_s: float
    percentiles: list[PercentileEstimate]

    def at(self, percentile: float) -> PercentileEstimate:
        for p in self.percentiles:
            if p.percentile == percentile:
                return p
        raise KeyError(percentile)


class LatencyWindow(SubRecord):
    """One window of requests: its p50 and p99, which the stopping rule compares."""

    n: int
    p50_s: float
    p99_s: float


class LatencyMeasurement(Record):
    """Closed-loop per-request latency of one callable: first call, warm-up, steady windows."""

    schema_name: ClassVar[str] = "serve_latency"

    label: str
    batch_size: int = 1
    device: str = "cpu"
    #: The first call alone (lazy initialization, compilation, autotuning happen here).
    first_call_s: float
    #: Calls and seconds after the first until the latencies settled (the one warm-up rule).
    warmup_calls: int
    warmup_s: float
    windows: list[LatencyWindow]
    #: Whether the last three windows' p50 and p99 agreed within 10% before the budget ran out.
    settled: bool
    summary: LatencySummary
    latencies_s: list[float]


class PercentileComparison(SubRecord):
    """Candidate against baseline at one percentile: speedup = baseline / candidate."""

    percentile: float
    baseline_s: float
    candidate_s: float
    speedup: float
    ci_low: float
    ci_high: float
    verdict: Literal["faster", "slower", "no_significant_difference"]


class VariantComparison(Record):
    """Two callables timed request by request in interleaved, shuffled rounds."""

    schema_name: ClassVar[str] = "serve_comparison"

    baseline: str
    candidate: str
    rounds: int
    requests_per_side: int
    confidence: float
    min_effect: float
    by_percentile: list[PercentileComparison]


class LoadRun(Record):
    """An open-loop run: requests at scheduled arrivals, each timed from its arrival."""

    schema_name: ClassVar[str] = "serve_load"

    arrivals: ArrivalKind
    target_rate: float
    seed: int
    max_batch_size: int = 1
    max_queue_delay_s: float = 0.0
    #: True: computed from a service-time table by the discrete-event simulation.
    simulated: bool = False
    duration_s: float
    achieved_rate: float
    mean_wait_s: float
    batches: int
    mean_batch_size: float
    summary: LatencySummary
    #: Requests per second that met `goodput_bound_s` (None: no bound given).
    goodput: float | None = None
    goodput_bound_s: float | None = None
    #: A simulated run's calibration: the rate of the real run its overheads were fitted on
    #: (None: simulated from the closed-loop table alone, or not simulated).
    calibrated_at_rate: float | None = None


class ServiceTime(SubRecord):
    """The median time to serve one batch of `batch_size` requests, t(b)."""

    batch_size: int
    seconds: float


class ResidualQuantiles(SubRecord):
    """Quantiles (evenly spaced, 0 to 1) of the service time the batcher saw minus t(b), in
    seconds, for batches that started after the server had been idle `idle_from_s` up to
    `idle_to_s` (None: unbounded) since its last batch ended."""

    #: The batch size they were seen at; None when pooled over all sizes.
    batch_size: int | None = None
    idle_from_s: float
    idle_to_s: float | None
    n: int = Field(ge=1)
    quantiles_s: list[float]


class ServiceCalibration(SubRecord):
    """What a real batcher run adds to the closed-loop table t(b), fitted from its trace.

    `overhead_s`: the loop's own time from one batch's end to the next's start when the next
    starts at once; `overshoot_s`: how late a batch starts after a sleep (timer slack,
    wake-up); `service`: each batch's service time as the batcher saw it minus t(b), by how
    long the server had been idle before it (intra-op threads and caches go cold), by batch
    size where it was seen often enough and pooled. The simulation draws from these at other
    rates.
    """

    arrivals: ArrivalKind
    rate: float
    requests: int
    batches: int
    table: list[ServiceTime]
    overhead_s: list[float]
    overshoot_s: list[float]
    service: list[ResidualQuantiles]


class CurvePoint(SubRecord):
    """Closed-loop throughput and request-latency percentiles at one setting."""

    batch_size: int
    threads: int | None
    #: Model instances (processes) serving side by side, each with `threads` threads; None:
    #: one instance (the batch-size and thread curves).
    instances: int | None = None
    samples_per_s: float
    p50_s: float
    p95_s: float
    p99_s: float


class Curve(SubRecord):
    """Throughput and latency along one axis, the knee marked, and why it stopped."""

    axis: CurveAxis
    points: list[CurvePoint]
    knee_index: int | None
    stopped_early: bool


class SlaSpec(SubRecord):
    """A service-level objective: the `percentile` of request latency at most `bound_s`."""

    percentile: float
    bound_s: float
    text: str


class SlaPoint(SubRecord):
    """One load point measured for the SLA: its rate, what was achieved, and the percentile."""

    target_rate: float
    achieved_rate: float
    latency_s: float
    n: int
    meets: bool
    #: Requests per second answered within the bound (goodput), whether or not the point meets.
    goodput: float | None = None
    #: The percentile's 95% order-statistic interval (`serve._percentiles`); the high end None
    #: when the requests are too few to bound it. The search re-measures a failure whose
    #: interval reaches under the bound before trusting it (`serve.sla`).
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    #: The run's per-request latencies and its duration, kept in memory so that runs at one
    #: rate can be pooled into one percentile (`serve.sla.pooled`); not written to JSON.
    latencies_s: list[float] | None = Field(default=None, exclude=True, repr=False)
    duration_s: float | None = Field(default=None, exclude=True, repr=False)


class SlaSearch(Record):
    """The highest throughput whose percentile stays under the bound, and its confirmation."""

    schema_name: ClassVar[str] = "serve_sla"

    sla: SlaSpec
    method: Literal["sweep", "binary"]
    points: list[SlaPoint]
    measurements: int
    status: SlaStatus
    reason: str
    best: SlaPoint | None
    confirmation: SlaPoint | None
    #: The measured point nearest to meeting the bound (INVALID: what came closest).
    closest: SlaPoint | None


class ServeResult(Record):
    """Everything `torchdoctor serve` measured for one model on one device."""

    schema_name: ClassVar[str] = "serve_result"

    target: str
    device: str
    latency: LatencyMeasurement
    service_table: list[ServiceTime] = Field(default_factory=list)
    curves: list[Curve] = Field(default_factory=list)
    sla_search: SlaSearch | None = None
    #: The batching simulation's predictions from `service_table` at other arrival rates.
    predictions: list[LoadRun] = Field(default_factory=list)
    #: The real batcher's run the predictions' overheads were fitted on (None: predicted from
    #: the closed-loop table alone).
    calibration: ServiceCalibration | None = None
    #: Each variant of the model (`ServePlan`'s `variants`) against the eager model at batch 1.
    comparisons: list[VariantComparison] = Field(default_factory=list)
    #: Each variant's setup (compile, export, quantization time, apart from its requests) and
    #: its accuracy gate against fp32 eager; only variants that passed are in `comparisons`.
    variant_setups: list[VariantSetup] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    machine_load: MachineLoad | None = None


__all__ = [
    "ArrivalKind",
    "Curve",
    "CurveAxis",
    "CurvePoint",
    "LatencyMeasurement",
    "LatencySummary",
    "LatencyWindow",
    "LoadRun",
    "PercentileComparison",
    "PercentileEstimate",
    "ResidualQuantiles",
    "ServeResult",
    "ServiceCalibration",
    "ServiceTime",
    "SlaPoint",
    "SlaSearch",
    "SlaSpec",
    "SlaStatus",
    "VariantComparison",
]
