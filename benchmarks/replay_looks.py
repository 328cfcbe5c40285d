"""Replay a tune's first-pair A/Bs from their stored chunks under other confidences.

Each ladder trial records the chunk times of both arms of its first pair (`chunk_times_s`,
`best_chunk_times_s`). This replays the ladder's sequential test (`MeasurePlan.sequential`,
the same looks and the same weighted Bonferroni split) over those chunks at the study's
confidence and at each `--confidence`, and prints where each would have stopped and what it
would have decided. It answers "would a different confidence have changed this tune" on the
measurements the tune actually took, at no measuring cost. A replay sees only the rounds the
tune ran: a trial that stopped early under one setting cannot be continued under another,
so a stop that comes later in a replay is marked as cut short.

With `--rounds N` (repeatable), each trial that ran to the last look is also resampled: its
paired ratios, drawn with replacement, feed the same sequential test with N rounds at most,
`--resamples` times, and the share that ends "faster" estimates the test's power for a
change like this one on this host; the same ratios divided by their median (a change that
does nothing, with the same spread) give its false-keep rate. Resampling draws rounds
independently, while real rounds drift (neighbouring ratios correlate), so both figures are
optimistic for longer tests.

    python benchmarks/replay_looks.py RUN_DIR [RUN_DIR ...] [--confidence 0.90 --confidence 0.80]
        [--rounds 24 --rounds 40 [--resamples 200]]
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import replace
from pathlib import Path

from torchdoctor.measure import Look, SequentialTest
from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.records import TrialResult, read_trial
from torchdoctor.tune.settings import DEFAULT_MIN_GAIN


def run_test(test: SequentialTest, best: list[float], cand: list[float]) -> tuple[int, Look | None]:
    """Where `test` over these rounds stops (rounds, look), or its last look within them."""
    reached: tuple[int, Look | None] = (0, None)
    for n in test.looks():
        if n > len(cand):
            break
        reached = (n, test.look(best[:n], cand[:n]))
        if reached[1] is not None and reached[1].stop:
            break
    return reached


def replay(best: list[float], cand: list[float], plan: MeasurePlan, threshold: float) -> str:
    """Where the sequential test over these rounds stops and what it decides there."""
    n, look = run_test(plan.sequential(threshold), best, cand)
    if look is None:
        return "no look"
    est = look.estimate
    text = (
        f"{look.verdict:9s} at {n:2d} rounds: {est.speedup:.3f}x "
        f"[{est.ci_low:.3f}, {est.ci_high:.3f}] ({est.confidence:.2%})"
    )
    if not look.stop:
        text += f", cut short: the tune ran {len(cand)} rounds"
    return text


def keep_rate(ratios: list[float], rounds: int, threshold: float, resamples: int) -> float:
    """Share of `resamples` sequential tests over ratios drawn from `ratios` that keep."""
    rng = random.Random(0)
    test = replace(MeasurePlan(), rounds=rounds).sequential(threshold)
    kept = 0
    for _ in range(resamples):
        # Scores whose paired ratio best / candidate is the drawn ratio.
        best = [rng.choice(ratios) for _ in range(rounds)]
        _, look = run_test(test, best, [1.0] * rounds)
        kept += look is not None and look.verdict == "faster"
    return kept / resamples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="tune run folders")
    parser.add_argument("--confidence", type=float, action="append", default=[])
    parser.add_argument("--min-gain", type=float, default=DEFAULT_MIN_GAIN)
    parser.add_argument("--rounds", type=int, action="append", default=[])
    parser.add_argument("--resamples", type=int, default=200)
    args = parser.parse_args()
    if any(not 0.0 < c < 1.0 for c in args.confidence):
        parser.error("--confidence must be between 0 and 1, e.g. 0.90")
    plan = MeasurePlan()
    if any(r < plan.min_rounds for r in args.rounds) or args.resamples < 1:
        parser.error(f"--rounds must be at least {plan.min_rounds}, --resamples 1 or more")
    confidences = [plan.confidence, *args.confidence]
    threshold = 1.0 + args.min_gain
    changed = total = 0
    for run in args.runs:
        trials = run / "trials"
        if not trials.is_dir():
            parser.error(f"{run} has no trials/ folder: pass a tune run folder")
        print(run)
        for path in sorted(trials.iterdir()):
            trial = read_trial(path)
            if not isinstance(trial, TrialResult) or trial.kind != "ladder":
                continue
            best, cand = trial.best_chunk_times_s, trial.chunk_times_s
            if not best or not cand:
                continue
            readings = [
                replay(best, cand, replace(plan, confidence=c), threshold) for c in confidences
            ]
            verdicts = {r.split()[0] for r in readings}
            total += 1
            changed += len(verdicts) > 1
            print(f"  {trial.change} ({trial.decision})")
            for c, r in zip(confidences, readings, strict=True):
                print(f"    at {c:.0%}: {r}")
            if args.rounds and len(cand) >= plan.looks()[-1]:
                ratios = [b / c for b, c in zip(best, cand, strict=True) if c > 0]
                median = statistics.median(ratios)
                null = [r / median for r in ratios]
                for n in args.rounds:
                    power = keep_rate(ratios, n, threshold, args.resamples)
                    false = keep_rate(null, n, threshold, args.resamples)
                    print(
                        f"    resampled, {n} rounds at most: kept {power:.1%} as measured "
                        f"({median:.3f}x), {false:.1%} shifted to no change"
                    )
    print(f"{changed} of {total} first-pair decisions differ between {confidences}")


if __name__ == "__main__":
    main()
