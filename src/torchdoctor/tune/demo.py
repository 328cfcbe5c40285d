"""The demo's plan: which built-in workload and knobs `torchdoctor demo` (and
`torchdoctor.demo`) tunes on a device, in what order, with what budget, and what `--quick`
leaves out and says so.

The `cnn` on any CPU; on a GPU, GPT-2 small (`gpt2-small`, a preset of the built-in gpt) with
the GPU's knobs, since the small cnn's step there is mostly the host's data loading (an H200
ran it 55-73% in the DataLoader), a story no GPU user recognises (`demo_story`). The
diagnosis runs first into RUN_DIR/diagnosis/; its prescribed knobs, largest Amdahl bound
first, lead the ladder (`demo_config`).

The default budget keeps the whole demo within ten minutes on a 2-core CPU: the tuning budget
(core/defaults.py `DEMO_BUDGET_S`), plus the last trial's grace and process start-up.
`--quick` tells the same story (diagnosis, a few knobs proven, the final A/B, the report) in
about two minutes, and says in its output and its report what the smaller budget costs
(`quick_note`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from torchdoctor.core.defaults import DEMO_BUDGET_S
from torchdoctor.knobs import (
    ATTENTION,
    CHANNELS_LAST,
    COMPILE,
    CUDA_GRAPHS,
    CUDNN_BENCHMARK,
    OPTIMIZER_IMPL,
    PRECISION,
    TF32,
    THREADS,
)
from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.config import TuneConfig
from torchdoctor.tune.cost import study_budget_s
from torchdoctor.tune.prescriptions import diagnosed_step_s

DEMO_WORKLOAD: Final = "cnn"
#: On a GPU: GPT-2 small's shape with hand-written attention (workloads/registry.py PRESETS).
GPU_DEMO_WORKLOAD: Final = "gpt2-small"

#: The full demo's tuning budget as a user writes it (core/defaults.py `DEMO_BUDGET_S` says
#: why 8 minutes).
DEFAULT_DEMO_BUDGET: Final = f"{DEMO_BUDGET_S / 60:g}m"

#: The knobs that matter for a small convolutional net on a CPU (compilation, memory format,
#: threads, optimizer implementation, precision). Data-loading knobs join through the
#: diagnosis when it finds a data-wait bound; CUDA-only knobs do not apply; the whole
#: catalogue would not fit in the demo's budget.
DEMO_KNOBS: Final = tuple(
    k.name for k in (COMPILE, CHANNELS_LAST, THREADS, OPTIMIZER_IMPL, PRECISION)
)
#: On a GPU: the same net's knobs there. Precision and cuDNN's autotuner first (a conv net on
#: tensor cores), TF32 for what stays fp32, CUDA graphs for a small net's launch overhead,
#: then memory format, compilation and the optimizer; threads set the CPU's intra-op pool,
#: which a GPU job's kernels do not run on.
DEMO_GPU_KNOBS: Final = tuple(
    k.name
    for k in (PRECISION, CUDNN_BENCHMARK, TF32, CUDA_GRAPHS, CHANNELS_LAST, COMPILE, OPTIMIZER_IMPL)
)

#: GPT-2 small on a GPU: precision first (its GEMMs on tensor cores), compilation (fusing its
#: elementwise chains), attention (the fused kernel in place of the hand-written T x T
#: scores), CUDA graphs, the fused optimizer, then TF32 for what stays fp32. channels_last
#: and cudnn_benchmark do not apply: the model has no convolutions.
GPU_DEMO_GPT_KNOBS: Final = tuple(
    k.name for k in (PRECISION, COMPILE, ATTENTION, CUDA_GRAPHS, OPTIMIZER_IMPL, TF32)
)
#: Said on a GPU, in the output and the report: which workload and why.
GPU_STORY_NOTE: Final = (
    f"demo on a GPU: {GPU_DEMO_WORKLOAD}, the built-in gpt at GPT-2 small's shape (12 layers, "
    "12 heads, 768 wide, 1024-token context) with its attention written by hand, so that the "
    "step is the GPU's work and its knobs (precision, compilation, fused attention, CUDA "
    "graphs, the fused optimizer) have something to win; on a CPU the demo tunes the small cnn"
)


def demo_story(device: str) -> tuple[str, tuple[str, ...], list[str]]:
    """(workload, its knobs in order, notes saying why) for `device`: on a GPU the GPU story,
    elsewhere the CPU's, unchanged."""
    if device.split(":", 1)[0] == "cuda":
        return GPU_DEMO_WORKLOAD, GPU_DEMO_GPT_KNOBS, [GPU_STORY_NOTE]
    return DEMO_WORKLOAD, DEMO_KNOBS, []


#: Knobs `--quick` tries: the diagnosis's prescriptions first, then DEMO_KNOBS' order. Each
#: costs a trial (a fresh candidate process, its warm-up, its A/B) and a win a second pair;
#: the quick budget is sized for three beside the baseline and the final A/B's three pairs.
#: A knob is one trial where it wins: once a value is kept its other values are not tried
#: (`TuneConfig.values_after_keep`). On a 2-core EPYC (2026-11-28) fp16 after a bf16 keep ran
#: 0.05x, futile, and its trial was what the third knob then lacked.
QUICK_KNOBS: Final = 3
#: What the cnn's trial parts cost, by device class, as recorded: a fresh process's start to
#: ready, one steady step, and the warm-up steps after the start (the settle rule's, which
#: `tune.TrialCosts.open_s` counts with the start). `quick_budget_s` sizes `--quick`'s budget
#: from them, with the step the diagnosis measured on this device in place of the recorded
#: one. On a GPU a process start dwarfs a step: an H200's cnn baseline (2026-11-28,
#: tests/data/h200/) took 11.8 s to its first chunk, warm-up included, at 33 ms a step, where a
#: fixed 90 s budget tried no knob. On a 2-core CPU a start costs several seconds and the steps
#: dominate (the quality yardstick alone retrains the baseline 6 x 32 steps): ~0.1 s a step on
#: the EPYC CI host, about twice that on a 2-core Xeon. A fresh process there took 7.0 s to
#: start and build, then 0.9 s (9 steps) to warm up: a quiet 2-core EPYC's `demo --quick`
#: (2026-11-28) spent 65.6 s on its final A/B's six processes, each 7.0 s, 0.9 s of warm-up
#: and 3 s of steady steps.
QUICK_COSTS: Final = {"cuda": (11.8, 0.034, 0), "cpu": (7.0, 0.1, 9)}
#: What ending a fresh process costs (`tune.TrialCosts.close_s`): a cnn worker's close took
#: 0.77-1.09 s on a quiet 2-core EPYC (2026-11-29), the kernel tearing down its memory. No
#: GPU close is recorded: the CPU's figure stands in for both.
QUICK_CLOSE_S: Final = 0.9
#: The quick budget is rounded up to this many seconds.
QUICK_BUDGET_STEP_S: Final = 10.0
#: Left out of `--quick`: torch.compile's compilation takes tens of seconds per process on a
#: 2-core CPU, paid again by each fresh process of the win's second pair and the final A/B.
QUICK_LEFT_OUT: Final = (COMPILE.name,)
#: `--quick`'s A/Bs stop at 12 scored rounds instead of 24 (`tune.arms.DEFAULT_ROUNDS`): clear
#: wins and losses stop at the first look (6 rounds) either way; close calls, which need the
#: longer schedule to clear 1 + min_gain, are left unproven (tune/arms.py says why 24).
QUICK_PLAN: Final = MeasurePlan(rounds=12)
#: What `--quick` sets in its study: the shorter A/Bs, no batch-size search, one trial per
#: knob where it wins (QUICK_KNOBS says why).
QUICK_SETTINGS: Final[dict[str, object]] = {
    "plan": QUICK_PLAN,
    "search_batch": False,
    "values_after_keep": False,
}


def quick_budget_s(device: str, *, step_s: float | None = None) -> float:
    """`--quick`'s tuning budget on `device`: the baseline, QUICK_KNOBS ladder trials, one
    win's second pair and the final A/B's fewest pairs at the trial costs recorded for its
    device class (`QUICK_COSTS`: a process open is its start and its warm-up steps,
    `QUICK_CLOSE_S` its end; `tune.study_budget_s`); `step_s`, a step measured on the device,
    in place of the recorded one."""
    on_gpu = device.split(":", 1)[0] == "cuda"
    start_s, recorded_step_s, warmup_steps = QUICK_COSTS["cuda" if on_gpu else "cpu"]
    step_s = step_s or recorded_step_s
    need = study_budget_s(
        open_s=start_s + warmup_steps * step_s,
        step_s=step_s,
        plan=QUICK_PLAN,
        knobs=QUICK_KNOBS,
        twin=on_gpu,
        close_s=QUICK_CLOSE_S,
    )
    rounded = QUICK_BUDGET_STEP_S * math.ceil(need / QUICK_BUDGET_STEP_S)
    # Never more than the full demo's: where steps are that slow, `--quick` is not quick.
    return min(rounded, DEMO_BUDGET_S)


def demo_knobs(
    prescribed: list[str], *, device: str, quick: bool, listed: tuple[str, ...] | None = None
) -> list[str]:
    """The knobs the demo tries, in order: prescriptions first (tried even outside the
    device's list), then `listed` (default DEMO_KNOBS, DEMO_GPU_KNOBS on a GPU); with
    `quick`, the first QUICK_KNOBS not left out."""
    if listed is None:
        listed = DEMO_GPU_KNOBS if device.split(":", 1)[0] == "cuda" else DEMO_KNOBS
    knobs = [*prescribed, *(k for k in listed if k not in prescribed)]
    if quick:
        knobs = [k for k in knobs if k not in QUICK_LEFT_OUT][:QUICK_KNOBS]
    return knobs


def quick_note(budget_s: float, knobs: list[str]) -> str:
    """What `--quick`'s smaller budget costs, said in its output and its report."""
    return (
        f"demo --quick: a {budget_s:.0f} s budget and {len(knobs)} knobs "
        f"({', '.join(knobs)}; not {', '.join(QUICK_LEFT_OUT)}, whose compilation alone takes "
        "tens of seconds per process here), no other value of a knob once one is kept, "
        "no batch-size search, A/Bs of at most "
        f"{QUICK_PLAN.rounds} rounds (24 in the full demo) and a final A/B of as few as 3 fresh "
        "process pairs: intervals are wider and gains under about 10% more often go unproven. "
        f"The full demo (`torchdoctor demo`, {DEFAULT_DEMO_BUDGET} of tuning) tries more."
    )


def demo_config(
    run_dir: Path,
    prescribed: list[str],
    *,
    device: str,
    budget_s: float | None,
    quick: bool,
    factory_options: Mapping[str, Any],
) -> TuneConfig:
    """The study the demo runs on `device` once its diagnosis in `run_dir` prescribed
    `prescribed`: the device's story and knobs (`demo_story`, `demo_knobs`), `budget_s`, else
    the full demo's or, with `quick`, one sized from the step just diagnosed
    (`quick_budget_s`); the story's and `quick`'s notes said in the result."""
    workload, listed, story = demo_story(device)
    if budget_s is None:
        # Quick: sized for this device, its recorded process start, the step just diagnosed.
        budget_s = (
            quick_budget_s(device, step_s=diagnosed_step_s(run_dir)) if quick else DEMO_BUDGET_S
        )
    knobs = demo_knobs(prescribed, device=device, quick=quick, listed=listed)
    notes = [*story, *([quick_note(budget_s, knobs)] if quick else [])]
    return TuneConfig(
        workload=workload,
        device=device,
        budget_s=budget_s,
        knobs=knobs,
        prescribed=[k for k in prescribed if k in knobs],
        notes=notes,
        factory_options=dict(factory_options),
        **(QUICK_SETTINGS if quick else {}),
    )
