"""A complete run folder built from records, for the report's tests (no torch run needed).

Records whose stage has landed are built with their own classes; the others (env, diagnosis,
analysis) are written in their documented JSON form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchdoctor.analyze.records import OpRow, StepSummary, SyncStats, TraceAnalysis
from torchdoctor.collect.script_profile import ScriptProfile
from torchdoctor.core import rundir
from torchdoctor.core.env import Ceilings, EnvFingerprint
from torchdoctor.core.steps import StepTiming
from torchdoctor.diagnose import Diagnosis, Prescription
from torchdoctor.diagnose.findings import make_finding
from torchdoctor.engine import RunResult
from torchdoctor.engine.peak_memory import MemoryStats
from torchdoctor.measure import summarize
from torchdoctor.tune.config import CONFIG_FILE as TUNE_CONFIG_FILE
from torchdoctor.tune.config import TuneConfig
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.records import (
    Ladder,
    ParetoPoint,
    Rejection,
    Rung,
    TrialResult,
    TuneResult,
)

EVIL_OP = "<script>alert(1)</script>"
EVIL_SCRIPT = "train<b>bold</b>|`x`.py"


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def env_json() -> dict[str, Any]:
    fingerprint = EnvFingerprint(
        cpu_model="Test CPU @ 2.0GHz",
        cpu_arch="x86_64",
        cores_physical=2,
        cores_logical=2,
        cpu_flags=["avx2", "fma"],
        os="Linux",
        python="3.11.7",
        torch_version="2.13.0+cpu",
        torch_cuda=None,
        torch_hip=None,
        torch_mkl=True,
        torch_mkldnn=True,
        torch_openmp=True,
        torch_blas="mkl",
        intra_op_threads=2,
    )
    ceilings = Ceilings(
        device="cpu",
        device_name="Test CPU",
        peak_flops={"float32": 1.2e11, "bfloat16": 6.0e10},
        mem_bandwidth_bytes_per_s=1.0e10,
        source="measured",
        fingerprint_key="abc123",
        measured_at="2024-01-01T00:00:00+00:00",
    )
    return {"fingerprint": fingerprint.to_json_dict(), "ceilings": ceilings.to_json_dict()}


def diagnosis_record() -> Diagnosis:
    findings = [
        make_finding(
            rule_id="zero_grad_set_to_none",
            title="zero_grad writes zeros",
            summary="zero_grad(set_to_none=False) fills every gradient with zeros each step.",
            bottleneck="optimizer",
            share=0.02,
            evidence={"calls": 20},
            prescription=Prescription(knobs={"set_to_none": True}, code_change="use None"),
            confidence=0.6,
        ),
        make_finding(
            rule_id="dataloader_wait",
            title="The DataLoader cannot keep up",
            summary=f"The model waits for data 42% of each step in {EVIL_SCRIPT}.",
            bottleneck="data_loading",
            share=0.42,
            evidence={"data_wait_share": 0.42, "num_workers": 0},
            prescription=Prescription(
                knobs={"num_workers": 2},
                code_change=f"DataLoader(..., num_workers=2) in {EVIL_SCRIPT}",
            ),
            confidence=0.9,
        ),
    ]
    return Diagnosis(
        source="script",
        target=EVIL_SCRIPT,
        device="cpu",
        step_count=20,
        median_step_s=0.21,
        p95_step_s=0.25,
        phase_fractions={
            "data_wait": 0.42,
            "h2d": 0.0,
            "forward": 0.2,
            "backward": 0.25,
            "optimizer": 0.08,
            "other": 0.05,
        },
        regime="overhead",
        regime_evidence={"median_intensity": 3.1},
        primary_bottleneck="data_loading",
        primary_share=0.42,
        findings=findings,
    )


def analysis_record() -> TraceAnalysis:
    ops = [
        ("aten::addmm", 200, 80_000.0, 4.0e11, 60.0, 5.0e10, "compute"),
        ("aten::add_", 400, 30_000.0, 1.0e9, 0.25, 2.0e9, "memory"),
        (EVIL_OP, 10, 20_000.0, 5.0e8, 0.5, 1.0e9, "memory"),
        ("aten::relu", 100, 5_000.0, 2.0e8, 0.2, 8.0e8, "overhead"),
    ]
    return TraceAnalysis(
        source="trace.json.gz",
        device_name=None,
        rank=None,
        world_size=None,
        events=1234,
        device_timeline=None,
        step_breakdown={"CPU Exec": 55.0, "DataLoader": 40.0, "Other": 5.0},
        steps=StepSummary(count=5, mean_us=210_000.0, basis="host"),
        ops=[
            OpRow(
                name=name,
                count=count,
                self_host_us=us,
                total_host_us=us,
                device_us=0.0,
                flops=flops,
                bytes=flops / intensity,
                intensity=intensity,
                achieved_flops_per_s=rate,
                achieved_bytes_per_s=rate / intensity,
                bound=bound,
            )
            for name, count, us, flops, intensity, rate, bound in ops
        ],
        launches=None,
        syncs=SyncStats(total=5, per_step=1.0, by_name={"aten::item": 5}, copies=[]),
        idle=None,
        ceilings=None,
        ceilings_note="measured ceilings of this machine",
        warnings=[],
        ranks=[],
    )


def profile_record() -> ScriptProfile:
    steps = [
        StepTiming(
            index=i,
            total_s=0.2 + 0.01 * (i % 3),
            phases={"data_wait": 0.08, "forward": 0.04, "backward": 0.05, "optimizer": 0.02},
            loss=2.0 - 0.05 * i,
            samples=32,
        )
        for i in range(10)
    ]
    return ScriptProfile(
        argv=[EVIL_SCRIPT, "--lr", "0.1"], steps=steps, step_detection="optimizer_hook"
    )


def trial(
    key: str,
    step: int,
    change: dict[str, Any],
    outcome: Outcome,
    status: str = "ok",
    reason: str = "",
    rate: float | None = 100.0,
    losses: list[float] | None = None,
) -> TrialResult:
    return TrialResult(
        key=key,
        kind="baseline" if outcome is Outcome.BASELINE else "ladder",
        step=step,
        change=change,
        recipe={"batch_size": 32, **change},
        status=status,  # type: ignore[arg-type]
        decision=outcome.decision,
        outcome=outcome,
        reason=reason,
        samples_per_s=rate,
        speedup_vs_best=None if rate is None else rate / 100.0,
        speedup_vs_best_ci=None if rate is None else (rate / 105.0, rate / 95.0),
        peak_memory_bytes=200 * 2**20,
        losses=losses or [],
    )


def trials() -> list[TrialResult]:
    base_losses = [2.0 - 0.05 * i for i in range(20)]
    return [
        trial("t000", 0, {}, Outcome.BASELINE, losses=base_losses),
        trial(
            "t001",
            1,
            {"num_workers": 2},
            Outcome.KEPT,
            rate=160.0,
            losses=[v + 0.01 for v in base_losses],
        ),
        trial(
            "t002",
            2,
            {"compile": "default"},
            Outcome.KEPT,
            rate=330.0,
            losses=[v - 0.01 for v in base_losses],
        ),
        trial(
            "t003",
            3,
            {"channels_last": True},
            Outcome.NOT_FASTER,
            rate=101.0,
            reason="no significant difference: CI [0.98, 1.04] includes 1",
        ),
        trial(
            "t004",
            3,
            {"precision": EVIL_OP},
            Outcome.CRASHED,
            status="crash",
            rate=None,
            reason=f"RuntimeError: bad value {EVIL_OP}",
        ),
    ]


#: The notes a tune leaves for its reader: every form of the report shows each one.
TUNE_NOTES = (
    "speedup from 4 fresh process pairs of the best and the baseline, each timed as "
    "`torchdoctor run` times a recipe",
    "the budget ran out during compile=default's trial: its A/B stopped at the look it had",
    "the machine was disturbed during 1 trial: other work kept 0.9 of 2 cores busy",
)


def tune_config_record() -> TuneConfig:
    """The study's settings as a tune writes them first (its plan's confidence: 95%)."""
    return TuneConfig(workload="cnn", baseline_recipe={"batch_size": 32}, budget_s=600.0)


def tune_record(run_dir: Path) -> TuneResult:
    rungs = [
        Rung(
            step=0,
            change={},
            samples_per_s=100.0,
            speedup_vs_previous=1.0,
            speedup_vs_previous_ci=(1.0, 1.0),
            speedup_vs_baseline=1.0,
            speedup_vs_baseline_ci=(1.0, 1.0),
            peak_memory_bytes=200 * 2**20,
            loss_deviation=0.0,
            verdict="baseline",
            scaled_samples_per_s=100.0,
        ),
        # Trials minutes apart on a host whose speed drifts: each rung's raw rates are its
        # own A/B's; the scaled rate puts every row on the baseline's scale.
        Rung(
            step=1,
            change={"num_workers": 2},
            samples_per_s=160.0,
            best_samples_per_s=100.0,
            scaled_samples_per_s=160.0,
            speedup_vs_previous=1.6,
            speedup_vs_previous_ci=(1.5, 1.7),
            speedup_vs_baseline=1.6,
            speedup_vs_baseline_ci=(1.5, 1.7),
            peak_memory_bytes=260 * 2**20,
            loss_deviation=0.003,
            verdict="faster",
        ),
        Rung(
            step=2,
            change={"compile": "default"},
            samples_per_s=300.0,
            best_samples_per_s=145.6,
            scaled_samples_per_s=330.0,
            speedup_vs_previous=2.06,
            speedup_vs_previous_ci=(1.9, 2.2),
            speedup_vs_baseline=3.3,
            speedup_vs_baseline_ci=(3.0, 3.5),
            peak_memory_bytes=300 * 2**20,
            loss_deviation=0.004,
            verdict="faster",
        ),
    ]
    rejected = [
        Rejection(
            change={"channels_last": True},
            status="ok",
            reason="no significant difference",
            speedup_vs_best=1.01,
            speedup_vs_best_ci=(0.98, 1.04),
            samples_per_s=520.2,
            best_samples_per_s=515.0,
            scaled_samples_per_s=333.3,
        ),
        Rejection(
            change={"precision": EVIL_OP},
            status="crash",
            reason=f"RuntimeError: bad value {EVIL_OP}",
        ),
    ]
    return TuneResult(
        workload="cnn",
        objective="throughput",
        device="cpu",
        run_dir=str(run_dir),
        baseline_recipe={"batch_size": 32},
        best_recipe={"batch_size": 32, "num_workers": 2, "compile": "default"},
        baseline_samples_per_s=100.0,
        best_samples_per_s=330.0,
        speedup=3.3,
        speedup_ci=(3.0, 3.5),
        speedup_from="final_ab",
        ladder=Ladder(rungs=rungs, rejected=rejected),
        pareto_front=[
            ParetoPoint(
                recipe={"batch_size": 32}, samples_per_s=330.0, peak_memory_bytes=300 * 2**20
            ),
            ParetoPoint(
                recipe={"batch_size": 16}, samples_per_s=250.0, peak_memory_bytes=180 * 2**20
            ),
        ],
        n_trials=5,
        n_failed=1,
        budget_s=600.0,
        elapsed_s=420.0,
        budget_exhausted=True,
        notes=list(TUNE_NOTES),
    )


def make_run(root: Path, *, complete: bool = True, kind: str = "demo") -> Path:
    """A demo run folder with every record (or, complete=False, a killed run's leftovers)."""
    run_dir = rundir.new_run_dir(kind, EVIL_SCRIPT, out=root / "run")  # type: ignore[arg-type]
    _write(run_dir / rundir.ENV, env_json())
    profile_record().write(run_dir / rundir.PROFILE)
    tune_config_record().write(run_dir / TUNE_CONFIG_FILE)
    if not complete:
        return run_dir
    diagnosis_record().write(run_dir / rundir.DIAGNOSIS)
    analysis_record().write(run_dir / rundir.ANALYSIS)
    (run_dir / rundir.TRIALS).mkdir()
    for t in trials():
        t.write(run_dir / rundir.TRIALS / f"{t.key}.json")
    tune_record(run_dir).write(run_dir / rundir.TUNE)
    rundir.finish_run_dir(run_dir)
    return run_dir


def run_result_record() -> RunResult:
    steps = profile_record().steps
    return RunResult(
        workload="mlp",
        device="cpu",
        seed=0,
        compiled=False,
        batch_size=32,
        grad_accum=1,
        samples_per_step=32,
        warmup_steps=2,
        first_step_s=0.5,
        warmup_s=0.7,
        compile_s=0.0,
        steps=steps,
        samples_per_s=152.4,
        step_time=summarize([s.total_s for s in steps]),
        phase_fractions={"data_wait": 0.4, "forward": 0.2, "backward": 0.25, "optimizer": 0.15},
        memory=MemoryStats(
            cpu_peak_rss_bytes=300 * 2**20, cpu_peak_is_run_scoped=True, cpu_rss_end_bytes=None
        ),
        losses=[s.loss for s in steps if s.loss is not None],
        threads=2,
    )


def make_plain_run(root: Path) -> Path:
    """What `torchdoctor run` leaves: a manifest and a RunResult."""
    run_dir = rundir.new_run_dir("run", "mlp", out=root / "plain")
    run_result_record().write(run_dir / rundir.RUN_RESULT)
    rundir.finish_run_dir(run_dir)
    return run_dir
