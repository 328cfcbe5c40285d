"""The run folder: where every command that does real work leaves its records.

Layout (a file is present only if the command that made the folder produces it)::

    RUN_DIR/
      run.json          RunManifest: what ran, when, with which torchdoctor, and its status
      env.json          {"fingerprint": ..., "ceilings": ...}
      diagnosis.json    Diagnosis        (diagnose, demo)
      analysis.json     TraceAnalysis    (analyze, profile, diagnose)
      profile.json      ScriptProfile    (diagnose of a script)
      run_result.json   RunResult        (run, profile of a built-in workload)
      tune.json         TuneResult       (tune, demo)
      scaling.json      ScalingStudy     (scale)
      serve.json        ServeResult      (serve)
      diff.json         RunDiff          (diff)
      memory.json       MemoryPlan       (memory)
      trials/           one TrialResult per trial (tune)
      trace.json.gz     the Kineto trace of the profiled window
      report.html, report.md

The manifest is written first with status "running" and rewritten "complete" or "failed"
at the end, so a folder left by a killed run says so instead of looking finished.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from torchdoctor._version import __version__
from torchdoctor.core.errors import RecordError
from torchdoctor.core.records import Record
from torchdoctor.core.redact import redact_argv, redact_secrets

RunKind = Literal[
    "run", "profile", "analyze", "diagnose", "tune", "demo", "scale", "serve", "diff", "memory"
]
RunStatus = Literal["running", "complete", "failed"]

MANIFEST = "run.json"
ENV = "env.json"
DIAGNOSIS = "diagnosis.json"
#: A distributed job's ranks compared, and its whole diagnosis (diagnose/ranks.py).
CROSS_RANK = "cross_rank.json"
JOB_DIAGNOSIS = "job_diagnosis.json"
ANALYSIS = "analysis.json"
PROFILE = "profile.json"
RUN_RESULT = "run_result.json"
TUNE = "tune.json"
SCALING = "scaling.json"
SERVE = "serve.json"
DIFF = "diff.json"
#: Memory to its owners at a few batch sizes, and the largest batch under a budget (memory).
MEMORY = "memory.json"
TRIALS = "trials"
#: Sub-folder of a tune run folder holding the diagnosis run that ordered its ladder (its
#: diagnosis.json is copied up; its analysis.json and trace stay there).
DIAGNOSIS_SUBDIR = "diagnosis"
TRACE = "trace.json.gz"
REPORT_HTML = "report.html"
REPORT_MD = "report.md"

#: Where run folders go when the user does not say (`--out`), relative to the working dir.
DEFAULT_RUNS_ROOT = Path("torchdoctor-runs")
#: Environment variable that moves the default runs root (CI jobs, the test suite).
RUNS_ROOT_ENV = "TORCHDOCTOR_RUNS_DIR"


def runs_root() -> Path:
    """The folder new run folders go under when no `--out` is given."""
    return Path(os.environ.get(RUNS_ROOT_ENV) or DEFAULT_RUNS_ROOT)


class RunManifest(Record):
    """What made a run folder, and whether it finished."""

    schema_name: ClassVar[str] = "run"

    kind: RunKind
    target: str = Field(description="workload name, script command or trace path")
    command: list[str] = Field(default_factory=list)
    created: str
    finished: str | None = None
    status: RunStatus = "running"
    error: str | None = None
    torchdoctor_version: str = __version__


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def new_run_dir(kind: RunKind, target: str, *, out: Path | None = None) -> Path:
    """Create a fresh run folder (`out`, or a timestamped one under DEFAULT_RUNS_ROOT)."""
    if out is None:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(target).stem)[:40]
        out = runs_root() / f"{stamp}-{kind}-{safe or 'run'}"
        n = 1
        while out.exists():
            n += 1
            out = out.with_name(f"{out.name.rsplit('~', 1)[0]}~{n}")
    out.mkdir(parents=True, exist_ok=True)
    # The command line may name a database with its password (`tune --storage URL`): a run
    # folder is shared, the password is not (core/redact.py).
    manifest = RunManifest(
        kind=kind, target=target, command=redact_argv(list(sys.argv)), created=_now()
    )
    manifest.write(out / MANIFEST)
    return out


def finish_run_dir(run_dir: Path, *, error: str | None = None) -> RunManifest:
    """Mark a run folder complete (or failed, with the one-line reason)."""
    manifest = read_manifest(run_dir)
    done = manifest.model_copy(
        update={
            "finished": _now(),
            "status": "failed" if error else "complete",
            "error": redact_secrets(error) if error else error,
        }
    )
    done.write(run_dir / MANIFEST)
    return done


def read_manifest(run_dir: Path) -> RunManifest:
    if not run_dir.is_dir():
        raise RecordError(
            f"{run_dir}: no such run folder",
            hint="pass a folder written by torchdoctor diagnose, tune, analyze or demo",
        )
    if not (run_dir / MANIFEST).is_file():
        raise RecordError(
            f"{run_dir}: not a torchdoctor run folder (no {MANIFEST})",
            hint="pass a folder written by torchdoctor diagnose, tune, analyze or demo",
        )
    return RunManifest.read(run_dir / MANIFEST)


def display_path(path: Path) -> str:
    """A path as a user would type it: relative to the working dir when inside it, else
    absolute (never a climb of `../..`)."""
    absolute = Path(path).absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
