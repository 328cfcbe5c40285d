"""run_result.json (RunResult) and profile.json (ScriptProfile) -> the step breakdown.

Phase fractions are the ones the record holds; a record that only holds per-step timings
shows the median step's own fractions as StepTiming records them (`phases / total_s`), which
is a unit change, not an estimate.
"""

from __future__ import annotations

from torchdoctor.core.steps import PHASES
from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import JsonDict, floats, integer, items, mapping, num, text
from torchdoctor.report.views import KeyValue, PhaseBar, StepSection


def _median_step(steps: list[JsonDict]) -> JsonDict | None:
    timed = sorted((s for s in steps if num(s, "total_s") is not None), key=lambda s: s["total_s"])
    return timed[len(timed) // 2] if timed else None


def _fractions_of(step: JsonDict) -> dict[str, float]:
    total = num(step, "total_s") or 0.0
    phases = floats(mapping(step, "phases"))
    named = {p: phases.get(p, 0.0) / total for p in PHASES} if total > 0 else {}
    return {p: v for p, v in named.items() if v > 0}


def phase_bar(label: str, record: JsonDict) -> PhaseBar | None:
    fractions = floats(mapping(record, "phase_fractions"))
    # A run's phases are timed on its `phase_steps`; a script profile's on its `steps`.
    steps = [
        s for s in items(record, "phase_steps") or items(record, "steps") if isinstance(s, dict)
    ]
    median = _median_step(steps)
    if not fractions and median is not None:
        fractions = _fractions_of(median)
        label = f"{label} (median step)"
    if not fractions:
        return None
    return PhaseBar(label=label, fractions=fractions, total_s=num(median, "total_s"))


def run_result_facts(run: JsonDict) -> list[KeyValue]:
    memory = mapping(run, "memory")
    facts = [
        KeyValue("workload", text(run, "workload") or fmt.NA),
        KeyValue("throughput", fmt.rate(num(run, "samples_per_s"))),
        KeyValue("tokens/s", fmt.rate(num(run, "tokens_per_s"), "tokens/s")),
        KeyValue("steps", fmt.number(len(items(run, "steps")) or None)),
        KeyValue("compile", fmt.seconds(num(run, "compile_s"))),
        KeyValue("first step", fmt.seconds(num(run, "first_step_s"))),
        KeyValue("warm-up", fmt.seconds(num(run, "warmup_s"))),
        KeyValue("peak memory (host RSS)", fmt.nbytes(num(memory, "cpu_peak_rss_bytes"))),
        KeyValue(
            "peak memory (CUDA)",
            # The compared peak (graph pools included) where recorded, else max allocated.
            fmt.nbytes(num(memory, "cuda_peak_bytes") or num(memory, "cuda_max_allocated_bytes")),
        ),
        KeyValue("threads", fmt.number(integer(run, "threads"))),
    ]
    return [f for f in facts if f.value != fmt.NA]


def profile_facts(profile: JsonDict) -> list[KeyValue]:
    argv = items(profile, "argv")
    facts = [
        KeyValue("script", " ".join(str(a) for a in argv) or fmt.NA),
        KeyValue("ended by", text(profile, "ended_by") or fmt.NA),
        KeyValue("exit code", fmt.number(integer(profile, "exit_code"))),
        KeyValue("steps seen", fmt.number(len(items(profile, "steps")))),
        KeyValue("step detection", text(profile, "step_detection") or fmt.NA),
        KeyValue("timing", text(profile, "timing_method") or fmt.NA),
        KeyValue("device", text(profile, "device") or fmt.NA),
        KeyValue("error", text(profile, "error") or fmt.NA),
    ]
    return [f for f in facts if f.value != fmt.NA]


def step_section(records: dict[str, JsonDict]) -> StepSection | None:
    bars: list[PhaseBar] = []
    facts: list[KeyValue] = []
    losses: list[float | None] = []
    diagnosis = records.get("diagnosis")
    if diagnosis is not None and (bar := phase_bar("diagnosis", diagnosis)) is not None:
        bars.append(bar)
    if (run := records.get("run_result")) is not None:
        if (bar := phase_bar("run", run)) is not None:
            bars.append(bar)
        facts += run_result_facts(run)
        losses = [num({"v": v}, "v") for v in items(run, "losses")]
    if (profile := records.get("profile")) is not None:
        if (bar := phase_bar("script", profile)) is not None:
            bars.append(bar)
        facts += profile_facts(profile)
        if not losses:
            losses = [num(s, "loss") for s in items(profile, "steps") if isinstance(s, dict)]
    if not bars and not facts:
        return None
    return StepSection(bars=bars, facts=facts, losses=losses)
