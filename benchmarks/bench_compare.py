"""False-positive and detection rates of `compare` on the real clock.

40 comparisons of a statement with itself (want "no_significant_difference" in >= 95%) and 40
comparisons against a statement doing 10% more work (want "slower" in >= 95%), each an
interleaved A/B comparison with BUDGET_S seconds.

    python benchmarks/bench_compare.py
"""

from __future__ import annotations

import os
import statistics

import torch

from torchdoctor.measure import compare

REPEATS = 40
BUDGET_S = 1.0
BASE = "sum(range(1000))"
SLOWER = "sum(range(1100))"  # 10% more iterations of the same loop


def _run(candidate: str) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for i in range(REPEATS):
        c = compare({"a": BASE, "b": candidate}, baseline="a", budget_s=BUDGET_S, seed=i)
        est = c.estimates["b"]
        out.append((est.verdict, est.speedup))
    return out


def main() -> None:
    print(f"nproc={os.cpu_count()} torch={torch.__version__} budget={BUDGET_S}s x {REPEATS}")
    same = _run(BASE)
    slower = _run(SLOWER)
    no_diff = sum(v == "no_significant_difference" for v, _ in same)
    flagged = sum(v == "slower" for v, _ in slower)
    drift = [abs(s - 1) for _, s in same]
    print(
        f"self-comparison: no_significant_difference {no_diff}/{REPEATS} "
        f"({no_diff / REPEATS:.0%}), false positives {REPEATS - no_diff}; "
        f"|speedup-1| median {statistics.median(drift):.2%}, max {max(drift):.2%}"
    )
    print(
        f"10% slower: flagged slower {flagged}/{REPEATS} ({flagged / REPEATS:.0%}); "
        f"speedup median {statistics.median(s for _, s in slower):.3f} (expected ~0.909)"
    )


if __name__ == "__main__":
    main()
