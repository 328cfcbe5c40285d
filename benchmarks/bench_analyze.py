"""Benchmark: torchdoctor analyze vs HolisticTraceAnalysis (load + temporal breakdown).

Runs both on (1) the largest trace in tests/data/traces and (2) a 100+ MB trace synthesized at
run time (the real A100 rank-0 trace repeated with shifted timestamps, written to a temp dir,
never committed). torchdoctor runs twice: as the command a user types (`torchdoctor --json
analyze TRACE --no-report`, through the CLI's `main`, JSON written to stdout; HTA renders no
report either) and through the Python API
(`analyze_trace`). Each run is its own subprocess, so its peak memory is its own. Reported:
wall time of the whole process (interpreter start-up included, as a user waits for it), CPU
time (user + sys of the process and any worker it waited for), peak RSS (the process's own
VmHWM), and work time: the load + analysis alone, timed inside the process after the tool's
own imports (for the CLI, everything `main` does, its lazy imports included; for HTA,
`TraceAnalysis(...)` + `get_temporal_breakdown`), which is what the issue's "HTA's load +
temporal breakdown" names, without the fixed start-up both pay. Runs are interleaved
across tools, --repeat of each, and the least disturbed figure of each kind is kept (see
`best_of`). CPU time is reported because the machine is shared: other engineers' jobs
stretch wall time, much less the CPU a tool itself burns.

HTA lives only in its own virtualenv (/tmp/td-hta-venv, created with --system-site-packages
on first use); it is never a torchdoctor dependency. A tool that fails is reported as failed.

    python benchmarks/bench_analyze.py [--repeat 3] [--synthetic-mb 110]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO / "tests" / "data" / "traces"
# Seeded from a trace HTA can read (it fails on the Qwen trace with an AssertionError).
SEED_TRACE = "hta_a100_ws16_rank0.json.gz"
HTA_VENV = Path("/tmp/td-hta-venv")
HTA_REQUIREMENT = "HolisticTraceAnalysis==0.5.*"
#: HTA 0.5 imports psutil without declaring it; the venv sees the system site-packages only,
#: which may not hold it.
HTA_EXTRAS = ("psutil",)

# Each child's usage(): its CPU s and peak RSS kB. Peak RSS is the child's own VmHWM:
# ru_maxrss of RUSAGE_SELF survives exec on Linux, so it would report the benchmark parent's
# size at spawn time when that is larger (it did: 180 MB for a 45 MB job).
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

# Each child prints, as its last line: CPU s, peak RSS kB, idle %, and the seconds of the
# work itself (load + analysis, timed in-process after the tool's imports: the interpreter's
# start and the imports are a fixed cost the wall column holds). Wall time is the parent's.
TORCHDOCTOR_CLI_CHILD = """
import contextlib, io, json, resource, sys, time
from torchdoctor.cli.main import main
out = io.StringIO()
t0 = time.perf_counter()
with contextlib.redirect_stdout(out):
    code = main(["--json", "analyze", sys.argv[1], "--no-report"])
work = time.perf_counter() - t0
sys.stdout.write(out.getvalue())
measured = usage()
dt = json.loads(out.getvalue())["device_timeline"]
print(*measured, None if dt is None else round(dt["idle_pct"], 2), work, file=sys.stderr)
sys.exit(code)
"""

TORCHDOCTOR_API_CHILD = """
import resource, sys, time
from torchdoctor.analyze import analyze_trace
t0 = time.perf_counter()
r = analyze_trace(sys.argv[1])
work = time.perf_counter() - t0
dt = r.device_timeline
print(*usage(), None if dt is None else round(dt.idle_pct, 2), work, file=sys.stderr)
"""

HTA_CHILD = """
import resource, sys, logging, time
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
df = a.get_temporal_breakdown(visualize=False)
work = time.perf_counter() - t0
print(*usage(), round(float(df["idle_time_pctg"].iloc[0]), 2), work, file=sys.stderr)
"""


def ensure_hta() -> Path:
    python = HTA_VENV / "bin" / "python"
    probe = [str(python), "-c", "import hta, psutil"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    venv.create(HTA_VENV, system_site_packages=True, with_pip=True)
    install = [str(python), "-m", "pip", "install", "-q", HTA_REQUIREMENT, *HTA_EXTRAS]
    subprocess.run(install, check=True)
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


Result = tuple[float, float, float, str, float]  # wall s, CPU s, peak MB, idle %, work s
NAN = float("nan")
FAILED: Result = (NAN, NAN, NAN, "failed", NAN)


def run_child(python: str, code: str, target: Path) -> Result:
    """One run of a tool in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.run(
        [python, "-c", "import resource\n" + USAGE + code, str(target)],
        capture_output=True,
        text=True,
        env=CHILD_ENV,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return NAN, NAN, NAN, f"failed: {last[:70]}", NAN
    cpu, rss_kb, idle, work = proc.stderr.split()[-4:]
    return wall, float(cpu), float(rss_kb) / 1024, idle, float(work)


def best_of(runs: list[Result]) -> Result:
    """The least disturbed figure of each kind: min wall, min CPU, max peak memory.

    Other jobs on a shared machine only ever add time, so the minimum over repeats is the
    closest to a tool's own cost; wall and CPU minima may come from different runs.
    """
    ok = [r for r in runs if r[0] == r[0]]
    if not ok:
        return runs[0] if runs else FAILED
    return (
        min(r[0] for r in ok),
        min(r[1] for r in ok),
        max(r[2] for r in ok),
        ok[0][3],
        min(r[4] for r in ok),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--synthetic-mb", type=float, default=110.0)
    parser.add_argument("--synthesize-to", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.synthesize_to is not None:  # the child that writes the synthetic trace
        print(synthesize(args.synthesize_to, args.synthetic_mb))
        return
    hta_python = str(ensure_hta())
    # Untimed warm-up: fills each tool's bytecode cache (see CHILD_ENV).
    for python, module in ((sys.executable, "torchdoctor.cli.analyze"), (hta_python, "hta")):
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
            f"{'trace':<40} {'tool':<18} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'idle %':>7}"
            f" {'work s':>7}"
        )
        print(header)
        print("-" * len(header))
        tools = {
            "torchdoctor CLI": (sys.executable, TORCHDOCTOR_CLI_CHILD, False),
            "torchdoctor API": (sys.executable, TORCHDOCTOR_API_CHILD, False),
            "HTA 0.5": (hta_python, HTA_CHILD, True),
        }
        for label, file_path, folder in cases:
            # Interleaved (CLI, API, HTA, CLI, ...), so a burst of load hits every tool alike.
            samples: dict[str, list[Result]] = {tool: [] for tool in tools}
            for _ in range(args.repeat):
                for tool, (python, code, takes_folder) in tools.items():
                    samples[tool].append(
                        run_child(python, code, folder if takes_folder else file_path)
                    )
            runs = {tool: best_of(results) for tool, results in samples.items()}
            for i, (tool, r) in enumerate(runs.items()):
                print(
                    f"{label if i == 0 else '':<40} {tool:<18} "
                    f"{r[0]:>7.2f} {r[1]:>7.2f} {r[2]:>8.0f} {r[3]:>7} {r[4]:>7.2f}"
                )
            hta = runs["HTA 0.5"]
            if hta[0] == hta[0]:  # not NaN
                for tool in ("torchdoctor CLI", "torchdoctor API"):
                    td = runs[tool]
                    pairs = [*zip(hta[:3], td[:3], strict=True), (hta[4], td[4])]
                    cells = [f"{h / t:>6.1f}x" for h, t in pairs]
                    ratios = " ".join([*cells[:3], " " * 7, cells[3]])
                    print(f"{'':<40} {'HTA / ' + tool[12:]:<18} {ratios}")


if __name__ == "__main__":
    main()
