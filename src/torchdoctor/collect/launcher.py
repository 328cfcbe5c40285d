"""What running a user's training script unmodified, instrumented, in a child process needs:
its command line and launch config (`prepare_launch`), and what it left (`launch_profile`).
The process itself is started and ended by `torchdoctor.procs.run_script`.

The child is `python -m torchdoctor.collect._child CONFIG -- script args`, so the script
runs exactly as `python script args` would (`__main__`, argv, sys.path[0], exit code), and
DataLoader workers (fork and spawn) and torchrun ranks work: the launcher puts a
`sitecustomize` on the child's PYTHONPATH that instruments each rank torchrun starts. Every
instrumented process writes its own `script_profile[.rank<N>].json` into `out_dir`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from torchdoctor.collect._lifeline import PARENT_PID_ENV
from torchdoctor.collect._target import CONFIG_ENV, PROFILE_STEM, TRACE_STEM, LaunchConfig
from torchdoctor.collect.script_profile import ScriptProfile
from torchdoctor.core.errors import CollectError, RecordError
from torchdoctor.core.rank import rank_of_file

_SITE_DIR = Path(__file__).resolve().parent / "_site"
_CONFIG_NAME = ".collect_config.json"


def prepare_launch(
    argv: list[str],
    *,
    module: bool = False,
    steps: int | None = None,
    warmup: int = 5,
    profile_steps: int = 5,
    out_dir: Path,
    cuda_sync_debug: bool = False,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    recipe: dict[str, Any] | None = None,
    memory_owners: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """Check `argv`, write its launch config into a cleared `out_dir`; the bootstrap's command
    line and environment (`child_command`). The options are `procs.run_script`'s.

    Raises `CollectError` when the script cannot start (missing, syntax error) or an option is
    out of range.
    """
    if not argv:
        raise CollectError("no script to run", hint="pass a script path and its arguments")
    if steps is not None and steps < 1:
        raise CollectError(f"steps must be at least 1, got {steps}")
    if warmup < 0 or profile_steps < 0:
        raise CollectError(f"warmup ({warmup}) and profile_steps ({profile_steps}) must be >= 0")
    check_command(argv, module)
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
    return child_command(config_path, argv, python=python, env=env)


def child_command(
    config_path: Path, argv: list[str], *, python: str = sys.executable, env: dict[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    """The bootstrap's command line and environment for `argv` under the config at `config_path`.

    `env` is the base environment (None: this process's). The config travels by path in the
    environment too, and the `sitecustomize` that instruments torchrun ranks goes on PYTHONPATH.
    """
    child_env = dict(os.environ if env is None else env)
    child_env[CONFIG_ENV] = str(config_path.resolve())
    # The bootstrap dies with this process (collect/_lifeline.py).
    child_env[PARENT_PID_ENV] = str(os.getpid())
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_SITE_DIR), child_env.get("PYTHONPATH", "")) if p
    )
    cmd = [python, "-m", "torchdoctor.collect._child", str(config_path), "--", *argv]
    return cmd, child_env


def check_command(argv: list[str], module: bool) -> None:
    """Raise `CollectError` if a plain script's file (`argv[0]`) cannot start (`check_script`):
    what every command taking a script calls before its run folder exists."""
    if not module and argv:
        check_script(argv[0])


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


def launch_profile(out_dir: Path, argv: list[str], module: bool, code: int) -> ScriptProfile:
    """The profile a launch of `argv` left in `out_dir`, given the command's exit `code`: the
    launched process's, or rank 0's when it started ranks and trained nothing itself."""
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
