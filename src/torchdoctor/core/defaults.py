"""The defaults the commands and the Python API share: one value each, read by both.

`torchdoctor tune --budget` and `torchdoctor.tune(budget_s=...)` start from the same number
because both read it here (tests/unit/test_api_surface.py walks the commands and the functions
and fails on a default that differs). A default that is a statistical choice says why where
it is defined; one that is only a command's habit says what it is for.
"""

from __future__ import annotations

from typing import Final

#: Fewest replicates that give an interval: with two, t's 97.5% quantile at one degree of
#: freedom is 12.7 and the interval spans orders of magnitude.
MIN_REPLICATES: Final = 3
#: Replicates of a replicated A/B when time allows (the tuner's final confirmation, `run
#: --vs-baseline`). Student's t quantile falls from 4.30 (3 pairs) to 3.18 (4) and 2.78 (5)
#: at 95%: the fourth pair narrows the interval by a quarter, a fifth by another eighth for a
#: quarter more time.
DEFAULT_REPLICATES: Final = 4

#: Warm-up steps before the settle rule is even asked: the compiling step, and two after it
#: for allocator caches and CPU frequency (`run`'s `--warmup`).
MIN_WARMUP_STEPS: Final = 3

#: Keep a change only when the CI's lower bound of its speedup exceeds 1 + this. 2% sits above
#: the run-to-run drift of identical code on a shared CPU (about 1%, see
#: torchdoctor.measure's DEFAULT_MIN_EFFECT) and below the gain any knob is worth keeping for.
DEFAULT_MIN_GAIN: Final = 0.02

#: `tune --budget`: wall time of a study, a hard stop (10 minutes: a ladder of the built-in
#: workloads' knobs with its final A/B on a laptop CPU).
TUNE_BUDGET_S: Final = 600.0

#: `diagnose --warmup`, `--profile-steps`: steps before the profiled window (compilation and
#: the allocator's growth stay out of it) and steps profiled.
DIAGNOSE_WARMUP: Final = 5
DIAGNOSE_PROFILE_STEPS: Final = 5
#: Steps a workload's diagnosis times when `--steps` is not given (a script runs until it
#: ends unless `--steps` stops it).
DIAGNOSE_WORKLOAD_STEPS: Final = 20

#: `bench --budget`, `--confidence`, `--target`: time spent at most, the interval's level,
#: and the half-width (a fraction of the median) at which timing stops.
BENCH_BUDGET_S: Final = 10.0
BENCH_CONFIDENCE: Final = 0.95
BENCH_TARGET_REL_CI: Final = 0.01
#: `bench --setup`: the statement run once before (none).
BENCH_SETUP: Final = "pass"

#: `profile --wait`, `--warmup`, `--active`: torch.profiler's schedule (steps unprofiled, the
#: profiler's own warm-up, steps recorded).
PROFILE_WAIT: Final = 1
PROFILE_WARMUP: Final = 2
PROFILE_ACTIVE: Final = 3

#: `analyze --top`: ops listed, heaviest first.
ANALYZE_TOP: Final = 15

#: `report --format`.
REPORT_FORMAT: Final = "html"

#: `scale --nproc`, `--mode`, `--batch`, `--steps`: the world sizes measured (one process and
#: two: the smallest study with a speedup), samples per rank (weak scaling), steps at each N.
SCALE_NPROC: Final = (1, 2)
SCALE_MODE: Final = "weak"
SCALE_BATCH: Final = 256
SCALE_STEPS: Final = 30
#: `scale --project-to`: the world sizes the model T(N) projects to.
SCALE_PROJECT_TO: Final = (4, 8, 16)
#: `scale --job-timeout`: one world size's job, ended with its ranks after this (the scale
#: stage's own `launch.JOB_TIMEOUT_S`, tests/unit/test_api_surface.py holds them equal).
SCALE_JOB_TIMEOUT_S: Final = 900.0

#: `serve --search`, `--arrivals`, `--max-batch`, `--max-delay-ms`, `--budget`: the SLA
#: search's walk, the open-loop arrival process, the largest batch the curve tries, the
#: batcher's queue delay (Triton's default, 0) and the batch-1 latency windows' time.
SERVE_SEARCH: Final = "binary"
SERVE_ARRIVALS: Final = "poisson"
SERVE_MAX_BATCH: Final = 64
SERVE_MAX_DELAY_MS: Final = 0.0
SERVE_BUDGET_S: Final = 10.0

#: `demo --budget`: 8 minutes of tuning leaves two of the demo's ten for the diagnosis (10 s
#: on a quiet 2-core machine, about a minute on a busy one), the budget's grace period (the
#: budget is a hard stop: see torchdoctor.tune.tuner.BUDGET_GRACE_S) and writing the run
#: folder and report. `--quick` sizes its own (tune/demo.py `quick_budget_s`).
DEMO_BUDGET_S: Final = 480.0
