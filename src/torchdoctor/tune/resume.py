"""Resuming a study from its run folder, which is data, never code.

A run folder is shared and received (attached to a bug report, copied from a colleague). Its
settings (budget, knobs, plan) are read from it, but nothing in it runs or connects on its
own word: what would run code or reach a server (a script's command and the folder it runs
in, a workload file, a session factory and its options, the storage) is what the caller
gives again, checked against the folder's, and a difference or an omission is refused in one
line before anything runs. The storage's password is held in memory while the study runs,
and out of the environment its workers and scripts inherit (`secrets_held`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torchdoctor.core.errors import RecordError, TuneError
from torchdoctor.core.redact import SECRET_ENV, redact_argv
from torchdoctor.core.rundir import hold_run_dir, read_manifest
from torchdoctor.procs import ENGINE_FACTORY
from torchdoctor.tune.config import CONFIG_FILE, TuneConfig
from torchdoctor.tune.storage import StorageURL


def open_resume(
    run_dir: Path,
    workload: str | None,
    command: tuple[list[str], bool] | None = None,
    *,
    given: TuneConfig | None = None,
    storage: StorageURL | None = None,
) -> TuneConfig:
    """The study in `run_dir`, with what runs code taken from the caller, never from the folder.

    A run folder is shared and received; it is data. Its settings (budget, knobs, plan) are
    read from it, but what would run code or reach a server (a script's command and the
    folder it runs in, a workload file, a session factory and its options, the storage) is
    what the caller gives again (`workload`, `command`, `given`, `storage`), checked against
    the folder's: a difference or an omission is refused, before anything runs.
    """
    try:
        manifest = read_manifest(run_dir)
        config = TuneConfig.read(run_dir / CONFIG_FILE)
    except RecordError as exc:
        raise TuneError(f"cannot resume from {run_dir}: {exc}") from None
    if manifest.kind not in ("tune", "demo"):
        raise TuneError(f"cannot resume from {run_dir}: it is a {manifest.kind} run, not a tune")
    if given is not None:
        workload = given.workload if workload is None else workload
        if command is None and given.command is not None:
            command = (list(given.command), given.module)
    _check_workload_given(run_dir, config, workload, command)
    _check_command_given(run_dir, config, command, given)
    _check_factory_given(run_dir, config, given)
    _check_storage_given(run_dir, config, storage)
    try:
        # A study whose tuner still runs is continued by that tuner, not a second one.
        hold_run_dir(run_dir)
    except RecordError as exc:
        raise TuneError(str(exc), hint=exc.hint) from None
    trusted: dict[str, Any] = {"factory": ENGINE_FACTORY, "factory_options": {}}
    if given is not None:
        trusted = {"factory": given.factory, "factory_options": dict(given.factory_options)}
    if command is not None:
        trusted.update(command=list(command[0]), module=command[1], cwd=_cwd_of(given))
    return config.model_copy(update=trusted)


def _cwd_of(given: TuneConfig | None) -> str:
    return given.cwd if given is not None and given.cwd else os.getcwd()


def _is_user_file(workload: str) -> bool:
    """Whether a workload name is a user's file (`path/file.py:factory`), which imports code."""
    return ":" in workload or workload.endswith(".py")


def _check_workload_given(
    run_dir: Path, config: TuneConfig, workload: str | None, command: Any
) -> None:
    if workload is not None and workload != config.workload:
        raise TuneError(
            f"run folder {run_dir} tunes workload {config.workload!r}, not {workload!r}",
            hint=f"resume without a workload, or with {config.workload!r}",
        )
    if workload is None and config.command is None and _is_user_file(config.workload):
        raise TuneError(
            f"run folder {run_dir} tunes the workload file {config.workload!r}, which resume "
            "does not import on the folder's word",
            hint=f"name it again: tune {config.workload} --resume {run_dir}",
        )


def _check_command_given(
    run_dir: Path,
    config: TuneConfig,
    command: tuple[list[str], bool] | None,
    given: TuneConfig | None,
) -> None:
    if config.command is None:
        if command is not None:
            raise TuneError(
                f"run folder {run_dir} tunes workload {config.workload!r}, not a script",
                hint="resume without a command",
            )
        return
    was = shlex.join([*(["-m"] if config.module else []), *config.command])
    if command is None:
        raise TuneError(
            f"run folder {run_dir} tunes the script command {was!r}, which resume does not run "
            "on the folder's word",
            hint=f"give it again: tune --resume {run_dir} -- python {was}",
        )
    # A script's study is keyed by its command: another command is another study. The folder
    # keeps the command with its secrets masked (TuneConfig.write), so the given one is
    # compared as it would be kept.
    if (config.command, config.module) != (redact_argv(list(command[0])), command[1]):
        raise TuneError(
            f"run folder {run_dir} tunes {' '.join(config.command)!r}, "
            f"not {' '.join(redact_argv(list(command[0])))!r}",
            hint="resume with the study's own command",
        )
    cwd = _cwd_of(given)
    if config.cwd is not None and Path(cwd).resolve() != Path(config.cwd).resolve():
        raise TuneError(
            f"run folder {run_dir} ran {was!r} in {config.cwd}, not in {cwd}",
            hint=f"resume from the folder the study ran in (cd {shlex.quote(config.cwd)})",
        )


def _check_factory_given(run_dir: Path, config: TuneConfig, given: TuneConfig | None) -> None:
    factory = given.factory if given is not None else ENGINE_FACTORY
    options = dict(given.factory_options) if given is not None else {}
    if config.factory != factory:
        raise TuneError(
            f"run folder {run_dir} builds its sessions with factory {config.factory!r}, which "
            "resume does not import on the folder's word",
            hint="resume from Python with the study's own config: "
            "tune(resume=RUN_DIR, config=config)",
        )
    if config.factory_options != options:
        raise TuneError(
            f"run folder {run_dir} calls factory {config.factory!r} with other options than "
            "the ones given",
            hint="resume from Python with the study's own config: "
            "tune(resume=RUN_DIR, config=config)",
        )


def _check_storage_given(run_dir: Path, config: TuneConfig, storage: StorageURL | None) -> None:
    if config.storage is None:
        if storage is not None:
            raise TuneError(
                f"run folder {run_dir} keeps its study in the folder, not in {storage.public!r}",
                hint="resume without --storage",
            )
        return
    if storage is None:
        raise TuneError(
            f"run folder {run_dir} keeps its study in {config.storage!r}, which resume does not "
            "open on the folder's word",
            hint=f"give it again: --storage {config.storage} (the password from PGPASSWORD, "
            "~/.pgpass or a service file)",
        )
    if storage.public != config.storage:
        raise TuneError(
            f"--storage {storage.public!r} is not the study's storage {config.storage!r}",
            hint="resume with the study's own storage URL",
        )


@contextlib.contextmanager
def secrets_held(storage: StorageURL | None) -> Iterator[StorageURL | None]:
    """`storage` with libpq's password taken from the environment into memory, and libpq's
    secret variables out of this process's environment while the study runs, so that no
    worker or script the tuner starts inherits them; put back afterwards."""
    if storage is None or storage.is_sqlite:
        yield storage
        return
    saved = {name: os.environ[name] for name in SECRET_ENV if name in os.environ}
    try:
        yield storage.with_environment_password(os.environ)
    finally:
        os.environ.update(saved)
