"""Replay a tune's first-pair A/Bs from their stored chunks under other confidences.

Each ladder trial records the chunk times of both arms of its first pair (`chunk_times_s`,
`best_chunk_times_s`). This replays the ladder's sequential test (`MeasurePlan.sequential`,
the same looks and the same weighted Bonferroni split) over those chunks at the study's
confidence and at each `--confidence`, and prints where each would have stopped and what it
would have decided. It answers "would a different confidence have changed this tune" on the
measurements the tune actually took, at no measuring cost. A replay sees only the rounds the
tune ran: a trial that stopped early under one setting cannot be continued under another,
so a stop that comes later in a replay is marked as cut short.

    python benchmarks/replay_looks.py RUN_DIR [RUN_DIR ...] [--confidence 0.90 --confidence 0.80]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.records import TrialResult, read_trial
from torchdoctor.tune.tuner import DEFAULT_MIN_GAIN


def replay(best: list[float], cand: list[float], plan: MeasurePlan, threshold: float) -> str:
    """Where the sequential test over these rounds stops and what it decides there."""
    test = plan.sequential(threshold)
    text = "no look"
    for n in range(1, len(cand) + 1):
        look = test.look(best[:n], cand[:n])
        if look is None:
            continue
        est = look.estimate
        text = (
            f"{look.verdict:9s} at {n:2d} rounds: {est.speedup:.3f}x "
            f"[{est.ci_low:.3f}, {est.ci_high:.3f}] ({est.confidence:.2%})"
        )
        if look.verdict != "undecided":
            return text
    if n < plan.looks()[-1] and text != "no look":
        text += f", cut short: the tune ran {n} rounds"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="tune run folders")
    parser.add_argument("--confidence", type=float, action="append", default=[])
    parser.add_argument("--min-gain", type=float, default=DEFAULT_MIN_GAIN)
    args = parser.parse_args()
    plan = MeasurePlan()
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
    print(f"{changed} of {total} first-pair decisions differ between {confidences}")


if __name__ == "__main__":
    main()
