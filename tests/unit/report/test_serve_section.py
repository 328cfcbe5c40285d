"""The serving section: serve.json in every form of the report, and its chart."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import numpy as np
from golden_cases import render_forms
from rich.console import Console

from torchdoctor.core import rundir
from torchdoctor.report.terminal.sections import render_sections
from torchdoctor.serve import (
    BatchPolicy,
    LatencyMeasurement,
    LatencyWindow,
    ServeResult,
    VariantComparison,
    VirtualClock,
    arrival_times,
    compare_percentiles,
    run_batcher,
    service_time,
    summarize_latencies,
)
from torchdoctor.serve.calibration import calibrate
from torchdoctor.serve.curves import batch_curve, doubling
from torchdoctor.serve.instances import InstanceRun, instance_curve
from torchdoctor.serve.run import predictions, table_from
from torchdoctor.serve.sla import binary_search_sla, parse_sla, simulated_measure


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def serve_record(sla_text: str = "p99<=20ms") -> ServeResult:
    """A serve record built by the stage's own functions on a virtual clock (no model run)."""
    clock = Clock()

    def request_for(b: int):  # type: ignore[no-untyped-def]
        def call() -> None:
            clock.now += 0.001 + b / 4000.0

        return call

    curve = batch_curve(request_for, doubling(64), calls=5, clock=clock)
    table = table_from(curve)
    policy = BatchPolicy(8, 0.0)
    sla = parse_sla(sla_text)
    latencies = np.random.default_rng(0).lognormal(-7, 0.3, size=600)
    latency = LatencyMeasurement(
        label="mlp",
        first_call_s=0.2,
        warmup_calls=3,
        warmup_s=0.003,
        windows=[LatencyWindow(n=100, p50_s=0.001, p99_s=0.002)] * 6,
        settled=True,
        summary=summarize_latencies(latencies),
        latencies_s=[float(x) for x in latencies],
    )
    search = binary_search_sla(simulated_measure(table, policy, sla), sla, 50.0, 4000.0)
    # One "real" batcher run on virtual time, 20 us slower per batch than the table says.
    virtual = VirtualClock()
    trace = run_batcher(
        lambda b: virtual.advance(service_time(table, b) + 20e-6),
        arrival_times("poisson", 500.0, 300, seed=0),
        policy,
        virtual,
    )
    calibration = calibrate(trace, table, arrivals="poisson", rate=500.0)

    def instances_run(instances: int, threads: int) -> list[InstanceRun]:
        call = 0.001 * (0.5 + 0.5 / threads) * (1 + 0.1 * (instances - 1))
        return [InstanceRun([call] * 20, 0.0, 20 * call)] * instances

    instances = instance_curve(instances_run, 1, 4)
    return ServeResult(
        target="mlp",
        device="cpu",
        latency=latency,
        service_table=table,
        curves=[curve, instances],
        sla_search=search,
        predictions=predictions(table, policy, "poisson", 0, sla.bound_s, calibration),
        calibration=calibration,
        comparisons=[_comparison()],
    )


def _comparison() -> VariantComparison:
    rng = np.random.default_rng(1)
    eager = rng.lognormal(-7, 0.1, size=500)
    return VariantComparison(
        baseline="eager",
        candidate="inference_mode",
        rounds=25,
        requests_per_side=500,
        confidence=0.95,
        min_effect=0.02,
        by_percentile=compare_percentiles(eager, eager / 2),
    )


def test_the_serving_section_shows_latency_curves_and_the_sla(tmp_path: Path) -> None:
    run_dir = rundir.new_run_dir("serve", "mlp", out=tmp_path / "run")
    record = serve_record()
    record.write(run_dir / rundir.SERVE)
    forms = render_forms(run_dir, tmp_path)

    md = forms["md"]
    assert "## Serving" in md and "| SLA | p99&lt;=20ms |" in md
    assert "| SLA status | VALID |" in md
    assert "### Request latency at batch size 1" in md and "| p99 |" in md
    assert "(knee)" in md and "Predicted by the batching simulation" in md
    assert "calibrated on one real batcher run at 500.0 requests/s (300 requests)" in md
    assert "### Throughput and latency vs instances x threads" in md and "| 2 x 2 (knee) |" in md
    assert "| goodput (within the SLA) |" in md
    assert "### Variants against the eager model" in md and "| inference\\_mode | p99 |" in md
    assert "| faster |" in md
    html = forms["html"]
    assert '<section id="serving">' in html and 'data-chart="serve"' in html
    assert json.loads(forms["json"])["records"]["serve"] == record.to_json_dict()

    out = StringIO()
    render_sections(Console(file=out, width=120, color_system=None), run_dir, only=("serving",))
    assert "VALID" in out.getvalue() and "Throughput and latency vs batch size" in out.getvalue()


def test_an_sla_nothing_meets_shows_invalid_and_the_closest_point(tmp_path: Path) -> None:
    run_dir = rundir.new_run_dir("serve", "mlp", out=tmp_path / "run")
    serve_record("p99<=10us").write(run_dir / rundir.SERVE)
    md = render_forms(run_dir, tmp_path)["md"]
    assert "| SLA status | INVALID |" in md and "| closest point |" in md
    assert "no rate measured met p99&lt;=10us" in md
