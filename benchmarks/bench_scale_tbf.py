"""Benchmark: in two network namespaces joined by a tbf-shaped veth pair (one rank in each),
the exposed communication at two rates against the scaling model (issue 28: within 20%).

Per round: the workload at N=1 on the host (the model's base), then N=2 across the two
namespaces at each rate (`scale.netns.two_hosts`; each namespace runs `torchdoctor scale ...
--nnodes 2 --node-rank K`, gloo bound to its veth end and torchrun told its address), the
rates' order alternating between rounds. Each N=2 run is paired with its round's N=1 run: the
model takes that N=1's phases and the collectives measured across the shaped link in the N=2
run itself, and is also evaluated at the nominal rate (`--bandwidth`: the link's bits per
second over 8; for 2 ranks the ring's bus bandwidth is the link's). Measured exposed
communication: the study waterfall's exposed-communication bar plus its skew bar (the ranks'
waits for each other at the all-reduce are in the skew bar); the model's side is its exposed
communication plus its skew.

Printed per round and rate: measured exposed, the model's (from the fit, and from the nominal
rate), their ratio; the fit's sizes (those around the gradient bucket, `fit.fit_near`), its
bus bandwidth beside the nominal rate, and the model from a fit over every size (as before);
then, over rounds, the medians and the change between the two rates, measured against
predicted, and whether each lies within 20%.

The microbenchmark runs 1 KiB to 4 MiB (`BENCH_SIZES`, around mlp's one 0.6 MB bucket), not
the default 1 KiB to 64 MiB: over a 100 Mbit/s link the default's three collectives at 64 MiB
alone take minutes (about 350 s for the whole default set), so three rounds cannot finish in
ten minutes. Each job across the namespaces has a deadline (`job_deadline`: three times the
microbenchmark's time at the nominal rate, plus start-up and training); past it, every process
inside the namespaces is ended, the namespaces are deleted, and the round and rate are reported
as timed out; the other rounds go on, and the summary is over the rounds that finished.

Needs root and iproute2 (`ip netns`, `tc`); says why and exits 0 where namespaces cannot be
made.

    python benchmarks/bench_scale_tbf.py [--rates 400,100] [--rounds 3] [--steps 40] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from torchdoctor.scale import (
    COMMUNICATION_BAR,
    SKEW_BAR,
    StudyPlan,
    build_study,
    project,
    run_worlds,
)
from torchdoctor.scale.collectives import REPEATS, WARMUP_CALLS
from torchdoctor.scale.netns import two_hosts, unavailable

#: The issue's bar for the exposed communication against the model.
TARGET: float = 0.20
WORKLOAD = "mlp"
BATCH = 256
PORT = 29517
#: 1 KiB to 4 MiB in steps of 4: around mlp's one gradient bucket (0.6 MB), see the module.
BENCH_SIZES: tuple[int, ...] = tuple(1024 * 4**k for k in range(7))
#: Bytes over the link per byte of a collective at N=2: all-reduce 1 (each way at once),
#: all-gather 1/2, reduce then broadcast 2 (in sequence): `fit.bus_factor` at N=2.
LINK_BYTES_PER_BYTE = 1.0 + 0.5 + 2.0
#: Seconds a job needs beyond its microbenchmark: two torchrun start-ups (imports on a busy
#: host), the training steps, the study written; and the factor on the microbenchmark's time
#: at the nominal rate (TCP runs below it, the host may be busy).
JOB_OVERHEAD_S = 150.0
BENCH_MARGIN = 3.0
#: Seconds a node's `torchdoctor scale` may take beyond its job's deadline (its own start-up
#: and the study's assembly) before the benchmark ends it.
NODE_GRACE_S = 60.0


class JobTimedOut(Exception):
    """A job across the namespaces ran past its deadline."""


def job_deadline(rate_mbit: float, sizes: tuple[int, ...] = BENCH_SIZES) -> float:
    """Seconds one N=2 job across the link may take (see the module)."""
    calls = WARMUP_CALLS + REPEATS
    bench = sum(sizes) * LINK_BYTES_PER_BYTE * calls * 8 / (rate_mbit * 1e6)
    return BENCH_MARGIN * bench + JOB_OVERHEAD_S


def across_namespaces(rate: float, run_dir: Path, args: argparse.Namespace) -> None:
    """N=2 with one rank in each namespace, the link shaped to `rate` Mbit/s; raises
    `JobTimedOut` past the job's deadline (leaving `two_hosts` ends what runs inside)."""
    deadline = job_deadline(rate)
    with two_hosts(rate_mbit=rate) as hosts:
        procs = []
        for k in (0, 1):
            cmd = [
                *hosts.exec_prefix(k), "env", f"GLOO_SOCKET_IFNAME=veth{k}", sys.executable,
                "-m", "torchdoctor", "scale", WORKLOAD, "--nproc", "1", "--nnodes", "2",
                "--node-rank", str(k), "--rdzv-endpoint", f"{hosts.addresses[0]}:{PORT}",
                "--local-addr", hosts.addresses[k],
                "--threads", "1", "--steps", str(args.steps), "--batch", str(BATCH),
                "--out", str(run_dir), "--json",
                "--bench-sizes", ",".join(map(str, BENCH_SIZES)),
                "--job-timeout", f"{deadline:.0f}",
            ]  # fmt: skip
            cmd += ["--quick"] if args.quick else []
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        ends = time.monotonic() + deadline + NODE_GRACE_S
        failed = []
        for k, proc in enumerate(procs):
            try:
                _, err = proc.communicate(timeout=max(1.0, ends - time.monotonic()))
            except subprocess.TimeoutExpired:
                failed.append(
                    f"node {k} ran past {deadline + NODE_GRACE_S:.0f} s (its job's deadline "
                    f"{deadline:.0f} s plus {NODE_GRACE_S:.0f} s)"
                )
                continue
            if proc.returncode != 0:
                why = err.decode(errors="replace").strip().splitlines()
                failed.append(f"node {k} exited {proc.returncode}: {why[-1] if why else ''}")
        if failed:  # every node's reason: the first to fail is often not the first listed
            raise JobTimedOut("; ".join(failed))


def one_round(
    k: int, rates: list[float], args: argparse.Namespace, root: Path
) -> dict[float, tuple[float, float, float]]:
    """Round `k`'s (measured, model, nominal model) per rate that finished."""
    base = root / f"round{k}-base"
    plan = StudyPlan(nprocs=[1], workload=WORKLOAD, steps=args.steps, batch=BATCH, threads=1)
    run_worlds(plan, base, lambda m: print(f"  round {k}: {m}", file=sys.stderr))
    out: dict[float, tuple[float, float, float]] = {}
    for rate in rates if k % 2 == 0 else rates[::-1]:
        run_dir = root / f"round{k}-{rate:g}"
        print(
            f"  round {k}: N=2 across namespaces at {rate:g} Mbit/s (deadline "
            f"{job_deadline(rate):.0f} s)",
            file=sys.stderr,
        )
        started = time.monotonic()
        try:
            across_namespaces(rate, run_dir, args)
        except JobTimedOut as exc:
            print(
                f"round {k} {rate:>6g} Mbit/s: NOT FINISHED after "
                f"{time.monotonic() - started:.0f} s: {exc}; its processes and namespaces "
                "were removed",
                flush=True,
            )
            continue
        shutil.copytree(base / "n1", run_dir / "n1")
        study = build_study(StudyPlan(nprocs=[1, 2], workload=WORKLOAD, batch=BATCH), run_dir)
        two = next(w for w in study.worlds if w.world_size == 2)
        assert study.model is not None and two.projected is not None
        # Measured: the waterfall's exposed communication and skew bars (the ranks' waits for
        # each other are in the skew bar, the co-location slowdown in a bar of its own); the
        # model's side is its exposed communication, the CPU hidden communication takes from
        # the backward (in the measured backward's excess too; 0 for mlp's one bucket), and
        # its skew.
        at_rate = project(study.model, 2, busbw=rate * 1e6 / 8)
        nominal = at_rate.exposed_s + at_rate.stolen_s + at_rate.skew_s
        bars = {p.label: p.seconds for p in two.waterfall}
        measured = bars[COMMUNICATION_BAR] + bars[SKEW_BAR]
        model = two.projected.exposed_s + two.projected.stolen_s + two.projected.skew_s
        out[rate] = (measured, model, nominal)
        # the fit over every size, as the model took it before it fitted around the bucket
        whole = study.model.model_copy(update={"ring": study.benches[-1].fit("all_reduce")})
        at_whole = project(whole, 2)
        near = study.model.ring
        fitted = f"{near.sizes_fitted[0]}..{near.sizes_fitted[1]} B" if near.sizes_fitted else ""
        print(
            f"round {k} {rate:>6g} Mbit/s: exposed+skew measured {measured * 1e3:7.2f} ms "
            f"(exposed {bars[COMMUNICATION_BAR] * 1e3:.2f}, skew and waits "
            f"{bars[SKEW_BAR] * 1e3:.2f}), model (fit) {model * 1e3:7.2f} ms, model (nominal "
            f"rate) {nominal * 1e3:7.2f} ms; measured/model {measured / model:.3f}; "
            f"co-location slowdown {study.model.colocation_slowdown:.3f}\n"
            f"{'':>8}fit over {fitted}: busbw {near.busbw / 1e6:.2f} MB/s (the link's "
            f"nominal {rate / 8:.2f} MB/s), alpha {near.alpha_s * 1e3:.3f} ms; the fit over "
            f"every size: busbw {whole.ring.busbw / 1e6:.2f} MB/s, model "
            f"{(at_whole.exposed_s + at_whole.stolen_s + at_whole.skew_s) * 1e3:.2f} ms",
            flush=True,
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="400,100", help="two tbf rates, Mbit/s")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="1 round, 12 steps (a smoke run)")
    args = parser.parse_args()
    why = unavailable()
    if why:
        print(f"skipped: {why}")
        return
    rates = [float(r) for r in args.rates.split(",")]
    if len(rates) != 2:
        raise SystemExit("--rates takes two rates")
    if args.quick:
        args.rounds, args.steps = 1, 12
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-tbf-") as tmp:
        for k in range(args.rounds):
            rounds.append(one_round(k, rates, args, Path(tmp)))
    print()
    done = {r: [x[r] for x in rounds if r in x] for r in rates}
    for r in rates:
        print(f"{r:g} Mbit/s: {len(done[r])} of {args.rounds} round(s) finished")
    if not all(done.values()):
        print("no median at a rate where no round finished")
        return
    med = {r: [statistics.median(x[i] for x in done[r]) for i in range(3)] for r in rates}
    for r in rates:
        ratio = med[r][0] / med[r][1]
        verdict = "within" if abs(ratio - 1) <= TARGET else "NOT within"
        print(
            f"{r:g} Mbit/s: median exposed measured {med[r][0] * 1e3:.2f} ms, model "
            f"{med[r][1] * 1e3:.2f} ms (nominal {med[r][2] * 1e3:.2f} ms): measured/model "
            f"{ratio:.3f}, {verdict} {TARGET:.0%}"
        )
    slow, fast = sorted(rates)[0], sorted(rates)[1]
    moved = med[slow][0] - med[fast][0]
    predicted = med[slow][1] - med[fast][1]
    verdict = "within" if predicted > 0 and abs(moved / predicted - 1) <= TARGET else "NOT within"
    print(
        f"change {fast:g} -> {slow:g} Mbit/s: measured {moved * 1e3:.2f} ms, model "
        f"{predicted * 1e3:.2f} ms: ratio {moved / predicted if predicted else float('nan'):.3f}, "
        f"{verdict} {TARGET:.0%}"
    )


if __name__ == "__main__":
    main()
