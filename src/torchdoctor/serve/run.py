"""`torchdoctor serve`'s measurement: latency, curves, the service table, predictions, SLA.

One function walks the steps in the order their results feed each other: the per-request
latency at batch 1; the batch-size curve, whose medians are the service-time table t(b); the
thread curve (CPU); one short real batcher run that calibrates the simulation's overheads
(`serve.calibration`); the batching simulation's predicted percentiles at fractions of the
capacity the table implies, rates the calibration did not see; each variant of the plan
against the eager model; and, when an SLA is given, the search for the highest rate that meets
it, measured for real under the dynamic batcher.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

import torch

from torchdoctor.serve.arrivals import arrival_times
from torchdoctor.serve.batcher import BatchPolicy, load_record, run_batcher, simulate_batcher
from torchdoctor.serve.calibration import (
    CALIBRATION_LOAD,
    calibration_requests,
    calibration_run,
    simulate_calibrated,
)
from torchdoctor.serve.clock import RealClock, ServeClock
from torchdoctor.serve.compare import compare_variants
from torchdoctor.serve.curves import batch_curve, doubling, thread_curve
from torchdoctor.serve.instances import InstancePool, instance_curve
from torchdoctor.serve.latency import measure_latency
from torchdoctor.serve.records import (
    ArrivalKind,
    Curve,
    LoadRun,
    ServeResult,
    ServiceCalibration,
    ServiceTime,
    SlaPoint,
    SlaSearch,
    SlaSpec,
)
from torchdoctor.serve.sla import (
    MeasureAt,
    binary_search_sla,
    point_from,
    requests_for,
    sweep_sla,
)
from torchdoctor.serve.target import InferenceTarget, Request

#: Triton's dynamic batcher holds no request by default (max_queue_delay_microseconds: 0,
#: triton-inference-server docs, "Dynamic Batcher"): a batch is what waits when the server
#: is free.
DEFAULT_MAX_QUEUE_DELAY_S: Final = 0.0
#: The largest batch the curve tries by default.
DEFAULT_MAX_BATCH: Final = 64
#: Loads, as fractions of the table's capacity, at which the simulation predicts percentiles.
PREDICTED_LOADS: Final = (0.25, 0.5, 0.75, 0.9)
#: The SLA search's rate range, as fractions of the table's capacity: from a light load to
#: past saturation, where no bound holds.
SLA_LOW_LOAD: Final = 0.1
SLA_HIGH_LOAD: Final = 1.2
#: Requests per predicted point (simulation is cheap; enough for p99 many times over).
PREDICTION_REQUESTS: Final = 5000


@dataclass(frozen=True)
class ServePlan:
    """What to measure, and how much."""

    max_batch_size: int = DEFAULT_MAX_BATCH
    latency_budget_s: float = 10.0
    curve_calls: int = 100
    threads: bool = True
    #: Also sweep model instances x threads (CPU; each instance a spawned process holding its
    #: own copy of the model, so off unless asked).
    instances: bool = False
    sla: SlaSpec | None = None
    search: Literal["binary", "sweep"] = "binary"
    arrivals: ArrivalKind = "poisson"
    max_queue_delay_s: float = DEFAULT_MAX_QUEUE_DELAY_S
    seed: int = 0
    #: Calibrate the simulation on one real batcher run before predicting (False: predict
    #: from the closed-loop table alone, which under-states a real batcher's tail).
    calibrate: bool = True
    #: Other ways of serving the model, by name: each a zero-argument request at batch 1
    #: (a prepared variant's call bound to the target's inputs), compared with the eager
    #: model's request by `compare_variants`, interleaved, at p50 and p99.
    variants: Mapping[str, Request] = field(default_factory=dict)


def capacity(table: list[ServiceTime], max_batch_size: int | None = None) -> float:
    """The highest rate the table can serve in batches of at most `max_batch_size`: max over
    those b of b / t(b), requests per second."""
    return max(
        row.batch_size / row.seconds
        for row in table
        if row.seconds > 0 and (max_batch_size is None or row.batch_size <= max_batch_size)
    )


def table_from(curve: Curve) -> list[ServiceTime]:
    """t(b) from the batch curve: each point's median call time."""
    return [ServiceTime(batch_size=p.batch_size, seconds=p.p50_s) for p in curve.points]


def predictions(
    table: list[ServiceTime],
    policy: BatchPolicy,
    arrivals: ArrivalKind,
    seed: int,
    bound_s: float | None = None,
    calibration: ServiceCalibration | None = None,
) -> list[LoadRun]:
    """The simulation's percentiles at `PREDICTED_LOADS` of the table's capacity (and its
    goodput against `bound_s` when given), calibrated when `calibration` is given."""
    cap = capacity(table, policy.max_batch_size)
    runs = []
    for load in PREDICTED_LOADS:
        rate = load * cap
        times = arrival_times(arrivals, rate, PREDICTION_REQUESTS, seed=seed)
        trace = (
            simulate_batcher(times, table, policy)
            if calibration is None
            else simulate_calibrated(times, calibration, policy, seed=seed)
        )
        runs.append(
            load_record(
                trace,
                arrivals=arrivals,
                rate=rate,
                seed=seed,
                policy=policy,
                simulated=True,
                bound_s=bound_s,
                calibrated_at_rate=calibration.rate if calibration else None,
            )
        )
    return runs


def warmed_calls(
    request_for: Callable[[int], Request], largest: int, sync: Callable[[], None]
) -> dict[int, Request]:
    """A call for every batch size the batcher may form, each run once: a shape's first call
    sets up its kernels (oneDNN primitives, cuBLAS plans), which is not serving."""
    calls = {b: request_for(b) for b in range(1, largest + 1)}
    for call in calls.values():
        call()
    sync()
    return calls


def real_measure(
    request_for: Callable[[int], Request],
    policy: BatchPolicy,
    sla: SlaSpec,
    *,
    arrivals: ArrivalKind,
    sync: Callable[[], None],
    clock: ServeClock | None = None,
) -> MeasureAt:
    """A `MeasureAt` that serves the model for real under the batcher."""
    calls = warmed_calls(request_for, policy.max_batch_size, sync)
    n = requests_for(sla)
    real = clock or RealClock()

    def measure(rate: float, seed: int) -> SlaPoint:
        times = arrival_times(arrivals, rate, n, seed=seed)
        trace = run_batcher(lambda b: calls[b](), times, policy, real, sync)
        return point_from(trace, rate, sla)

    return measure


def instances_curve(
    target: InferenceTarget, plan: ServePlan, say: Callable[[str], None]
) -> tuple[Curve | None, str | None]:
    """The instances x threads curve over this host's threads, or why there is none."""
    if target.device != "cpu":
        return None, (
            f"no instances x threads curve: it is for a CPU, and this run is on {target.device}"
        )
    if target.spec is None:
        return None, (
            "no instances x threads curve: the model was built in this process only, and an "
            "instance needs a workload's name or file.py:factory to build its own"
        )
    cores = torch.get_num_threads()
    with InstancePool(target.spec, cores, device="cpu", calls=plan.curve_calls) as pool:
        return instance_curve(pool.run, 1, cores, progress=say), None


def search(measure: MeasureAt, sla: SlaSpec, cap: float, plan: ServePlan) -> SlaSearch:
    low, high = SLA_LOW_LOAD * cap, SLA_HIGH_LOAD * cap
    if plan.search == "sweep":
        return sweep_sla(measure, sla, low, high, seed=plan.seed)
    return binary_search_sla(measure, sla, low, high, seed=plan.seed)


def serve_target(
    target: InferenceTarget,
    plan: ServePlan,
    *,
    progress: Callable[[str], None] | None = None,
    set_threads: Callable[[int], None] = torch.set_num_threads,
) -> ServeResult:
    """Measure `target` by `plan` (see module doc)."""
    say = progress or (lambda _: None)
    sync = target.sync()
    say("latency at batch size 1")
    latency = measure_latency(
        target.request(1),
        label=target.name,
        device=target.device,
        budget_s=plan.latency_budget_s,
        sync=sync,
    )
    curves = [
        batch_curve(
            target.request,
            doubling(plan.max_batch_size),
            calls=plan.curve_calls,
            sync=sync,
            progress=say,
        )
    ]
    table = table_from(curves[0])
    if plan.threads and target.device == "cpu":
        before = torch.get_num_threads()
        try:
            curves.append(
                thread_curve(
                    target.request(1),
                    1,
                    doubling(before),
                    set_threads,
                    calls=plan.curve_calls,
                    sync=sync,
                    progress=say,
                )
            )
        finally:
            set_threads(before)
    notes: list[str] = []
    if plan.instances:
        instances, why_not = instances_curve(target, plan, say)
        curves += [instances] if instances else []
        notes += [why_not] if why_not else []
    knee = curves[0].knee_index
    largest = curves[0].points[knee if knee is not None else -1].batch_size
    policy = BatchPolicy(max_batch_size=largest, max_queue_delay_s=plan.max_queue_delay_s)
    bound = plan.sla.bound_s if plan.sla is not None else None
    calibration = None
    if plan.calibrate:
        rate = CALIBRATION_LOAD * capacity(table, largest)
        say(f"calibrating the batching simulation on a real run at {rate:.0f} requests/s")
        calibration, _ = calibration_run(
            warmed_calls(target.request, largest, sync),
            table,
            policy,
            arrivals=plan.arrivals,
            rate=rate,
            requests=calibration_requests(rate),
            seed=plan.seed,
            sync=sync,
        )
    predicted = predictions(table, policy, plan.arrivals, plan.seed, bound, calibration)
    sla_search = None
    if plan.sla is not None:
        say(f"searching for the highest rate that meets {plan.sla.text}")
        measure = real_measure(target.request, policy, plan.sla, arrivals=plan.arrivals, sync=sync)
        sla_search = search(measure, plan.sla, capacity(table, largest), plan)
    comparisons = []
    for name, call in plan.variants.items():
        say(f"comparing {name} with the eager model")
        comparisons.append(
            compare_variants(
                target.request(1),
                call,
                names=("eager", name),
                device=target.device,
                seed=plan.seed,
                sync=sync,
            )
        )
    if not latency.settled:
        notes.append(
            "the latency windows did not settle within the budget: the percentiles moved by more "
            "than 10% between the last windows"
        )
    return ServeResult(
        target=target.name,
        device=target.device,
        latency=latency,
        service_table=table,
        curves=curves,
        sla_search=sla_search,
        predictions=predicted,
        calibration=calibration,
        comparisons=comparisons,
        notes=notes,
    )


__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_QUEUE_DELAY_S",
    "PREDICTED_LOADS",
    "ServePlan",
    "capacity",
    "instances_curve",
    "predictions",
    "real_measure",
    "serve_target",
    "table_from",
    "warmed_calls",
]
