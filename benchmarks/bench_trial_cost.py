"""A ladder trial's wall time against the seconds in its timed chunks, old settings and new.

One run, side by side, per setting (`SETTINGS`):

- **old**: chunks from the last warm-up steps at the host's 0.3 s floor on any timer, every
  win's second pair of fresh processes run, workers started on demand, arms closed by joining;
- **new**: chunks at the timer's floor (CUDA events: 50 ms), calibrated from steady steps in
  whole stall periods, the second pair only where the measured spread between processes asks
  for it, workers started ahead of need on a GPU (`procs.WorkerPool`), arms ended at once.

Each setting runs one ladder trial of `--change` against the baseline (a live best arm and a
candidate, the sequential A/B, the second pair when the setting asks), then the final
confirmation of the same recipe in `--pairs` fresh process pairs. It prints the trial's wall
time, the seconds its timed chunks held and their share, and the ladder's and the
confirmation's estimates of the recipe side by side: whether their intervals overlap.

The default workload is `benchmarks/scripts/epoch_cnn.py:factory`, a cnn whose loader
restarts every 8 steps, so that the change (`num_workers=2`) starts its workers again at
every epoch. `--rounds` caps every A/B of both settings alike (the plan's 24 by default).
It runs on the GPU when one is present (`--device`).

    python benchmarks/bench_trial_cost.py
    python benchmarks/bench_trial_cost.py --device cuda --change num_workers=8 --pairs 3
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torchdoctor.measure import (
    MIN_CHUNK_S,
    PairedSpeedup,
    process_spread,
    second_pair_needed,
)
from torchdoctor.procs import SessionSpec, WorkerPool, pool_size
from torchdoctor.tune.arms import (
    SPREAD_CONFIDENCE,
    Arm,
    MeasurePlan,
    interleave_fresh_pair,
    interleave_until_clear,
)
from torchdoctor.tune.confirm import measure_fresh_pairs
from torchdoctor.tune.sources import WorkloadArms

HERE = Path(__file__).resolve().parent
DEFAULT_WORKLOAD = f"{HERE / 'scripts' / 'epoch_cnn.py'}:factory"
#: The ladder's bar (1 + min_gain) of `torchdoctor tune`'s default.
THRESHOLD = 1.02
REQUEST_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Setting:
    plan: MeasurePlan
    #: run every win's second pair (old) or only where the spread asks (new)
    always_second_pair: bool
    #: keep workers started ahead (on a GPU: `procs.pool_size`)
    pool: bool
    #: end arms at once (new) or close them by joining (old)
    at_once: bool


SETTINGS: dict[str, Setting] = {
    "old": Setting(
        replace(MeasurePlan(), calibrate_steady=False, event_min_chunk_s=MIN_CHUNK_S),
        always_second_pair=True,
        pool=False,
        at_once=False,
    ),
    "new": Setting(MeasurePlan(), always_second_pair=False, pool=True, at_once=True),
}


def timeout() -> float:
    return REQUEST_TIMEOUT_S


def chunk_seconds(arm: Arm) -> float:
    """Seconds of the steps the arm's scored chunks held."""
    dropped = 1 if arm.release_after_run and arm.chunk_steps > 1 else 0
    samples = (arm.chunk_steps - dropped) * arm.per_step()
    return sum(score * samples for score in arm.chunk_scores)


def parse_change(text: str) -> dict[str, Any]:
    name, _, value = text.partition("=")
    if not name or not value:
        raise SystemExit(f"--change {text!r}: write knob=value, e.g. num_workers=2")
    try:
        return {name: int(value)}
    except ValueError:
        return {name: {"true": True, "false": False}.get(value.lower(), value)}


def fmt(est: PairedSpeedup | None) -> str:
    if est is None:
        return "-"
    return f"{est.speedup:.2f}x [{est.ci_low:.2f}, {est.ci_high:.2f}]"


def run_setting(name: str, setting: Setting, spec: SessionSpec, change: dict[str, Any],
                pairs: int, logs: Path) -> dict[str, Any]:  # fmt: skip
    size = pool_size(spec.device, isolate=True) if setting.pool else 0
    pool = WorkerPool(spec.device, size, log_dir=logs / name) if size else None
    arms = WorkloadArms(spec, setting.plan, "throughput", isolate=True, pool=pool)
    opened = 0

    def open_arm(recipe: dict[str, Any], tag: str) -> Arm:
        nonlocal opened
        opened += 1
        (logs / name).mkdir(parents=True, exist_ok=True)
        return arms.open(recipe, timeout=timeout, log_path=logs / name / f"{opened:03d}-{tag}.log")

    try:
        start = time.perf_counter()
        best = open_arm({}, "best")
        cand = open_arm(change, "candidate")
        started_s = time.perf_counter() - start
        print(f"  {name}: arms open in {started_s:.1f} s", flush=True)
        est = interleave_until_clear(best, cand, setting.plan, threshold=THRESHOLD, timeout=timeout)
        print(f"  {name}: A/B {fmt(est)}", flush=True)
        timed = chunk_seconds(best) + chunk_seconds(cand)
        chunks = (best.chunk_steps, cand.chunk_steps, cand.period)
        rates = (best.rate(), cand.rate())
        best.close(at_once=setting.at_once)
        cand.close(at_once=setting.at_once)
        again = None
        log_ratios: list[float] = []
        won = est.ci_low > THRESHOLD
        # The tuner's rule (`ChangeTrial.measure`): no spread measured yet means a second pair.
        if won and (setting.always_second_pair or second_pair_needed(
            est.ci_low, process_spread(log_ratios), confidence=SPREAD_CONFIDENCE
        )):  # fmt: skip
            again, best2, cand2 = interleave_fresh_pair(
                open_arm, {}, change, setting.plan, timeout=timeout
            )
            timed += chunk_seconds(best2) + chunk_seconds(cand2)
            log_ratios = [
                math.log(a / b) for a, b in zip(rates, (best2.rate(), cand2.rate()), strict=True)
            ]
            best2.close(at_once=setting.at_once)
            cand2.close(at_once=setting.at_once)
        wall = time.perf_counter() - start
        print(f"  {name}: trial {wall:.1f} s; the confirmation next", flush=True)
        confirm_start = time.perf_counter()
        confirm = measure_fresh_pairs(
            open_arm, {}, change, key="bench", step=0, steps=None, pairs=pairs,
            timeout=timeout, confidence=setting.plan.confidence, clock=time.monotonic,
        )  # fmt: skip
        confirm_wall = time.perf_counter() - confirm_start
    finally:
        if pool is not None:
            pool.close()
    spread = process_spread(log_ratios)
    next_needs = (
        "-" if spread is None
        else str(second_pair_needed(est.ci_low, spread, confidence=SPREAD_CONFIDENCE))
    )  # fmt: skip
    return {
        "wall": wall,
        "started": started_s,
        "timed": timed,
        "chunks": chunks,
        "est": est,
        "again": again,
        "confirm": confirm,
        "confirm_wall": confirm_wall,
        "spread": spread,
        "next_needs": next_needs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD)
    parser.add_argument("--change", default="num_workers=2", help="knob=value (the candidate)")
    parser.add_argument("--pairs", type=int, default=3, help="fresh pairs of the confirmation")
    parser.add_argument("--settings", default="old,new", help="comma-separated: old, new")
    parser.add_argument("--rounds", type=int, default=None, help="most A/B rounds (both alike)")
    args = parser.parse_args()
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    names = [n.strip() for n in args.settings.split(",") if n.strip()]
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        raise SystemExit(f"--settings: unknown {unknown}; choose from {sorted(SETTINGS)}")
    change = parse_change(args.change)
    spec = SessionSpec(workload=args.workload, recipe={}, device=device)
    print(f"device {device}, workload {Path(args.workload).name}, change {change}", flush=True)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-trial-cost-") as tmp:
        for name in names:
            setting = SETTINGS[name]
            if args.rounds is not None:
                plan = replace(setting.plan, rounds=args.rounds, min_rounds=min(6, args.rounds))
                setting = replace(setting, plan=plan)
            rows[name] = run_setting(name, setting, spec, change, args.pairs, Path(tmp))
    print()
    print(f"{'setting':8} {'trial s':>8} {'starts s':>8} {'chunks s':>8} {'share':>6} "
          f"{'chunk steps (best, cand, period)':>32}")  # fmt: skip
    for name, r in rows.items():
        print(
            f"{name:8} {r['wall']:8.1f} {r['started']:8.1f} {r['timed']:8.1f} "
            f"{r['timed'] / r['wall']:6.1%} {r['chunks']!s:>32}"
        )
    print()
    print(f"{'setting':8} {'ladder':>24} {'second pair':>24} {'confirmation':>26} {'agree':>6}")
    for name, r in rows.items():
        c = r["confirm"]
        if c.speedup is None or c.speedup_ci is None:
            conf, agree = f"({c.reason})", "-"
        else:
            low, high = c.speedup_ci
            conf = f"{c.speedup:.2f}x [{low:.2f}, {high:.2f}]"
            agree = "yes" if max(low, r["est"].ci_low) <= min(high, r["est"].ci_high) else "no"
        print(f"{name:8} {fmt(r['est']):>24} {fmt(r['again']):>24} {conf:>26} {agree:>6}")
    for name, r in rows.items():
        spread = r["spread"]
        if spread is not None:
            print(
                f"{name}: processes of one recipe differ by {spread.sd:.1%} ({spread.pairs} "
                f"pairs); a next win of this size needs a second pair: {r['next_needs']}; "
                f"confirmation {r['confirm_wall']:.1f} s"
            )
    old, new = rows.get("old"), rows.get("new")
    if old and new:
        print(f"trial wall new/old: {new['wall'] / old['wall']:.2f}")


if __name__ == "__main__":
    main()
