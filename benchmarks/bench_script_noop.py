"""How often the ladder would keep a change that does nothing to a script: its false-keep rate.

A do-nothing change is the same recipe on both sides. Each repeat opens a fresh process of a
zoo script (the candidate, as the ladder opens one per trial) beside the live process of the
same recipe (the current best, kept alive across trials as the ladder keeps it), warms both
up by the tuner's rule, and runs the ladder's own sequential A/B (`interleave_until_clear`:
paired 0.3 s chunks, looks at 6..24 rounds with weighted Bonferroni, re-measured while the
machine was disturbed) against the ladder's bar (`1 + DEFAULT_MIN_GAIN`). A repeat whose A/B says
"faster" then goes, as in the ladder (`Replicates.second_pair`), to a second pair of fresh
processes (`interleave_fresh_pair`: the direction, `arms.REPLICATE_THRESHOLD` at
`arms.REPLICATE_CONFIDENCE`), which must say "faster" too for a keep; as in the ladder, the
live best is then that pair's candidate (a keep) or its best (a rejection).

Printed side by side from the same repeats: how often the first pair alone would keep the
change (the ladder before the second pair) and how often the ladder keeps it. Each rate
comes with its exact (Clopper-Pearson) one-sided upper bound; the requirement is under 5% of
repeated tunes, which a rate of 0 in 59 repeats shows at 95% confidence (0.95 ** 59 < 0.05).

First-pair keeps are rare, so the ladder's rate rests on few second pairs. With
`--second-pair-always` every repeat also runs the second pair (the ladder's live best stays
the first pair's when the first pair did not keep), which measures the second pair's own
do-nothing rate over all repeats: the ladder's rate is about the product of the two.

A speed A/B is all that stands between a do-nothing change and a keep: the quality check
passes such a change by design.

With `--workload NAME` the processes are worker processes of a built-in workload (as
`torchdoctor tune NAME` opens them) instead of a script's.

    python benchmarks/bench_script_noop.py [--repeats 60]
        [--script tests/zoo/control_well_tuned.py] [--script-args "--steps 1000000"]
        [--workload mlp] [--fresh-pairs] [--second-pair-always]
"""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path

from scipy import stats

from torchdoctor.core.env import fingerprint
from torchdoctor.procs import SessionSpec
from torchdoctor.tune.arms import (
    REPLICATE_THRESHOLD,
    Arm,
    MeasurePlan,
    interleave_fresh_pair,
    interleave_until_clear,
)
from torchdoctor.tune.decision import SpeedCheck
from torchdoctor.tune.settings import DEFAULT_MIN_GAIN
from torchdoctor.tune.sources import ArmSource, ScriptArms, ScriptCommand, WorkloadArms

ROOT = Path(__file__).resolve().parents[1]
#: Deadline of one worker request (the first prepares the script, which imports torch).
TIMEOUT_S = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--script", default=str(ROOT / "tests/zoo/control_well_tuned.py"))
    parser.add_argument("--script-args", default="--steps 1000000")
    parser.add_argument(
        "--workload", help="a built-in workload's worker processes instead of the script's"
    )
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument(
        "--fresh-pairs",
        action="store_true",
        help="open the 'best' side fresh for every repeat too (both arms at the same training "
        "step), instead of one live process across repeats as the ladder keeps it",
    )
    parser.add_argument(
        "--second-pair-always",
        action="store_true",
        help="run the second pair of fresh processes on every repeat, not only after a "
        "first-pair keep: its own do-nothing rate over all repeats",
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("need --repeats >= 1")
    argv = (args.script, *shlex.split(args.script_args))
    plan = MeasurePlan()
    source: ArmSource = ScriptArms(ScriptCommand(argv), plan, "throughput")
    subject = f"script: {shlex.join(argv)}"
    if args.workload:
        source = WorkloadArms(SessionSpec(args.workload, {}), plan, "throughput")
        subject = f"workload: {args.workload} (worker processes)"
    threshold = 1.0 + DEFAULT_MIN_GAIN

    def timeout() -> float:
        return TIMEOUT_S

    first_kept = 0
    second_held = 0
    second_runs = 0
    kept = 0
    rounds: list[int] = []
    start = time.perf_counter()

    def open_arm(recipe: dict[str, object], _tag: str) -> Arm:
        return source.open(recipe, timeout=timeout, log_path=None)

    best = open_arm({}, "best")
    try:
        for i in range(args.repeats):
            if args.fresh_pairs and i > 0:
                best.close()
                best = open_arm({}, "best")
            candidate = open_arm({}, "candidate")
            try:
                est = interleave_until_clear(
                    best, candidate, plan, threshold=threshold, timeout=timeout
                )
            finally:
                candidate.close()
            rounds.append(len(candidate.chunk_scores))
            line = f"{est.speedup:.3f}x [{est.ci_low:.3f}, {est.ci_high:.3f}]"
            verdict = "rejected"
            first = SpeedCheck(est, threshold).faster
            first_kept += first
            if first or args.second_pair_always:
                if first:
                    best.close()  # the ladder closes the first pair before the second
                again, best2, cand2 = interleave_fresh_pair(open_arm, {}, {}, plan, timeout=timeout)
                held = SpeedCheck(again, REPLICATE_THRESHOLD).faster
                second_runs += 1
                second_held += held
                kept += first and held
                if first:
                    # The ladder's live best from here: the new candidate on a keep, else the
                    # new best (`Replicates.second_pair`).
                    (best2 if held else cand2).close()
                    best = cand2 if held else best2
                    verdict = "KEPT" if held else "first pair only"
                else:
                    best2.close()
                    cand2.close()
                    verdict += f" (second pair alone: {'would hold' if held else 'no'})"
                line += (
                    f"; fresh pair {again.speedup:.3f}x [{again.ci_low:.3f}, {again.ci_high:.3f}]"
                )
            print(f"repeat {i + 1:3d}: {line} after {rounds[-1]} rounds -> {verdict}", flush=True)
    finally:
        best.close()

    n = args.repeats
    load = os.getloadavg()
    print(f"machine: nproc={os.cpu_count()} cpu={fingerprint().cpu_model}")
    print(f"load average (1/5/15 min) at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    mode = "a fresh pair each repeat" if args.fresh_pairs else "one live best, fresh candidates"
    took = time.perf_counter() - start
    print(f"{subject}; {n} repeats ({mode}) in {took:.0f} s")
    print(f"rounds per A/B: {min(rounds)}..{max(rounds)} (median {sorted(rounds)[n // 2]})")
    # (what, how many, out of how many, what it must stay under: the ladder's rate only)
    rates = [("kept by the first pair alone", first_kept, n, "")]
    if args.second_pair_always:
        rates.append(("passing the second pair alone", second_held, second_runs, ""))
    rates.append(("kept by the ladder", kept, n, " (target: under 5%)"))
    for label, count, runs, target in rates:
        print(
            f"do-nothing change {label}: {count} of {runs} ({count / runs:.1%}); one-sided "
            f"{args.confidence:.0%} upper bound {_upper(count, runs, args.confidence):.1%}" + target
        )
    if args.second_pair_always and second_runs:
        product = first_kept / n * second_held / second_runs
        print(f"product of the two rates (independent draws): {product:.2%}")


def _upper(kept: int, n: int, confidence: float) -> float:
    """Exact (Clopper-Pearson) one-sided upper bound of a rate of `kept` in `n`."""
    return float(stats.beta.ppf(confidence, kept + 1, n - kept)) if kept < n else 1.0


if __name__ == "__main__":
    main()
