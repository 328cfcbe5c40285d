"""Rejections without an A/B: a candidate whose changed knob did not act, or whose warm-up
already shows it hopeless, ends its trial before anything is scored.

Both stop only towards "not kept", so neither adds to the ladder's false-accept rate; they save
the budget an A/B would spend on a foregone answer (`ChangeTrial.measure` checks them in this
order, right after the candidate's arm is open).
"""

from __future__ import annotations

from typing import Any, Final

from torchdoctor.tune.arms import Arm
from torchdoctor.tune.outcome import DOES_NOT_APPLY, FUTILE, Outcome, Verdict
from torchdoctor.tune.records import TrialFigures

#: A candidate whose warm-up steps (after the first, which carries compilation) run this many
#: times slower than the current best is rejected without being scored. The interleaved A/B
#: would reject it too, but only after settle + min_rounds chunks of at least chunk_steps
#: steps each: fp16 autocast on a CPU without fp16 units runs ~100x slower than fp32 here, and
#: that A/B cost 6 minutes of a 7-minute budget. 10x leaves room for warm-up effects that do
#: fade (allocator growth, CUDA graph capture, cudnn autotuning) and is far below the slowdown
#: of a hopeless candidate. Stopping never accepts, so it adds nothing to the false-accept rate.
FUTILE_SLOWDOWN: Final = 10.0


def does_not_apply(cand: Arm, recipe: dict[str, Any], changed: tuple[str, ...]) -> Verdict | None:
    """A rejection when a changed knob did not act in the candidate (a script whose code the
    knob cannot reach: no DataLoader for num_workers, ...); None when every one acted."""
    missing = [k for k in changed if k in cand.not_applied]
    if not missing:
        return None
    why = "; ".join(f"{k}={recipe.get(k)}: {cand.not_applied[k]}" for k in missing)
    return Verdict("ok", Outcome.NOT_APPLICABLE, f"{DOES_NOT_APPLY}: {why}")


def futile_score(best: Arm, best_rate: float) -> float | None:
    """The warm-up score (s/sample, or s/step) past which a candidate is futile, against a
    best arm running at `best_rate` samples/s; None when that rate is unknown."""
    if best_rate <= 0 or best.samples_per_step <= 0:
        return None
    # The best's score at that rate, in the candidate's units (see `Arm.rate_of`).
    score = best.samples_per_step / best_rate if best.objective == "latency" else 1.0 / best_rate
    return score * FUTILE_SLOWDOWN


def futile(cand: Arm, limit: float | None, best_rate: float) -> tuple[Verdict, TrialFigures] | None:
    """A rejection when the candidate's warm-up score is past `limit` (`futile_score`), with
    what its warm-up measured; None when it is not."""
    if limit is None or cand.warm_score is None or cand.warm_score <= limit:
        return None
    rate = cand.rate_of(cand.warm_score)
    reason = (
        f"{FUTILE}: its warm-up ran at {rate:.3g}/s, {best_rate / rate:.0f}x slower than the "
        f"current best ({best_rate:.3g}/s); not measured further"
    )
    figures = TrialFigures(
        samples_per_s=rate,
        speedup_vs_best=rate / best_rate,
        peak_memory_bytes=cand.peak_memory_bytes,
        compile_s=cand.compile_s,
        warmup_s=cand.warmup_s,
    )
    return Verdict("ok", Outcome.FUTILE, reason), figures
