"""tune.json (TuneResult) and trials/ (TrialResult, Confirmation) -> ladder, trials, Pareto
front, parity."""

from __future__ import annotations

from dataclasses import dataclass, replace

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import (
    JsonDict,
    get,
    integer,
    items,
    mapping,
    num,
    pair,
    text,
)
from torchdoctor.report.views import (
    KeyValue,
    LadderSection,
    LossCurve,
    ParetoPointView,
    RejectedView,
    RungView,
    TrialView,
)

#: What the ladder's throughput columns mean, under its tables in every form.
LADDER_CAPTION = (
    "Throughput (baseline scale): the baseline's measured samples/s times the change's "
    "speedup, so every row reads on one scale. Its A/B: both arms of the paired comparison "
    "that decided it, samples/s as measured then; trials run minutes apart on a host whose "
    "speed drifts, so compare within a row, not down the column. Raw figures: the trials "
    "table and tune.json."
)

#: Schema id of the final A/B's record (`torchdoctor.tune.records.Confirmation`).
CONFIRMATION_SCHEMA = "torchdoctor/tune_confirmation"


@dataclass(frozen=True)
class Outcome:
    """How a trial ended, as the page shows it: the run's status, the ladder's decision, why."""

    status: str
    decision: str
    reason: str


def trial_outcome(data: JsonDict) -> Outcome:
    """The outcome of a trial record (a `TrialResult`, the final A/B's `Confirmation`, or a
    ladder's `Rejection`).

    Every read of a trial's outcome goes through here, so a change to how the record states
    it changes this function only. A confirmation has no decision of its own: it measured
    the best recipe, or failed to.
    """
    status = text(data, "status") or ""
    if text(data, "schema") == CONFIRMATION_SCHEMA:
        decision = "measured" if status == "ok" else "failed"
    else:
        decision = text(data, "decision") or ""
    return Outcome(status=status, decision=decision, reason=text(data, "reason") or "")


def _rung(data: JsonDict) -> RungView:
    ci = pair(get(data, "speedup_vs_baseline_ci")) or (float("nan"), float("nan"))
    return RungView(
        step=integer(data, "step") or 0,
        change=fmt.change(mapping(data, "change")),
        samples_per_s=num(data, "samples_per_s") or 0.0,
        speedup=num(data, "speedup_vs_baseline") or 0.0,
        ci_low=ci[0],
        ci_high=ci[1],
        speedup_vs_previous=num(data, "speedup_vs_previous"),
        peak_memory_bytes=integer(data, "peak_memory_bytes"),
        loss_deviation=num(data, "loss_deviation"),
        verdict=text(data, "verdict") or "",
        scaled_samples_per_s=num(data, "scaled_samples_per_s"),
        best_samples_per_s=num(data, "best_samples_per_s"),
    )


def _rejected(data: JsonDict) -> RejectedView:
    ci = pair(get(data, "speedup_vs_best_ci"))
    outcome = trial_outcome(data)  # a rejection states its outcome as a trial does
    return RejectedView(
        change=fmt.change(mapping(data, "change")),
        status=outcome.status,
        reason=outcome.reason,
        speedup=num(data, "speedup_vs_best"),
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        scaled_samples_per_s=num(data, "scaled_samples_per_s"),
        samples_per_s=num(data, "samples_per_s"),
        best_samples_per_s=num(data, "best_samples_per_s"),
    )


def ladder_section(tune: JsonDict) -> LadderSection:
    ladder = mapping(tune, "ladder")
    ci = pair(get(tune, "speedup_ci")) or (float("nan"), float("nan"))
    facts = [
        KeyValue("device", text(tune, "device") or fmt.NA),
        KeyValue("trials", fmt.number(integer(tune, "n_trials"))),
        KeyValue("failed trials", fmt.number(integer(tune, "n_failed"))),
        KeyValue("reused trials (resume)", fmt.number(integer(tune, "n_reused"))),
        KeyValue("budget", fmt.seconds(num(tune, "budget_s"))),
        KeyValue("elapsed", fmt.seconds(num(tune, "elapsed_s"))),
        KeyValue("budget exhausted", fmt.number(get(tune, "budget_exhausted"))),
    ]
    facts += [
        KeyValue(f"quality band ({text(b, 'safety') or '?'})", _band(b))
        for b in items(tune, "quality_bands")
        if isinstance(b, dict)
    ]
    return LadderSection(
        workload=text(tune, "workload") or fmt.NA,
        objective=text(tune, "objective") or "throughput",
        baseline_samples_per_s=num(tune, "baseline_samples_per_s") or 0.0,
        best_samples_per_s=num(tune, "best_samples_per_s") or 0.0,
        speedup=num(tune, "speedup") or 0.0,
        ci_low=ci[0],
        ci_high=ci[1],
        rungs=[_rung(r) for r in items(ladder, "rungs") if isinstance(r, dict)],
        rejected=[_rejected(r) for r in items(ladder, "rejected") if isinstance(r, dict)],
        facts=facts,
        notes=[str(n) for n in items(tune, "notes")],
        caption=LADDER_CAPTION,
    )


def _band(band: JsonDict) -> str:
    """A quality band as the page states it: where a candidate's late loss must land, and
    which bound set it (the reference runs' statistic or the safety class's floor)."""
    low, high = num(band, "low"), num(band, "high")
    where = f"at most {high:.4g}" if low is None and high is not None else (
        f"{low:.4g}..{high:.4g}" if low is not None and high is not None else fmt.NA
    )  # fmt: skip
    stat, share = num(band, "statistic_half"), num(band, "floor_share")
    if text(band, "set_by") == "floor" and share is not None:
        spread = f", wider than the statistic's +-{stat:.2g}" if stat is not None else ""
        return f"{where} (set by the floor, {share:.3g} of the mean{spread})"
    return f"{where} (set by the statistic, the reference runs' prediction interval)"


def trial_view(data: JsonDict) -> TrialView:
    if text(data, "schema") == CONFIRMATION_SCHEMA:
        return confirmation_view(data)
    change = fmt.change(mapping(data, "change"))
    return _trial_view(data, text(data, "kind") or "", change, "speedup_vs_best")


#: The final A/B's row in the trials table: what it measured, not a recipe of its own.
CONFIRMATION_CHANGE = "final A/B: best recipe vs baseline, fresh process pairs"


def confirmation_view(data: JsonDict) -> TrialView:
    """The final A/B (a `Confirmation`): the best recipe's speedup over the baseline, its
    throughput both arms (baseline -> best), as the headline states them."""
    view = _trial_view(data, "final A/B", CONFIRMATION_CHANGE, "speedup")
    arms = fmt.ab_rates(num(data, "baseline_samples_per_s"), num(data, "samples_per_s"))
    throughput = f"{arms} samples/s" if arms != fmt.NA else fmt.rate(view.samples_per_s)
    return replace(view, throughput=throughput)


def _trial_view(data: JsonDict, kind: str, change: str, speedup_key: str) -> TrialView:
    """The fields a `TrialResult` and a `Confirmation` record under the same names; the speedup
    is under `speedup_key`, its interval under `<speedup_key>_ci`. A confirmation compiles
    nothing of its own, so it has no compile time."""
    ci = pair(get(data, f"{speedup_key}_ci"))
    outcome = trial_outcome(data)
    key = text(data, "key") or ""
    return TrialView(
        key=key,
        kind=kind,
        step=integer(data, "step") or 0,
        change=change,
        status=outcome.status,
        decision=outcome.decision,
        reason=outcome.reason,
        samples_per_s=num(data, "samples_per_s"),
        speedup=num(data, speedup_key),
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        peak_memory_bytes=integer(data, "peak_memory_bytes"),
        compile_s=num(data, "compile_s") if speedup_key != "speedup" else None,
        throughput=fmt.rate(num(data, "samples_per_s")),
        label=fmt.trial_label(key),
    )


def trial_views(trials: list[JsonDict]) -> list[TrialView]:
    views = [trial_view(t) for t in trials]
    return sorted(views, key=lambda t: (t.step, t.key))


def pareto_points(tune: JsonDict) -> list[ParetoPointView]:
    points = []
    for p in items(tune, "pareto_front"):
        if isinstance(p, dict):
            points.append(
                ParetoPointView(
                    recipe=fmt.change(mapping(p, "recipe")),
                    samples_per_s=num(p, "samples_per_s") or 0.0,
                    peak_memory_bytes=integer(p, "peak_memory_bytes") or 0,
                )
            )
    return sorted(points, key=lambda p: p.peak_memory_bytes)


def loss_curves(trials: list[JsonDict]) -> list[LossCurve]:
    """The baseline's loss trajectory and each kept change's, as the trials recorded them."""
    curves: list[LossCurve] = []
    for t in sorted(trials, key=lambda t: integer(t, "step") or 0):
        decision = trial_outcome(t).decision
        losses = [num({"v": v}, "v") for v in items(t, "losses")]
        if decision not in ("baseline", "kept") or not any(v is not None for v in losses):
            continue
        name = "baseline" if decision == "baseline" else f"+ {fmt.change(mapping(t, 'change'))}"
        curves.append(LossCurve(label=name, losses=losses))
    return curves
