"""A throwaway PostgreSQL server for the shared-study tests: a real server, never a mock.

The base image has PostgreSQL 15 (``/usr/lib/postgresql/15/bin``), which refuses to run as
root: as root the server is initialised and started as the ``postgres`` user (``runuser``), in
a temporary folder that user owns, on a free loopback port, with password authentication
(scram-sha-256) for a superuser ``td``. `start` returns None with the reason where it cannot
(no binaries, no psycopg, no ``postgres`` user): the caller skips, saying why, unless
``TORCHDOCTOR_REQUIRE_POSTGRES=1`` (set by `.ci/run`, which installs what it needs) makes that
a failure.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

REQUIRE_ENV = "TORCHDOCTOR_REQUIRE_POSTGRES"
#: Where Debian's postgresql-15 puts its server binaries (not on PATH).
BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)
USER = "td"
DATABASE = "tdstudy"
#: pg_ctl's own wait for the server to accept connections (seconds).
START_TIMEOUT_S = 30


@dataclass(frozen=True)
class PgServer:
    port: int
    password: str
    folder: Path
    bin_dir: Path
    run_as: str | None

    def url(self, *, password: bool = True, database: str = DATABASE) -> str:
        auth = f"{USER}:{self.password}" if password else USER
        return f"postgresql+psycopg://{auth}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        # Immediate shutdown without waiting for it: the folder goes with the server.
        _run(self, "pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "-W", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


def _bin_dir() -> Path | None:
    return next((d for d in BIN_DIRS if (d / "initdb").is_file()), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(server: PgServer, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(server.bin_dir / tool), *args]
    if server.run_as is not None:
        cmd = ["runuser", "-u", server.run_as, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=START_TIMEOUT_S + 30)


def start() -> tuple[PgServer | None, str]:
    """A running server and "", or None and why not."""
    try:
        import psycopg
    except ImportError:
        return None, "psycopg 3 is not installed (pip install -e '.[dev]')"
    bin_dir = _bin_dir()
    if bin_dir is None:
        return None, f"no PostgreSQL server binaries in {', '.join(map(str, BIN_DIRS))}"
    run_as: str | None = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no `postgres` user to run the server"
        if shutil.which("runuser") is None:
            return None, "running as root and there is no `runuser` to start the server"
        run_as = "postgres"
    folder = Path(tempfile.mkdtemp(prefix="td-pg-"))
    server = PgServer(_free_port(), secrets.token_urlsafe(12), folder, bin_dir, run_as)
    pwfile = folder / "pw"
    pwfile.write_text(server.password + "\n")
    if run_as is not None:
        for path in (folder, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    init = _run(
        server, "initdb", "-D", str(folder / "data"), "-U", USER, f"--pwfile={pwfile}",
        "-A", "scram-sha-256", "-E", "UTF8", "--no-sync",
    )  # fmt: skip
    pwfile.unlink()
    if init.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        return None, f"initdb failed: {init.stderr.strip().splitlines()[-1:]}"
    options = (
        f"-p {server.port} -k {folder} -c listen_addresses=127.0.0.1 "
        # a throwaway server: durability off, as PostgreSQL's docs advise for test clusters
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    started = _run(
        server, "pg_ctl", "-D", str(folder / "data"), "-l", str(folder / "log"),
        "-w", "-t", str(START_TIMEOUT_S), "-o", options, "start",
    )  # fmt: skip
    if started.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        return None, f"the server did not start: {started.stdout.strip()[-200:]}"
    try:
        with psycopg.connect(
            host="127.0.0.1", port=server.port, user=USER, password=server.password,
            dbname="postgres", autocommit=True,
        ) as conn:  # fmt: skip
            conn.execute(f"CREATE DATABASE {DATABASE}")
    except psycopg.Error as exc:
        server.stop()
        return None, f"cannot create the test database: {type(exc).__name__}"
    return server, ""
