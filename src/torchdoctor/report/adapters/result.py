"""tune.json (with tune_config.json) -> the result a tune's report leads with: what changed, how
much faster, how sure, at what quality; why its two speedups differ; every note; the re-check."""

from __future__ import annotations

import shlex

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
from torchdoctor.report.views import KeyValue, ResultView

#: Why the headline and the ladder's last row are two numbers, said where both stand.
SPEEDUPS = (
    "Two speedups: the headline is the final A/B, the best recipe against the baseline in "
    "fresh process pairs run side by side at the end; the ladder's last row is the product "
    "of its rungs, each an A/B against the best of its time, minutes apart on a host whose "
    "speed drifts. They measure the same recipe two ways and need not agree; the headline "
    "is the claim."
)
#: The same where the budget left no room for the final A/B: the headline is the ladder's.
CHAINED = (
    "One speedup: the budget left no room for the final A/B (the notes say why), so the "
    "headline is the ladder's last row, the product of its rungs, each an A/B against the "
    "best of its time. The re-check below measures the recipe end to end."
)
#: Where the final A/B refuted the ladder's best: the baseline is recommended.
REFUTED = (
    "The ladder's last row is the product of its rungs, each an A/B against the best of its "
    "time; the final A/B, the best recipe against the baseline in fresh process pairs, did "
    "not find that gain, so the baseline recipe is recommended and the headline is 1.00x."
)
#: A script's command where the tune was of a built-in workload (--vs-baseline runs scripts).
SCRIPT_PLACEHOLDER = "python train.py ARGS"


def _legend(confidence: float | None) -> str:
    headline = (
        f"the headline's at the study's {fmt.level(confidence)} confidence"
        if confidence is not None
        else "the headline's at the study's confidence "
        "(level unknown: no readable tune_config.json)"
    )
    return (
        f"Intervals: {headline}; each ladder A/B's at the level of the look that decided it, "
        "higher than the study's because a sequential test's looks share its error budget "
        "(a rejection's reason states its level); a ladder row's interval multiplies its "
        "rungs'."
    )


def _quality(rung: JsonDict | None) -> str:
    deviation = num(rung, "loss_deviation") if rung else None
    if deviation is None:
        return "loss not compared"
    return f"late loss {fmt.signed_percent(deviation)} from the baseline's"


def recheck_commands(config: JsonDict | None, run: str) -> list[str]:
    """The command that measures the claim again: the best recipe against the job as it is, in
    fresh process pairs (`torchdoctor run --recipe RUN --vs-baseline -- COMMAND`)."""
    argv = [str(a) for a in items(config, "command")]
    head = f"torchdoctor run --recipe {shlex.quote(run)} --vs-baseline --"
    if argv:
        module = ["python", "-m"] if get(config, "module") is True else ["python"]
        script = argv if argv[0] == "torchrun" else [*module, *argv]
        return [f"{head} {shlex.join(script)}"]
    return [f"{head} {SCRIPT_PLACEHOLDER}"]


def _fit_result(tune: JsonDict, fit: JsonDict) -> ResultView:
    """`--objective fit`: the best recipe's peak against the memory cap (the memory ladder
    below has every step)."""
    best = fmt.change(mapping(tune, "best_recipe"))
    peak, cap = num(fit, "peak_memory_bytes"), num(fit, "max_memory_bytes")
    fits = get(fit, "fits") is True
    sentence = (
        f"Fitting {text(tune, 'workload') or fmt.NA} under {fmt.nbytes(cap)}: the best recipe "
        f"({best}) peaks at {fmt.nbytes(peak)}, {'under' if fits else 'over'} the cap."
    )
    rows = [
        KeyValue("best recipe", best),
        KeyValue(
            "peak memory, baseline → best",
            (f"{fmt.nbytes(num(fit, 'baseline_peak_bytes'))} → {fmt.nbytes(peak)}"),
        ),
        KeyValue("memory cap", fmt.nbytes(cap)),
        KeyValue("fits", "yes" if fits else "no"),
    ]
    return ResultView(
        sentence=sentence,
        rows=rows,
        speedups="",
        legend="",
        notes=[str(n) for n in items(tune, "notes")],
    )


def speedup_from(tune: JsonDict) -> str:
    """Where the headline comes from (`TuneResult.speedup_from`): "final_ab", "ladder" or
    "none". A record written before the field was kept says it in its figures: a kept ladder
    whose best recipe is the baseline's was refuted by the final A/B, and a headline equal to
    the ladder's last row, interval and all, is that row."""
    said = text(tune, "speedup_from")
    if said:
        return said
    rungs = [r for r in items(mapping(tune, "ladder"), "rungs") if isinstance(r, dict)]
    if len(rungs) < 2 or mapping(tune, "best_recipe") == mapping(tune, "baseline_recipe"):
        return "none"
    last = rungs[-1]
    same = num(tune, "speedup") == num(last, "speedup_vs_baseline") and pair(
        get(tune, "speedup_ci")
    ) == pair(get(last, "speedup_vs_baseline_ci"))
    return "ladder" if same else "final_ab"


def result_section(tune: JsonDict, config: JsonDict | None, run: str) -> ResultView:
    fit = get(tune, "fit")
    if isinstance(fit, dict):
        return _fit_result(tune, fit)
    ladder = mapping(tune, "ladder")
    rungs = [r for r in items(ladder, "rungs") if isinstance(r, dict)]
    kept = [fmt.change(mapping(r, "change")) for r in rungs if integer(r, "step")]
    last = rungs[-1] if rungs else None
    confidence = num(mapping(config, "plan"), "confidence")
    low, high = pair(get(tune, "speedup_ci")) or (None, None)
    headline = fmt.speedup(num(tune, "speedup"))
    interval = fmt.interval(low, high, confidence)
    rates = (
        f"{fmt.rate(num(tune, 'baseline_samples_per_s'))} \u2192 "
        f"{fmt.rate(num(tune, 'best_samples_per_s'))}"
    )
    workload = text(tune, "workload") or fmt.NA
    quality = _quality(last if kept else None)
    source = speedup_from(tune)
    measured_by, by, by_long = (
        (
            "chained from the ladder's rungs (no final A/B)",
            "ladder",
            "ladder's rungs chained, no final A/B",
        )
        if source == "ladder"
        else (
            "from the final A/B in fresh process pairs",
            "final A/B",
            "final A/B, fresh process pairs",
        )
    )
    if kept and source == "none":
        sentence = (
            f"The ladder kept {'; '.join(kept)} for {workload}, but the final A/B in fresh "
            "process pairs did not confirm a gain over the baseline: the baseline recipe is "
            "recommended."
        )
    elif kept:
        sentence = (
            f"Tuning {workload} with {'; '.join(kept)} made it {headline} faster ({rates}), "
            f"{interval} {measured_by}; quality: {quality}."
        )
    else:
        base = fmt.rate(num(tune, "baseline_samples_per_s"))
        sentence = (
            f"No change made {workload} faster than its baseline ({base}): every candidate "
            "was rejected or failed."
        )
    ladder_last = (
        f"{fmt.speedup(num(last, 'speedup_vs_baseline'))} "
        f"{fmt.interval(*(pair(get(last, 'speedup_vs_baseline_ci')) or (None, None)))}"
        if last
        else fmt.NA
    )
    peaks = [integer(r, "peak_memory_bytes") for r in (rungs[0], last)] if last else []
    trials = (
        f"{fmt.number(integer(tune, 'n_trials'))} ({fmt.number(integer(tune, 'n_failed'))} "
        f"failed), {fmt.seconds(num(tune, 'elapsed_s'))} of a "
        f"{fmt.seconds(num(tune, 'budget_s'))} budget"
        + (", budget exhausted" if get(tune, "budget_exhausted") is True else "")
    )
    rows = [
        KeyValue("change", "; ".join(kept) or "none kept"),
        KeyValue(f"throughput, baseline \u2192 best ({by})", rates),
        KeyValue(f"speedup ({by_long})", f"{headline} {interval}"),
        KeyValue("speedup (ladder's last row: product of its rungs)", ladder_last),
        KeyValue("quality", quality),
        KeyValue(
            "peak memory, baseline \u2192 best",
            f"{fmt.nbytes(peaks[0])} \u2192 {fmt.nbytes(peaks[1])}" if peaks else fmt.NA,
        ),
        KeyValue("trials", trials),
    ]
    return ResultView(
        sentence=sentence,
        rows=rows,
        speedups={"ladder": CHAINED, "none": REFUTED}.get(source, SPEEDUPS) if kept else SPEEDUPS,
        legend=_legend(confidence),
        notes=[str(n) for n in items(tune, "notes")],
        recheck=recheck_commands(config, run) if kept else [],
    )
