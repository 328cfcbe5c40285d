"""The FSDP zoo's planted problems tuned under a slow link, each claim re-measured.

Each plant of tests/zoo/fsdp2_train.py whose cure can win on 2-rank CPU gloo is tuned with
`torchdoctor tune --knobs KNOB -- torchrun --nproc_per_node 2 fsdp2_train.py --plant X` inside
a network namespace whose loopback is shaped by tbf (the rule of scale/netns.py: an MTU under
tbf's bucket, the bucket from `_burst_bytes`), then the kept recipe is re-run against the job
as it is with `torchdoctor run --recipe RUN --vs-baseline -- torchrun ...` in the same
namespace, as bench_ddp_remeasure.py does for DDP (its `_cli` and `_judged` are used here).
Prints, per plant, the claim, its interval, the re-measured speedup, their ratio, whether the
re-measure lies inside the interval, and Welch's test of the two sets of pair ratios.

The plants and their cures (the knob `diagnose` prescribes for each,
tests/integration/test_diagnose_fsdp.py):

- `fp32-reduce` -> `fsdp_mixed_precision=bf16`: half the bytes reduce-scattered each step.
- `reshard` -> `reshard_after_forward=False`: no all-gather of each block again in backward.

`exposed-all-gather` -> `fsdp_prefetch` is not run: on CPU gloo the knob's explicit prefetch
issues each block's all-gather earlier but still synchronously (no streams, and the unshard's
`async_op` is the script's own), so it waits as long as before, at the cost of a block's
memory; the zoo's careful job overlaps only because it also makes its unshards asynchronous
(FSDP2's private `_set_unshard_async_op`). Under the default link on a 2-core host (one thread
a rank, the median of ten steps): the plant's step 537 ms; with the knob's synchronous
prefetch one block ahead 623 ms; prefetched and asynchronous, as the unplanted job, 383 ms.

Needs root and iproute2 (`ip netns`, `tc`); says why and exits 0 where namespaces cannot be
made (as bench_scale_tbf.py does).

    python benchmarks/bench_fsdp_remeasure.py
    python benchmarks/bench_fsdp_remeasure.py --plant reshard --rate-mbit 1000 --out /tmp/fr
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench_ddp_remeasure import _cli, _judged
from torchdoctor.scale.netns import shaped_loopback, unavailable
from torchdoctor.tune import Confirmation
from torchdoctor.tune.records import read_trial

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "zoo" / "fsdp2_train.py"
TORCHRUN = ["torchrun", "--nproc_per_node", "2"]
#: plant -> the knob that cures it (the one `diagnose` prescribes), for the plants whose
#: cure can win on CPU gloo (the module's docstring says why exposed-all-gather is not here).
CURES = {"fp32-reduce": "fsdp_mixed_precision", "reshard": "reshard_after_forward"}
#: The shaped loopback's default rate: tests/integration/conftest.py's SLOW_LINK_MBIT, where
#: each plant's step on this 2-core host took 1.3x the cured job's (fp32-reduce 508 ms against
#: 383 ms, reshard 488 ms against 383 ms) and the unplanted job's 1.8x its step on an
#: unshaped loopback (383 ms against 218 ms): the link, not the compute, bounds the step.
RATE_MBIT = 1000


def remeasure(plant: str, args: argparse.Namespace, netns: str, base: Path) -> None:
    """Tune one plant's job for its cure, then re-measure the kept claim; print both."""
    knob = CURES[plant]
    job = [str(ZOO), "--plant", plant, "--steps", "100000"]  # no arm ends while measured
    prefix = ["ip", "netns", "exec", netns]
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}  # the namespace's shaped loopback
    tune_dir, again_dir = base / plant / "tune", base / plant / "again"

    began = time.monotonic()
    print(f"{plant}: tune --knobs {knob} (budget {args.budget})", flush=True)
    claim = _cli(
        "tune", "--budget", args.budget, "--knobs", knob, "--pairs", str(args.pairs),
        "--out", str(tune_dir), "--", *TORCHRUN, *job, prefix=prefix, env=env,
    )  # fmt: skip
    tuned_s = time.monotonic() - began
    confirm = read_trial(sorted((tune_dir / "trials").iterdir())[-1])
    if not isinstance(confirm, Confirmation) or not claim["best_recipe"]:
        print(f"  nothing kept ({tuned_s:.0f} s): {claim.get('notes')}", flush=True)
        return
    low, high = (float(v) for v in claim["speedup_ci"])
    print(
        f"  recipe {claim['best_recipe']}; claims {claim['speedup']:.3f}x "
        f"[{low:.3f}, {high:.3f}] from {len(confirm.rates)} fresh pairs of jobs, "
        f"{confirm.steps} steps each; {tuned_s:.0f} s",
        flush=True,
    )

    began = time.monotonic()
    again = _cli(
        "run", "--recipe", str(tune_dir), "--vs-baseline", "--pairs", str(args.pairs),
        "--steps", str(confirm.steps), "--out", str(again_dir), "--", *TORCHRUN, *job,
        prefix=prefix, env=env,
    )  # fmt: skip
    print(
        f"  run --vs-baseline, {args.pairs} fresh pairs: "
        f"{_judged(confirm, again, (low, high), float(claim['speedup']))}; "
        f"{time.monotonic() - began:.0f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plant", choices=sorted(CURES), action="append", help="(default: all)")
    parser.add_argument("--rate-mbit", type=float, default=RATE_MBIT, help="the link's rate")
    parser.add_argument("--budget", default="10m", help="each tune's budget (default 10m)")
    parser.add_argument("--pairs", type=int, default=3, help="fresh pairs of each A/B")
    parser.add_argument("--out", type=Path, help="folder for the run folders (default: temp)")
    args = parser.parse_args()
    why = unavailable()
    if why:
        print(f"no network namespace here ({why}): nothing measured")
        return
    base = args.out or Path(tempfile.mkdtemp(prefix="bench-fsdp-remeasure-"))
    print(f"loopback shaped to {args.rate_mbit:g} Mbit/s by tbf; run folders under {base}")
    with shaped_loopback(args.rate_mbit) as netns:
        for plant in args.plant or sorted(CURES):
            remeasure(plant, args, netns, base)


if __name__ == "__main__":
    main()
