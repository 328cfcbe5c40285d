"""Three tuners on one study in a real PostgreSQL server, one of them SIGKILLed mid-step.

Each ladder step runs in one tuner only, the killed tuner's step is failed by its stale
heartbeat and retried by another, every survivor ends with the whole study, and the
database password given in the storage URL appears in nothing any of them wrote or printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import pg_server
from cli_output import one_error_line
from torchdoctor.cli.main import main
from torchdoctor.tune import StorageURL, tune
from torchdoctor.tune.claims import END_ATTR, KEY_ATTR, RECORD_ATTR
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.study import Study
from tune_sim import sim_config

KNOBS = [KnobSpec(f"noop{i}", (False, True), "exact", False) for i in range(3)]
#: The step whose first tuner hangs (tests/sim_session.py `stall_once`) and is killed.
STALLED = {"noop1": "True"}
TUNERS = 3
#: Seconds a tuner of this test waits between heartbeats (its grace: `GRACE_BEATS` of them).
HEARTBEAT_S = 1
DRIVER = Path(__file__).resolve().parents[1] / "shared_tuner.py"


@pytest.fixture(scope="module")
def server() -> Iterator[pg_server.PgServer]:
    started, why = pg_server.start()
    if started is None:
        if os.environ.get(pg_server.REQUIRE_ENV) == "1":  # CI (.ci/run): run, never skip
            pytest.fail(f"no throwaway PostgreSQL server: {why}")
        pytest.skip(f"no throwaway PostgreSQL server: {why}")
    yield started
    started.stop()


def _env() -> dict[str, str]:
    # The tuners import the simulated sessions from tests/, as spawned workers do.
    tests_dir = str(DRIVER.parent)
    paths = [tests_dir, *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("PGPASSWORD", None)  # the password comes from the URL alone
    return env


@pytest.mark.study  # three tuner processes and a real database server
def test_three_tuners_share_one_study_and_a_killed_ones_step_is_retried(
    server: pg_server.PgServer, tmp_path: Path
) -> None:
    log = tmp_path / "prepared.jsonl"
    stall = tmp_path / "stalled.pid"
    config = sim_config(
        KNOBS, noise=0.01, log_path=str(log), stall_once=STALLED, stall_path=str(stall)
    ).model_copy(update={"heartbeat_s": HEARTBEAT_S})
    config_path = tmp_path / "config.json"
    config.write(config_path)
    url = server.url()
    tuners = [
        subprocess.Popen(
            [sys.executable, str(DRIVER), str(config_path), str(tmp_path / f"run{i}"), url],
            stdout=(tmp_path / f"stdout{i}").open("w"),
            stderr=(tmp_path / f"stderr{i}").open("w"),
            env=_env(),
        )
        for i in range(TUNERS)
    ]
    try:
        deadline = time.monotonic() + 120
        while not (stall.exists() and stall.read_text()) and time.monotonic() < deadline:
            assert all(t.poll() is None for t in tuners), "a tuner ended before the stall"
            time.sleep(0.05)
        killed = int(stall.read_text())
        assert killed in [t.pid for t in tuners]
        os.kill(killed, signal.SIGKILL)
        codes = {t.pid: t.wait(timeout=120) for t in tuners}
    finally:
        for t in tuners:
            if t.poll() is None:
                t.kill()
    assert codes.pop(killed) == -signal.SIGKILL
    assert list(codes.values()) == [0] * (TUNERS - 1), _outputs(tmp_path)

    trials = Study(url).optuna_study.get_trials(deepcopy=False)
    recorded = [t for t in trials if RECORD_ATTR in t.user_attrs]
    keys = [t.user_attrs[KEY_ATTR] for t in recorded]
    assert len(keys) == len(set(keys)), "a step was stored twice"
    assert len(keys) == 1 + len(KNOBS)  # baseline + one step per knob (no win: no final A/B)
    # The study is complete: no step left waiting or running; the trials without a record
    # are the killed tuner's step and the duplicate claims withdrawn at once.
    states = Counter(t.state.name for t in trials)
    assert states["WAITING"] == states["RUNNING"] == 0
    lost = [t for t in trials if RECORD_ATTR not in t.user_attrs and END_ATTR not in t.user_attrs]
    assert len(lost) == 1 and lost[0].state.name == "FAIL"
    retry = next(t for t in recorded if t.user_attrs[KEY_ATTR] == lost[0].user_attrs[KEY_ATTR])
    assert retry.system_attrs.get("retry_history") == [lost[0].number]

    # No step ran twice: each candidate recipe was prepared by one trial (the stalled one by
    # its lost attempt and its retry), the baseline by its measurement and reference runs.
    prepared = Counter(log.read_text().splitlines())
    for knob in KNOBS:
        recipe = json.dumps({knob.name: True}, sort_keys=True)
        assert prepared[recipe] == (2 if knob.name in STALLED else 1), prepared

    # The results merged: each survivor's result holds every step, reused or its own.
    survivors = _survivors(tuners, killed)
    results = [json.loads((tmp_path / f"stdout{i}").read_text()) for i in survivors]
    for result in results:
        assert result["n_trials"] == len(keys)
    ran = sum(r["n_trials"] - r["n_reused"] for r in results)
    assert ran <= len(keys), "the survivors ran a step twice between them"

    _assert_password_nowhere(tmp_path, server.password)

    # A survivor's study resumes from its run folder, whose config names the storage without
    # its password: given again in memory, or from PGPASSWORD as libpq reads it.
    run = tmp_path / f"run{survivors[0]}"
    resumed = tune(resume=run, config=config, storage=StorageURL.parse(url))
    assert resumed.n_reused == resumed.n_trials == len(keys)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PGPASSWORD", server.password)
        public = StorageURL.parse(server.url(password=False))
        assert tune(resume=run, config=config, storage=public).n_reused == len(keys)


def _survivors(tuners: list[subprocess.Popen[bytes]], killed: int) -> list[int]:
    return [i for i, t in enumerate(tuners) if t.pid != killed]


def _outputs(folder: Path) -> str:
    return "\n".join(p.read_text()[-2000:] for p in sorted(folder.glob("std*")))


def _assert_password_nowhere(folder: Path, password: str) -> None:
    """Every file the tuners wrote: run folders, reports, logs, their stdout and stderr."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "report.html" for p in files) and any(p.name == "run.json" for p in files)
    leaks = [str(p) for p in files if password.encode() in p.read_bytes()]
    assert not leaks, f"the password is in {leaks}"
    # What the run folder records instead: the URL with its password masked.
    manifest = json.loads((folder / "run0" / "run.json").read_text())
    assert any("td:***@" in word for word in manifest["command"])


@pytest.mark.study  # a real database server
def test_a_refused_connection_is_one_line_without_the_password(
    server: pg_server.PgServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = server.url().replace(server.password, "not-" + server.password)
    closed = server.url().replace(f":{server.port}/", f":{pg_server._free_port()}/")
    for url, secret in ((wrong, "not-" + server.password), (closed, server.password)):
        code = main(["--json", "tune", "mlp", "--no-diagnose", "--storage", url])
        out, err = capsys.readouterr()
        assert code == 2
        # A password in the URL is warned of (argv is world-readable), then the one error.
        warnings = [w for w in err.splitlines() if w.startswith("warning:")]
        assert all(secret not in w for w in warnings)
        assert any("carries a password" in w for w in warnings)
        line = one_error_line("\n".join(w for w in err.splitlines() if w not in warnings))
        assert "cannot open the study storage" in line and secret not in line
        assert "td@127.0.0.1" in line  # the storage is named, by its public URL
        # Under --json stdout holds the same error as one document, without the password.
        document = json.loads(out)
        assert document["exit_code"] == 2 and secret not in out
        assert "cannot open the study storage" in document["error"]
