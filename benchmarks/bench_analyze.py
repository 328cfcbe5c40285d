"""Benchmark: torchdoctor analyze vs HolisticTraceAnalysis (load + temporal breakdown).

Runs both on (1) the largest trace in ../shared/traces and (2) a 100+ MB trace synthesized at
run time (the real A100 rank-0 trace repeated with shifted timestamps, written to a temp dir,
never committed). Each tool runs in its own subprocess so its peak RSS (ru_maxrss, the
largest of the process and any worker it spawned) is its own; times are wall time and CPU
time (user + sys, including workers) of imports + load + analysis inside the subprocess,
best of --repeat. CPU time is reported because the machine is shared: other engineers' jobs
stretch wall time (load average 10+ on 2 cores), but not the CPU a tool itself burns.

HTA lives only in its own virtualenv (/tmp/td-hta-venv, created with --system-site-packages
on first use); it is never a torchdoctor dependency. A tool that fails is reported as failed.

    python benchmarks/bench_analyze.py [--repeat 2] [--synthetic-mb 110]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO / ".." / "shared" / "traces"
# Seeded from a trace HTA can read (it fails on the Qwen trace with an AssertionError).
SEED_TRACE = "hta_a100_ws16_rank0.json.gz"
HTA_VENV = Path("/tmp/td-hta-venv")
HTA_REQUIREMENT = "HolisticTraceAnalysis==0.5.*"

# Printed by each child: wall s, CPU s, peak RSS kB, idle %. Peak RSS is the child's own
# VmHWM: ru_maxrss of RUSAGE_SELF survives exec on Linux, so it would report the benchmark
# parent's size at spawn time when that is larger (it did: 180 MB for a 45 MB job).
USAGE = """
def usage():
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    with open("/proc/self/status") as fh:
        hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    return cpu, max(hwm, kids.ru_maxrss)
"""
# Both tools run with bytecode caching on, as an installed package does: this machine sets
# PYTHONDONTWRITEBYTECODE=1, which would make the editable torchdoctor recompile its sources
# on every run while HTA's site-packages hold pip-compiled .pyc files. A warm-up import per
# tool, untimed, fills the cache.
CHILD_ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPYCACHEPREFIX": "/tmp/td-bench-pycache",
}

TORCHDOCTOR_CHILD = """
import resource, sys, time
t = time.perf_counter()
from torchdoctor.analyze import analyze_trace
r = analyze_trace(sys.argv[1])
dt = r.device_timeline
idle = None if dt is None else round(dt.idle_pct, 2)
print(time.perf_counter() - t, *usage(), idle)
"""

HTA_CHILD = """
import resource, sys, time, logging
logging.disable(logging.CRITICAL)
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
df = a.get_temporal_breakdown(visualize=False)
idle = round(float(df["idle_time_pctg"].iloc[0]), 2)
print(time.perf_counter() - t, *usage(), idle)
"""


def ensure_hta() -> Path:
    python = HTA_VENV / "bin" / "python"
    probe = [str(python), "-c", "import hta"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    venv.create(HTA_VENV, system_site_packages=True, with_pip=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", HTA_REQUIREMENT], check=True)
    return python


def synthesize(out_dir: Path, target_mb: float) -> Path:
    """Repeat a real trace's events, shifted in time and ids, until the JSON passes target_mb."""
    with gzip.open(SHARED_TRACES / SEED_TRACE) as fh:
        seed = json.loads(fh.read())
    events = [e for e in seed["traceEvents"] if e.get("ph") != "M"]
    meta_events = [e for e in seed["traceEvents"] if e.get("ph") == "M"]
    stamps = [e["ts"] for e in events if "ts" in e]
    span = max(stamps) - min(stamps) + 1000.0
    path = out_dir / "synthetic_rank0.json"
    with path.open("w") as fh:
        header = {k: v for k, v in seed.items() if k != "traceEvents"}
        fh.write(json.dumps(header)[:-1] + ', "traceEvents": [')
        fh.write(",".join(json.dumps(e) for e in meta_events))
        copy = 0
        while fh.tell() < target_mb * 1e6:
            shift, id_shift = copy * span, copy * 10_000_000
            chunk = []
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = e2["ts"] + shift
                if isinstance(e2.get("id"), int):
                    e2["id"] += id_shift
                args = e2.get("args")
                if isinstance(args, dict):
                    args = dict(args)
                    for key in ("correlation", "External id"):
                        if isinstance(args.get(key), int):
                            args[key] += id_shift
                    e2["args"] = args
                chunk.append(json.dumps(e2))
            fh.write("," + ",".join(chunk))
            copy += 1
        fh.write("]}")
    return path


Result = tuple[float, float, float, str]  # wall s, CPU s, peak MB, idle %


def run_child(python: str, code: str, target: Path, repeat: int) -> Result:
    best: Result | None = None
    code = code.replace("t = time.perf_counter()", USAGE + "t = time.perf_counter()", 1)
    for _ in range(repeat):
        proc = subprocess.run(
            [python, "-c", code, str(target)], capture_output=True, text=True, env=CHILD_ENV
        )
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return float("nan"), float("nan"), float("nan"), f"failed: {last[:70]}"
        seconds, cpu, rss_kb, idle = proc.stdout.split()[-4:]
        result = (float(seconds), float(cpu), float(rss_kb) / 1024, idle)
        if best is None or result[0] < best[0]:
            best = result
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--synthetic-mb", type=float, default=110.0)
    parser.add_argument("--synthesize-to", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.synthesize_to is not None:  # the child that writes the synthetic trace
        print(synthesize(args.synthesize_to, args.synthetic_mb))
        return
    hta_python = str(ensure_hta())
    for python, module in ((sys.executable, "torchdoctor.analyze"), (hta_python, "hta")):
        subprocess.run([python, "-c", f"import {module}"], check=True, env=CHILD_ENV)
    largest = max(SHARED_TRACES.glob("*.json*"), key=lambda p: p.stat().st_size)
    with tempfile.TemporaryDirectory(prefix="td-bench-") as tmp:
        tmp_path = Path(tmp)
        real_dir = tmp_path / "real"
        real_dir.mkdir()
        (real_dir / largest.name).symlink_to(largest.resolve())
        synth_dir = tmp_path / "synthetic"
        synth_dir.mkdir()
        # In a subprocess, so that this process stays small while the tools run.
        synth_args = ["--synthesize-to", str(synth_dir), "--synthetic-mb", str(args.synthetic_mb)]
        made = subprocess.run(
            [sys.executable, __file__, *synth_args],
            check=True,
            capture_output=True,
            text=True,
        )
        synthetic = Path(made.stdout.strip().splitlines()[-1])
        real_label = f"{largest.name} ({largest.stat().st_size / 1e6:.1f} MB gz)"
        synth_label = f"synthetic ({synthetic.stat().st_size / 1e6:.0f} MB json)"
        cases = [
            (real_label, real_dir / largest.name, real_dir),
            (synth_label, synthetic, synth_dir),
        ]
        header = (
            f"{'trace':<44} {'tool':<12} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'idle %':>8}"
        )
        print(header)
        print("-" * len(header))
        for label, file_path, folder in cases:
            td = run_child(sys.executable, TORCHDOCTOR_CHILD, file_path, args.repeat)
            hta = run_child(hta_python, HTA_CHILD, folder, args.repeat)
            for tool, r in (("torchdoctor", td), ("HTA 0.5", hta)):
                print(
                    f"{label if tool == 'torchdoctor' else '':<44} {tool:<12} "
                    f"{r[0]:>8.2f} {r[1]:>8.2f} {r[2]:>8.0f} {r[3]:>8}"
                )
            if hta[0] == hta[0]:  # not NaN
                ratios = " ".join(f"{h / t:>7.1f}x" for h, t in zip(hta[:3], td[:3], strict=True))
                print(f"{'':<44} {'ratio':<12} {ratios}   (HTA / torchdoctor)")


if __name__ == "__main__":
    main()
