"""`torchdoctor demo`: diagnose and tune the built-in `cnn` workload, end to end, on any CPU
or on the GPU (with the GPU's knobs there).

The diagnosis (`torchdoctor.diagnose`) runs first into RUN_DIR/diagnosis/; its prescribed
knobs, largest Amdahl bound first, lead the ladder. The report stage renders the folder.

The default budget keeps the whole demo within ten minutes on a 2-core CPU: the tuning budget
below, plus the last trial's grace and process start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import typer

from torchdoctor.cli.main import app
from torchdoctor.cli.options import default_device, device_option
from torchdoctor.cli.state import err_console, settings
from torchdoctor.cli.tune import (
    diagnose_into_run_dir,
    finish_with_report,
    parse_duration,
    run_with_progress,
)
from torchdoctor.core.rundir import display_path
from torchdoctor.knobs import (
    CHANNELS_LAST,
    COMPILE,
    CUDA_GRAPHS,
    CUDNN_BENCHMARK,
    OPTIMIZER_IMPL,
    PRECISION,
    TF32,
    THREADS,
)
from torchdoctor.tune import TuneConfig

DEMO_WORKLOAD: Final = "cnn"

#: 8 minutes of tuning leaves two of the demo's ten for the diagnosis (10 s on a quiet 2-core
#: machine, about a minute on a busy one), the budget's grace period (the budget is a hard
#: stop: see torchdoctor.tune.tuner.BUDGET_GRACE_S) and writing the run folder and report.
DEFAULT_DEMO_BUDGET: Final = "8m"

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


def demo_knobs(device: str) -> tuple[str, ...]:
    """The demo's knobs for the device it runs on."""
    return DEMO_GPU_KNOBS if device.split(":", 1)[0] == "cuda" else DEMO_KNOBS


@app.command("demo")
def demo_command(
    budget: str = typer.Option(DEFAULT_DEMO_BUDGET, "--budget", help="Tuning budget, e.g. 8m."),
    out: Path = typer.Option(None, "--out", help="Run folder to create."),
    device: str | None = device_option(),
) -> None:
    """Diagnose and tune the built-in cnn workload; write the run folder and print its path."""
    budget_s = parse_duration(budget)
    device = default_device(device)
    run_dir, prescribed = diagnose_into_run_dir(DEMO_WORKLOAD, out, device=device)
    config = TuneConfig(
        workload=DEMO_WORKLOAD,
        device=device,
        budget_s=budget_s,
        # The diagnosis's prescriptions come first and are tried even outside DEMO_KNOBS.
        knobs=[*prescribed, *(k for k in demo_knobs(device) if k not in prescribed)],
        prescribed=prescribed,
    )
    result = run_with_progress(config=config, out=run_dir)
    finish_with_report(result)
    if not settings.json:
        err_console.print(f"demo run folder: {display_path(Path(result.run_dir))}")
