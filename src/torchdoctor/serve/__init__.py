"""Stage: serve. Inference under a latency objective: requests, not steps.

- `measure_latency(call)` -> `LatencyMeasurement`: per-request latencies after a device sync,
  the first call and warm-up apart, windows until p50 and p99 settle, LoadGen's minimum count
  for the tail, order-statistic intervals (`summarize_latencies`, `min_samples`).
- `compare_variants(a, b)` -> `VariantComparison`: two callables interleaved, a verdict on
  p50 and p99.
- `arrival_times(kind, rate, n)`: seeded constant, Poisson and gamma arrivals; `run_batcher`
  serves them open-loop (from each scheduled arrival) under a `BatchPolicy` on a
  `ServeClock` (`RealClock`, or `VirtualClock` in tests); `simulate_batcher` runs the same
  policy on virtual time from a service-time table t(b); `calibrate` fits from one real run's
  trace what the table misses (the loop's overhead, the sleeps' overshoot, service after idling)
  and `simulate_calibrated` predicts other rates with it. `service_probe.probe_service`
  measures the service as a distribution, closed-loop (every batch size, after idle gaps, on
  the batcher's thread and clock) right beside the run it is to predict, and
  `service_probe.simulate_sampled` draws each batch's service from it (the paired prediction
  of benchmarks/bench_serve_batching.py).
- `parse_sla("p99<=20ms")`, `search_sla(measure_at, sla)` -> `SlaSearch`: the highest rate
  whose percentile stays under the bound, by a sweep or a binary search, then confirmed; the
  binary search re-measures a doubtful failure and pools its runs before trusting it.
- `batch_curve`, `thread_curve` -> `Curve`: throughput and percentiles, the knee marked.
- `load_target(name_or_factory)` -> `InferenceTarget`; `serve_target(...)` -> `ServeResult`:
  what `torchdoctor serve` runs.

- `prepare_variant(name, model, inputs)` -> `PreparedVariant`: the model served as a variant
  (no_grad, inference_mode, compile, export, TorchScript, int8, bf16, ...), its setup time
  apart and its accuracy gated against fp32 eager (`VARIANTS`); `torchdoctor serve --variants`
  times those that pass against the eager model (`ServePlan.variants`).
- `generate.profile_generation(model)`: time to first token and per output token of a
  KV-cached decoder (`workloads.TinyGPT`), against prompt length and batch.
"""

from torchdoctor.serve._percentiles import (
    INTERVAL_CONFIDENCE,
    PERCENTILES,
    TAIL_CONFIDENCE,
    min_samples,
    order_statistic_interval,
    percentile,
)
from torchdoctor.serve.arrivals import ARRIVAL_KINDS, arrival_times
from torchdoctor.serve.batcher import (
    BatchPolicy,
    LoadTrace,
    load_record,
    run_batcher,
    service_time,
    simulate_batcher,
)
from torchdoctor.serve.calibration import calibrate, calibration_run, simulate_calibrated
from torchdoctor.serve.clock import RealClock, ServeClock, VirtualClock
from torchdoctor.serve.compare import compare_percentiles, compare_variants
from torchdoctor.serve.curves import batch_curve, doubling, knee_index, thread_curve
from torchdoctor.serve.latency import measure_latency, summarize_latencies, windows_agree
from torchdoctor.serve.records import (
    Curve,
    CurvePoint,
    LatencyMeasurement,
    LatencySummary,
    LatencyWindow,
    LoadRun,
    PercentileComparison,
    PercentileEstimate,
    ResidualQuantiles,
    ServeResult,
    ServiceCalibration,
    ServiceTime,
    SlaPoint,
    SlaSearch,
    SlaSpec,
    VariantComparison,
)
from torchdoctor.serve.run import ServePlan, capacity, predictions, serve_target, table_from
from torchdoctor.serve.sla import (
    binary_search_sla,
    parse_sla,
    simulated_measure,
    sweep_sla,
)
from torchdoctor.serve.target import InferenceTarget, Request, load_target
from torchdoctor.serve.variants import (
    VARIANTS,
    PreparedVariant,
    VariantError,
    VariantSetup,
    VariantUnavailable,
    prepare_variant,
    variant_spec,
)

__all__ = [
    "ARRIVAL_KINDS",
    "INTERVAL_CONFIDENCE",
    "PERCENTILES",
    "TAIL_CONFIDENCE",
    "VARIANTS",
    "BatchPolicy",
    "Curve",
    "CurvePoint",
    "InferenceTarget",
    "LatencyMeasurement",
    "LatencySummary",
    "LatencyWindow",
    "LoadRun",
    "LoadTrace",
    "PercentileComparison",
    "PercentileEstimate",
    "PreparedVariant",
    "RealClock",
    "Request",
    "ResidualQuantiles",
    "ServeClock",
    "ServePlan",
    "ServeResult",
    "ServiceCalibration",
    "ServiceTime",
    "SlaPoint",
    "SlaSearch",
    "SlaSpec",
    "VariantComparison",
    "VariantError",
    "VariantSetup",
    "VariantUnavailable",
    "VirtualClock",
    "arrival_times",
    "batch_curve",
    "binary_search_sla",
    "calibrate",
    "calibration_run",
    "capacity",
    "compare_percentiles",
    "compare_variants",
    "doubling",
    "knee_index",
    "load_record",
    "load_target",
    "measure_latency",
    "min_samples",
    "order_statistic_interval",
    "parse_sla",
    "percentile",
    "predictions",
    "prepare_variant",
    "run_batcher",
    "serve_target",
    "service_time",
    "simulate_batcher",
    "simulate_calibrated",
    "simulated_measure",
    "summarize_latencies",
    "sweep_sla",
    "table_from",
    "thread_curve",
    "variant_spec",
    "windows_agree",
]
