"""`run_script`: run a user's training script unmodified, instrumented, in a child process.

`torchdoctor.collect` knows the command (`prepare_launch`: the bootstrap, its launch config,
the `sitecustomize` that instruments torchrun's ranks) and reads what it left
(`launch_profile`); the process itself is this package's, started here and ended as every
tree is (`procs/_tree.py`).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from torchdoctor.collect import ScriptProfile, launch_profile, prepare_launch
from torchdoctor.procs._tree import TERMINATE_GRACE_S, end_popen


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
    distributed ranks (all ranks: `collect.read_profiles(out_dir)`); `exit_code` is the
    command's. Raises `CollectError` when the script cannot start (missing, syntax error, no
    module). `recipe` (knob -> value) is injected into the script (collect/inject); what each
    knob did is in `out_dir/injection.json` (`InjectionRecord`). With `output`, the script's
    own stdout and stderr go to that file instead of this process's (a run the user did not
    ask to watch, whose prints must not mix with `--json` output); with `stdout_to_stderr`,
    the script's stdout goes to this process's stderr (`--json`: stdout holds the record
    only). With `memory_owners`, each process splits its last warm-up step's memory into its
    owners (`ScriptProfile.memory`, collect/probes/step_memory.py).

    At `timeout_s` the script is sent SIGTERM (the bootstrap unwinds and writes what it has),
    and whatever of its tree is left after the grace period is killed; with `kill_tree`, every
    process the command started is sent SIGTERM too (torchrun puts its ranks in sessions of
    their own, which a signal to the command or its group misses, and which outlive a torchrun
    that is killed). The script dies with this process (collect/_lifeline.py).
    """
    cmd, child_env = prepare_launch(
        argv,
        module=module,
        steps=steps,
        warmup=warmup,
        profile_steps=profile_steps,
        out_dir=out_dir,
        cuda_sync_debug=cuda_sync_debug,
        python=python,
        env=env,
        recipe=recipe,
        memory_owners=memory_owners,
    )
    if output is None:
        code = _run_child(
            cmd, child_env, timeout_s, to_stderr=stdout_to_stderr, kill_tree=kill_tree
        )
    else:
        with open(output, "wb") as sink:
            code = _run_child(cmd, child_env, timeout_s, sink=sink, kill_tree=kill_tree)
    return launch_profile(Path(out_dir), argv, module, code)


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
        return end_popen(proc, grace_s=TERMINATE_GRACE_S, term_first_only=not kill_tree)
    except KeyboardInterrupt as exc:
        # Ctrl-C reached the script too (one process group); SIGTERM and SIGHUP (this
        # process's `Interrupted`) did not: the script is asked the same, and its tree ended.
        if proc.poll() is None:
            sig = signal.SIGINT if type(exc) is KeyboardInterrupt else signal.SIGTERM
            proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=TERMINATE_GRACE_S)
        end_popen(proc, grace_s=0.0)
        raise
