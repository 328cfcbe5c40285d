"""How often the ladder would keep a change that does nothing to a script: its false-keep rate.

A do-nothing change is the same recipe on both sides. Each repeat opens a fresh process of a
zoo script (the candidate, as the ladder opens one per trial) beside one live process of the
same recipe (the current best, kept alive across trials as the ladder keeps it), warms both
up by the tuner's rule, and runs the ladder's own sequential A/B (`interleave_until_clear`:
paired 0.3 s chunks, looks at 6..24 rounds with Bonferroni, re-measured while the machine
was disturbed) against the ladder's bar (`1 + DEFAULT_MIN_GAIN`). A repeat whose A/B says
"faster" is a false keep. The rate is printed with its exact (Clopper-Pearson) one-sided
upper bound; the requirement is under 5% of repeated tunes, which a rate of 0 in 59 repeats
shows at 95% confidence (0.95 ** 59 < 0.05).

A speed A/B is all that stands between a do-nothing change and a keep: the quality check
passes such a change by design.

    python benchmarks/bench_script_noop.py [--repeats 60]
        [--script tests/zoo/control_well_tuned.py] [--script-args "--steps 1000000"]
        [--fresh-pairs]
"""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path

from scipy import stats

from torchdoctor.core.env import fingerprint
from torchdoctor.tune.arms import MeasurePlan, interleave_until_clear
from torchdoctor.tune.decision import SpeedCheck
from torchdoctor.tune.sources import ScriptArms, ScriptCommand
from torchdoctor.tune.tuner import DEFAULT_MIN_GAIN

ROOT = Path(__file__).resolve().parents[1]
#: Deadline of one worker request (the first prepares the script, which imports torch).
TIMEOUT_S = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--script", default=str(ROOT / "tests/zoo/control_well_tuned.py"))
    parser.add_argument("--script-args", default="--steps 1000000")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument(
        "--fresh-pairs",
        action="store_true",
        help="open the 'best' side fresh for every repeat too (both arms at the same training "
        "step), instead of one live process across repeats as the ladder keeps it",
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("need --repeats >= 1")
    argv = (args.script, *shlex.split(args.script_args))
    plan = MeasurePlan()
    source = ScriptArms(ScriptCommand(argv), plan, "throughput")
    threshold = 1.0 + DEFAULT_MIN_GAIN

    def timeout() -> float:
        return TIMEOUT_S

    kept = 0
    rounds: list[int] = []
    start = time.perf_counter()
    best = source.open({}, timeout=timeout, log_path=None)
    try:
        for i in range(args.repeats):
            if args.fresh_pairs and i > 0:
                best.close()
                best = source.open({}, timeout=timeout, log_path=None)
            candidate = source.open({}, timeout=timeout, log_path=None)
            try:
                est = interleave_until_clear(
                    best, candidate, plan, threshold=threshold, timeout=timeout
                )
            finally:
                candidate.close()
            check = SpeedCheck(est, threshold)
            kept += check.faster
            rounds.append(len(candidate.chunk_scores))
            print(
                f"repeat {i + 1:3d}: {est.speedup:.3f}x [{est.ci_low:.3f}, {est.ci_high:.3f}] "
                f"after {rounds[-1]} rounds -> {'KEPT' if check.faster else 'rejected'}",
                flush=True,
            )
    finally:
        best.close()

    n = args.repeats
    upper = float(stats.beta.ppf(args.confidence, kept + 1, n - kept)) if kept < n else 1.0
    load = os.getloadavg()
    print(f"machine: nproc={os.cpu_count()} cpu={fingerprint().cpu_model}")
    print(f"load average (1/5/15 min) at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    mode = "a fresh pair each repeat" if args.fresh_pairs else "one live best, fresh candidates"
    took = time.perf_counter() - start
    print(f"script: {shlex.join(argv)}; {n} repeats ({mode}) in {took:.0f} s")
    print(f"rounds per A/B: {min(rounds)}..{max(rounds)} (median {sorted(rounds)[n // 2]})")
    print(
        f"do-nothing change kept: {kept} of {n} ({kept / n:.1%}); one-sided "
        f"{args.confidence:.0%} upper bound {upper:.1%} (target: under 5%)"
    )


if __name__ == "__main__":
    main()
