"""`torchdoctor demo ARGS` with its diagnosis and its tuning replaced by the sample records of
tests/unit/report/report_samples.py, for tests/integration/test_demo_terminal.py's fast test:
the real CLI, its terminal detection, live view, result table and report, in a second.

The fake tuner does what `tune.api` does at each event, in the same order: `on_start` before
the baseline, then per trial `on_begin` as it starts, its record written to RUN_DIR/trials/,
then `on_trial`; tune.json last.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "report"))

from report_samples import diagnosis_record, trials, tune_record

import torchdoctor.cli.demo as demo
from torchdoctor.cli.main import main
from torchdoctor.core import rundir
from torchdoctor.tune import TuneConfig, TuneResult

PRESCRIBED = ["num_workers"]


def diagnose(
    workload: str, out: Path | None, *, device: str, params: dict[str, Any] | None = None
) -> tuple[Path, list[str]]:
    run_dir = rundir.new_run_dir("tune", workload, out=out)
    diagnosis_record().write(run_dir / rundir.DIAGNOSIS)
    return run_dir, list(PRESCRIBED)


def tune(*, config: TuneConfig, out: Path, on_start: Any, on_trial: Any) -> TuneResult:
    elapsed = [0.0]
    tuner = SimpleNamespace(
        settings=SimpleNamespace(budget_s=config.budget_s),
        planned_order=list(config.knobs or []),
        log_dir=out / "logs",  # tune.api.LOGS: the diagnosis is read from its parent
        budget=SimpleNamespace(elapsed_s=lambda: elapsed[0]),
        on_begin=None,
        on_look=None,
    )
    on_start(tuner, len(tuner.planned_order) + 1)
    (out / rundir.TRIALS).mkdir()
    for i, trial in enumerate(trials()):
        tuner.on_begin(trial.change)
        elapsed[0] += 10.0
        trial.write(out / rundir.TRIALS / f"{i:03d}-{trial.kind}.json")
        on_trial(trial, tuner)
    result = tune_record(out)
    result.write(out / rundir.TUNE)
    rundir.finish_run_dir(out)
    return result


def _run_with_progress(**kwargs: Any) -> TuneResult:
    import importlib

    import torchdoctor.cli.tune as tune_cli

    # By its full name: `torchdoctor.tune` on the package is the Python API's function.
    importlib.import_module("torchdoctor.tune").tune = tune
    return tune_cli.run_with_progress(**kwargs)


if __name__ == "__main__":
    demo.diagnose_into_run_dir = diagnose  # type: ignore[assignment]
    demo.run_with_progress = _run_with_progress  # type: ignore[assignment]
    sys.exit(main(sys.argv[1:]))
