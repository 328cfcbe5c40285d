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
at the end, so a folder left by a killed run says so instead of looking finished; a run
stopped by Ctrl-C, SIGTERM or SIGHUP (core/interrupt.py) is rewritten "interrupted", with
the signal in `error`.

While a process writes a folder it holds an exclusive lock on `RUN_DIR/.writing` (`flock`,
which the kernel drops when the process ends, however it ends): a second process that would
write the same folder (a `tune --resume` of a study still running, a `--force` into it) is
refused in one line instead of interleaving its records with the first's (`hold_run_dir`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from torchdoctor._version import __version__
from torchdoctor.core.errors import RecordError
from torchdoctor.core.interrupt import Interrupted
from torchdoctor.core.records import Record
from torchdoctor.core.redact import redact_argv, redact_secrets

RunKind = Literal[
    "run", "profile", "analyze", "diagnose", "tune", "demo", "scale", "serve", "diff", "memory"
]
RunStatus = Literal["running", "complete", "failed", "interrupted"]

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
#: A tune's stored study: its settings (what --resume continues) and its trials (Optuna's
#: SQLite storage, unless --storage names a shared one).
TUNE_CONFIG = "tune_config.json"
STUDY = "study.db"
SCALING = "scaling.json"
SERVE = "serve.json"
DIFF = "diff.json"
#: Memory to its owners at a few batch sizes, and the largest batch under a budget (memory).
MEMORY = "memory.json"
#: Memory per rank of a model sharded over N ranks, estimated without materialising it
#: (memory --nproc).
SHARD_PLAN = "shard_plan.json"
TRIALS = "trials"
#: Sub-folder of a tune run folder holding the diagnosis run that ordered its ladder (its
#: diagnosis.json is copied up; its analysis.json and trace stay there).
DIAGNOSIS_SUBDIR = "diagnosis"
TRACE = "trace.json.gz"
REPORT_HTML = "report.html"
REPORT_MD = "report.md"


def of_rank(record: str, rank: int) -> str:
    """The file of one rank's `record` in a job's run folder: `diagnosis.rank1.json` for
    `DIAGNOSIS`; the run folder's own name holds the job's (or the first rank's)."""
    stem, dot, ext = record.partition(".")
    return f"{stem}.rank{rank}{dot}{ext}"


def of_ranks(record: str) -> str:
    """A glob of every rank's `record` file (`of_rank`)."""
    stem, dot, ext = record.partition(".")
    return f"{stem}.rank*{dot}{ext}"


#: Where run folders go when the user does not say (`--out`), relative to the working dir.
DEFAULT_RUNS_ROOT = Path("torchdoctor-runs")
#: Environment variable that moves the default runs root (CI jobs, the test suite).
RUNS_ROOT_ENV = "TORCHDOCTOR_RUNS_DIR"


#: The lock a process writing a run folder holds (`hold_run_dir`); gone once it finishes.
WRITING = ".writing"
#: The folders this process holds, by resolved path, and the open lock file of each: a
#: process may come back to a folder it holds (demo's diagnosis, then its tune).
_HELD: dict[Path, int] = {}


def hold_run_dir(run_dir: Path) -> None:
    """Hold `run_dir` for this process's writes until `finish_run_dir`; a folder another live
    process holds is refused with one line naming it."""
    key = Path(run_dir).resolve()
    if key in _HELD:
        return
    fd = os.open(key / WRITING, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "another process"
        os.close(fd)
        raise RecordError(
            f"run folder {run_dir} is being written by process {holder}",
            hint="wait for that run to end (or stop it), then try again",
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _HELD[key] = fd


def release_run_dir(run_dir: Path) -> None:
    """Let go of a folder this process holds (`hold_run_dir`); nothing if it holds none."""
    fd = _HELD.pop(Path(run_dir).resolve(), None)
    if fd is None:
        return
    with contextlib.suppress(OSError):
        (Path(run_dir) / WRITING).unlink()
    os.close(fd)


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
    hold_run_dir(out)
    # The command line may name a database with its password (`tune --storage URL`): a run
    # folder is shared, the password is not (core/redact.py).
    manifest = RunManifest(
        kind=kind, target=target, command=redact_argv(list(sys.argv)), created=_now()
    )
    manifest.write(out / MANIFEST)
    return out


def finish_run_dir(
    run_dir: Path, *, error: str | None = None, interrupted: bool = False, release: bool = True
) -> RunManifest:
    """Mark a run folder complete (or failed, with the one-line reason; or, with
    `interrupted`, stopped by a signal, the reason naming it), and let go of it unless
    `release` is off (more is written after: `finishing`'s reports)."""
    manifest = read_manifest(run_dir)
    status: RunStatus = "interrupted" if interrupted else "failed" if error else "complete"
    done = manifest.model_copy(
        update={
            "finished": _now(),
            "status": status,
            "error": redact_secrets(error) if error else error,
        }
    )
    done.write(run_dir / MANIFEST)
    if release:
        release_run_dir(run_dir)
    return done


@contextlib.contextmanager
def finishing(run_dir: Path, reports: Callable[[], object] | None = None) -> Iterator[None]:
    """Write a run folder's records in the block, then mark it complete, then write its
    `reports` (rendered from the folder, status included).

    A write that fails (a full disk, a folder made read-only), the reports' included, marks
    the folder failed where it still can and raises one line instead of a traceback: a
    folder that stays "complete" has its records and its reports.
    """
    try:
        yield
        finish_run_dir(run_dir, release=False)
        if reports is not None:
            reports()
        release_run_dir(run_dir)
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        where = f" {exc.filename}" if exc.filename else f" into {run_dir}"
        error = f"cannot write{where}: {why}"
        with contextlib.suppress(OSError, RecordError):
            finish_run_dir(run_dir, error=error)
        raise RecordError(
            error, hint="free some space (or write elsewhere with --out) and run it again"
        ) from None


@contextlib.contextmanager
def marking_outcome(run_dir: Path) -> Iterator[None]:
    """Write a run folder's records in the block: leaving it marks the folder complete, or
    failed with the first line of what ended it (an interruption too), which goes on."""
    try:
        yield
    except BaseException as exc:
        text = str(exc)
        finish_run_dir(run_dir, error=text.splitlines()[0] if text else repr(exc))
        raise
    finish_run_dir(run_dir)


@contextlib.contextmanager
def marking_interruption(run_dir: Path) -> Iterator[None]:
    """Inside, an interruption (Ctrl-C, SIGTERM, SIGHUP: core/interrupt.py) marks `run_dir`
    "interrupted" and goes on as an `Interrupted` that names it, so the command says where
    what was done is."""
    try:
        yield
    except KeyboardInterrupt as exc:
        stopped = Interrupted.of(exc, run_dir)
        finish_run_dir(run_dir, error=str(stopped), interrupted=True)
        raise stopped from None


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
