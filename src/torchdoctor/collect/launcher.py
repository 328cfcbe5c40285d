"""`run_script`: run a user's training script unmodified, instrumented, in a child process.

The child is `python -m torchdoctor.collect._child CONFIG -- script args`, so the script
runs exactly as `python script args` would (`__main__`, argv, sys.path[0], exit code), and
DataLoader workers (fork and spawn) and torchrun ranks work: the launcher puts a
`sitecustomize` on the child's PYTHONPATH that instruments each rank torchrun starts. Every
instrumented process writes its own `script_profile[.rank<N>].json` into `out_dir`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import psutil

from torchdoctor.collect._target import CONFIG_ENV, PROFILE_STEM, TRACE_STEM, LaunchConfig
from torchdoctor.collect.script_profile import ScriptProfile
from torchdoctor.core.errors import CollectError, RecordError
from torchdoctor.core.rank import rank_of_file

#: Seconds a timed-out script gets after SIGTERM to write what it measured before SIGKILL.
TERMINATE_GRACE_S = 10.0
_SITE_DIR = Path(__file__).resolve().parent / "_site"
_CONFIG_NAME = ".collect_config.json"


def run_script(
    argv: list[str],
    *,
    module: bool = False,
    steps: int | None = None,
    warmup: int = 5,
    profile_steps: int = 5,
    out_dir: Path,
    timeout_s: float | None = None,
    cuda_sync_debug: bool = False,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    recipe: dict[str, Any] | None = None,
    output: Path | None = None,
    stdout_to_stderr: bool = False,
    kill_tree: bool = False,
    memory_owners: bool = False,
) -> ScriptProfile:
    """Run `argv` (script path or, with `module`, a module name, then its arguments).

    Returns the profile of the launched process, or of rank 0 when the script started
    distributed ranks (all ranks: `read_profiles(out_dir)`); `exit_code` is the command's.
    Raises `CollectError` when the script cannot start (missing, syntax error, no module).
    `recipe` (knob -> value) is injected into the script (collect/inject); what each knob
    did is in `out_dir/injection.json` (`InjectionRecord`). With `output`, the script's own
    stdout and stderr go to that file instead of this process's (a run the user did not ask
    to watch, whose prints must not mix with `--json` output); with `stdout_to_stderr`, the
    script's stdout goes to this process's stderr (`--json`: stdout holds the record only).
    With `memory_owners`, each process splits its last warm-up step's memory into its owners
    (`ScriptProfile.memory`, collect/probes/memory.py).
    With `kill_tree`, `timeout_s` ends every process the command started too (torchrun puts
    its ranks in sessions of their own, which a signal to the command or its group misses, and
    which outlive a torchrun that is killed).
    """
    if not argv:
        raise CollectError("no script to run", hint="pass a script path and its arguments")
    if steps is not None and steps < 1:
        raise CollectError(f"steps must be at least 1, got {steps}")
    if warmup < 0 or profile_steps < 0:
        raise CollectError(f"warmup ({warmup}) and profile_steps ({profile_steps}) must be >= 0")
    if not module:
        check_script(argv[0])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clear_previous(out_dir)
    config = LaunchConfig(
        out_dir=str(out_dir.resolve()),
        module=module,
        warmup=warmup,
        profile_steps=profile_steps,
        max_steps=steps,
        cuda_sync_debug=cuda_sync_debug,
        recipe=recipe,
        memory_owners=memory_owners,
    )
    config_path = config.write(out_dir / _CONFIG_NAME)
    cmd, child_env = child_command(config_path, argv, python=python, env=env)
    if output is None:
        code = _run_child(
            cmd, child_env, timeout_s, to_stderr=stdout_to_stderr, kill_tree=kill_tree
        )
    else:
        with open(output, "wb") as sink:
            code = _run_child(cmd, child_env, timeout_s, sink=sink, kill_tree=kill_tree)
    return _main_profile(out_dir, argv, module, code)


def child_command(
    config_path: Path, argv: list[str], *, python: str = sys.executable, env: dict[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    """The bootstrap's command line and environment for `argv` under the config at `config_path`.

    `env` is the base environment (None: this process's). The config travels by path in the
    environment too, and the `sitecustomize` that instruments torchrun ranks goes on PYTHONPATH.
    """
    child_env = dict(os.environ if env is None else env)
    child_env[CONFIG_ENV] = str(config_path.resolve())
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_SITE_DIR), child_env.get("PYTHONPATH", "")) if p
    )
    cmd = [python, "-m", "torchdoctor.collect._child", str(config_path), "--", *argv]
    return cmd, child_env


def check_script(path: str) -> None:
    """Raise `CollectError` if `path` is not a readable Python file that compiles."""
    p = Path(path)
    if not p.exists():
        raise CollectError(f"script {path!r} not found", hint="check the path and the cwd")
    if not p.is_file():
        raise CollectError(f"script {path!r} is not a file")
    try:
        source = p.read_bytes()
    except OSError as exc:
        raise CollectError(f"script {path!r} cannot be read: {exc.strerror}") from None
    try:
        compile(source, str(p), "exec")
    except SyntaxError as exc:
        raise CollectError(
            f"script {path!r} has a syntax error at line {exc.lineno}: {exc.msg}",
            hint="run it with plain python to see the error",
        ) from None


def read_profiles(out_dir: Path) -> list[ScriptProfile]:
    """Every profile in `out_dir`: the launched process first, then ranks in order."""

    def order(p: Path) -> tuple[int, int]:
        rank = rank_of_file(p.name, PROFILE_STEM, ".json")
        return (1, rank) if rank is not None else (0, 0)

    files = sorted(Path(out_dir).glob(f"{PROFILE_STEM}*.json"), key=order)
    return [ScriptProfile.read(f) for f in files]


def _clear_previous(out_dir: Path) -> None:
    """Results of an earlier run in the same folder would be mistaken for this run's."""
    for pattern in (f"{PROFILE_STEM}*.json", f"{TRACE_STEM}*.json.gz", "injection*.json"):
        for old in out_dir.glob(pattern):
            old.unlink()


def _run_child(
    cmd: list[str],
    env: dict[str, str],
    timeout_s: float | None,
    *,
    sink: IO[bytes] | None = None,
    to_stderr: bool = False,
    kill_tree: bool = False,
) -> int:
    out: IO[bytes] | int | None = sink if sink is not None else (2 if to_stderr else None)
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=sink)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        if kill_tree:
            return end_tree(proc)
        proc.send_signal(signal.SIGTERM)  # the bootstrap unwinds and writes what it has
        try:
            return proc.wait(timeout=TERMINATE_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise


def end_tree(proc: subprocess.Popen[Any], grace_s: float = TERMINATE_GRACE_S) -> int:
    """SIGTERM `proc` and every process under it (found before any is signalled: a child
    whose parent dies is moved to init), SIGKILL those left after `grace_s`; `proc`'s code."""
    try:
        tree = [psutil.Process(proc.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return proc.wait()
    for p in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()  # the bootstrap unwinds and writes what it has
    _, alive = psutil.wait_procs(tree, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    return proc.wait()


def _main_profile(out_dir: Path, argv: list[str], module: bool, code: int) -> ScriptProfile:
    try:
        profiles = read_profiles(out_dir)
    except RecordError as exc:
        raise CollectError(f"the instrumented run left an unreadable result: {exc}") from None
    if not profiles:
        reason = f"killed by signal {-code}" if code < 0 else f"exited {code} before writing"
        return ScriptProfile(
            argv=list(argv),
            module=module,
            exit_code=code,
            ended_by="killed",
            error=f"the instrumented process {reason}; nothing was measured",
        )
    main = profiles[0]
    if main.ended_by == "not_started":
        raise CollectError(main.error or "the script could not start")
    ranks = [p for p in profiles[1:] if p.rank is not None]
    if main.rank is None and ranks and not main.steps:
        main = ranks[0]  # a launcher (torchrun) that trains nothing itself: report rank 0
    return main.model_copy(update={"exit_code": code})
