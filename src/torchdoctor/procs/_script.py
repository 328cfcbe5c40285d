"""`ScriptWorker`: a user's unmodified training script, driven like a workload worker.

A `WorkerLike` (procs/_supervisor.py) whose session is a live script: it launches
`python -m torchdoctor.collect._child CONFIG -- TARGET ARGS` (the launcher's command, with a
control address in the config) and drives it through the control channel of
`torchdoctor.collect.control`, a `multiprocessing.connection.Listener` on loopback with a random
authkey per worker, passed to the script in its environment. The script pauses at its optimizer
steps (at its backward() calls when it builds no torch.optim optimizer: collect/control.py), so
an `Arm` drives it as it drives a built-in workload. It answers the requests of
`torchdoctor.procs._protocol`, as a workload worker does:

- `Prepare` (no spec: the script was given when the worker was made) -> `Prepared`: launch and
  wait for the ready boundary. `prepare_s` is the launch-to-boundary time seen from here (the
  interpreter, imports, data, model build and the first two training steps); `startup_s` is the
  script's own count from the control connection on; `injection` the `InjectionRecord` JSON of
  the recipe's knobs by then (None without a recipe), after one whole iteration: which applied,
  which could not and why; `loaders` the DataLoaders it iterated. Prepared already: the same
  figures.
- `Run` -> `Ran`. Launches first when not prepared (with `startup_s` in the reply). A script
  that reaches its end before the chunk is done is relaunched and the chunk finished on the new
  run: `restarts` counts that in this reply, `restart_s` the start-ups it cost, which are no
  step's.
- `Release` -> `Done` (CUDA: the script's cached free blocks go back).
- `Park` / `Unpark` -> `Parked`: the script's trained state leaves the GPU or comes back
  (collect/control.py, `torchdoctor.engine.park`); nothing when it is not launched.
- `Reference` -> `Losses`: the first n losses of a fresh launch of the same script, recipe and
  seed whose trained model (the injection's trained top-level module,
  collect/inject/trained_model.py) gets the engine's no-op weight perturbation i before its first
  step (`LaunchConfig.perturbation`), as a workload's reference session does (procs/_worker.py);
  this worker's own launch is untouched.
- `Exit` / `close()`: the script is told to stop, then its whole tree (DataLoader workers,
  torchrun's ranks) is ended as every tree is (`procs/_tree.py`: SIGCONT, SIGTERM, SIGKILL
  after a grace period); the script runs in its own session (process group), which is
  killed last.

Failures raise `WorkerFailure` with these kinds: `CRASH` (the process died without a word),
`OOM` (over the memory cap, or an out-of-memory error in the script), `TIMEOUT` (no answer in
time: before the ready boundary, a script that never steps the torch.optim optimizer it builds),
`ERROR` (the script failed or ended before the ready boundary). Reasons end with the script's
last output lines.

Seeding: with `seed`, the script's process seeds random, numpy and torch before the script runs;
`record()` says who seeded (torchdoctor, the script itself by calling torch.manual_seed /
random.seed / numpy.random.seed, both, or none).
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import psutil

from torchdoctor.collect import (
    CONTROL_AUTHKEY_ENV,
    DriverPark,
    DriverRelease,
    DriverRun,
    DriverStop,
    DriverWelcome,
    LaunchConfig,
    ScriptChunk,
    ScriptError,
    ScriptFreed,
    ScriptHello,
    ScriptReady,
    child_command,
)
from torchdoctor.core.errors import CollectError
from torchdoctor.core.records import SubRecord
from torchdoctor.procs._failure import FailureKind, WorkerFailure, classify_reason
from torchdoctor.procs._launch import Launch, accept, wait_for
from torchdoctor.procs._protocol import (
    Done,
    Exit,
    Losses,
    Park,
    Parked,
    Prepare,
    Prepared,
    Ran,
    Reference,
    Release,
    Reply,
    ReplyT,
    Request,
    Run,
    StepRow,
    Unpark,
)
from torchdoctor.procs._supervisor import (
    LIVE_WORKERS,
    MemoryCapped,
    log_tail,
    receive,
)
from torchdoctor.procs._tree import (
    descendants,
    end_processes,
    resume,
    signal_group,
    suspend_children,
    tree_of,
)

#: Seconds a script asked to exit gets to unwind (its `finally` blocks, the instrumentation's
#: record) before SIGTERM, and then again before SIGKILL.
EXIT_GRACE_S: Final = 5.0

SeededBy = Literal["torchdoctor", "script", "both", "none"]

_T = TypeVar("_T", ScriptReady, ScriptChunk, ScriptFreed, Parked)


class ScriptWorkerRecord(SubRecord):
    """What driving a script cost apart from its steps, and who seeded it."""

    argv: list[str]
    seed: int | None
    seeded_by: SeededBy
    #: Processes started: the first launch and every restart.
    launches: int
    restarts: int
    #: Seconds from each launch to its ready boundary, seen from the tuner.
    startup_s: list[float]


class ScriptWorker(MemoryCapped):
    """A `WorkerLike` over a live script (module docstring).

    `argv`: the script path (or, with `module`, a module name) and its arguments. `cwd` and
    `env` are the script's (default: this process's). `memory_cap_bytes` bounds the resident
    memory of the script and its children; `log_path` takes the script's output (default: a
    file in `work_dir`, a temporary folder removed on close when not given).
    """

    def __init__(
        self,
        argv: list[str],
        *,
        module: bool = False,
        seed: int | None = None,
        python: str = sys.executable,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        memory_cap_bytes: int | None = None,
        log_path: Path | None = None,
        work_dir: Path | None = None,
        recipe: dict[str, Any] | None = None,
        perturbation: int = 0,
    ) -> None:
        if not argv:
            raise ValueError("no script to run")
        self.argv = list(argv)
        self.module = module
        self.seed = seed
        #: knob -> value injected into the script (collect/inject); None: it runs as written
        self.recipe = dict(recipe) if recipe is not None else None
        self.perturbation = perturbation
        #: the InjectionRecord JSON the script sent at the ready boundary of the latest launch
        self.injection: dict[str, Any] | None = None
        #: the DataLoaders the script iterated by its ready boundary (`DataLoaderInfo` JSON)
        self.loaders: list[dict[str, Any]] = []
        #: the script's device as it reported it at its ready boundary
        self.device: str | None = None
        self._python = python
        self._cwd = cwd
        self._env = env
        self._memory_cap = memory_cap_bytes  # the resident-memory watch (MemoryCapped)
        self._max_memory = memory_cap_bytes  # --max-memory as given
        self._own_dir = work_dir is None
        self._dir = (
            Path(tempfile.mkdtemp(prefix="torchdoctor-script-")) if work_dir is None else work_dir
        )
        self._dir.mkdir(parents=True, exist_ok=True)
        self._log_path = log_path or self._dir / "script.log"
        self._authkey = secrets.token_bytes(32)
        self._listener = Listener(("127.0.0.1", 0), authkey=self._authkey)
        self._launch: Launch | None = None
        self.peak_rss_bytes = 0
        self.launches = 0
        self.restarts = 0
        self.startup_s: list[float] = []
        self.script_startup_s: list[float] = []
        self.script_seeded = False
        self._closed = False
        #: the script's child processes stopped between chunks (`_freeze`)
        self._frozen: list[psutil.Process] = []
        LIVE_WORKERS.add(self)

    # ---- WorkerLike ------------------------------------------------------------------------

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        if self._closed:
            raise WorkerFailure(FailureKind.ERROR, "the script worker is closed")
        deadline = time.monotonic() + timeout_s
        return message.expect(self._answer(message, deadline))

    def _answer(self, message: Request[ReplyT], deadline: float) -> Reply:
        if isinstance(message, Prepare):
            if self._launch is None:
                self._start(deadline)
            return Prepared(
                prepare_s=self.startup_s[0],
                startup_s=self.script_startup_s[0],
                injection=self.injection,
                loaders=tuple(self.loaders),
                device=self.device,
            )
        if isinstance(message, Run):
            return self._run(message.steps, message.release, deadline)
        if isinstance(message, Release):
            if self._launch is not None:
                # Under torchrun the ranks are the launcher's children, stopped between chunks
                # with their DataLoader workers: they answer only once continued.
                self._thaw()
                self._exchange(DriverRelease(), ScriptFreed, deadline)
                self._freeze()
            return Done()
        if isinstance(message, Park | Unpark):
            if self._launch is None:
                return Parked()
            return self._exchange(DriverPark(isinstance(message, Park)), Parked, deadline)
        if isinstance(message, Exit):
            self.close()
            return Done()
        if isinstance(message, Reference):
            return self._reference(message.perturbation, message.steps, deadline)
        raise WorkerFailure(FailureKind.ERROR, f"unknown request {type(message).__name__}")

    def close(self, *, kill: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop(kill=kill)
        with contextlib.suppress(OSError):
            self._listener.close()
        if self._own_dir:
            shutil.rmtree(self._dir, ignore_errors=True)
        LIVE_WORKERS.discard(self)

    def record(self) -> ScriptWorkerRecord:
        seeded: SeededBy
        if self.seed is not None:
            seeded = "both" if self.script_seeded else "torchdoctor"
        else:
            seeded = "script" if self.script_seeded else "none"
        return ScriptWorkerRecord(
            argv=self.argv,
            seed=self.seed,
            seeded_by=seeded,
            launches=self.launches,
            restarts=self.restarts,
            startup_s=list(self.startup_s),
        )

    def _reference(self, perturbation: int, steps: int, deadline: float) -> Losses:
        """A fresh launch with a perturbed model: its first `steps` losses (module doc)."""
        log = self._log_path.with_name(f"{self._log_path.stem}-reference{perturbation}.log")
        fresh = ScriptWorker(
            self.argv,
            module=self.module,
            seed=self.seed,
            python=self._python,
            cwd=self._cwd,
            env=self._env,
            memory_cap_bytes=self._max_memory,
            log_path=log,
            recipe=self.recipe,
            perturbation=perturbation,
        )
        try:
            remaining = max(0.0, deadline - time.monotonic())
            fresh.request(Prepare(), timeout_s=remaining)
            outcome = (fresh.injection or {}).get("model")
            if outcome is None:
                raise WorkerFailure(
                    FailureKind.ERROR,
                    "no trained model was found in the script to perturb for the quality "
                    "reference (no module owning an optimizer's parameters was called in "
                    "training mode)",
                )
            remaining = max(0.0, deadline - time.monotonic())
            reply = fresh.request(Run(steps), timeout_s=remaining)
            return Losses(tuple(row.loss for row in reply.steps))
        finally:
            fresh.close()

    # ---- chunks ----------------------------------------------------------------------------

    def _run(self, steps: int, release: bool, deadline: float) -> Ran:
        if steps < 1:
            raise WorkerFailure(FailureKind.ERROR, f"run needs a step count >= 1, got {steps}")
        startup_s = self._start(deadline) if self._launch is None else None
        rows: list[StepRow] = []
        peak: int | None = None
        restart_s: list[float] = []
        fresh = False
        self._thaw()
        while len(rows) < steps:
            answer = self._exchange(DriverRun(steps - len(rows), release), ScriptChunk, deadline)
            rows.extend(StepRow(*row) for row in answer.steps)
            if answer.peak_memory_bytes is not None:
                peak = max(peak or 0, int(answer.peak_memory_bytes))
            if not answer.ended:
                continue
            self._reap(deadline)
            if fresh and not answer.steps:
                raise self._fail(
                    FailureKind.ERROR,
                    "the script ends right after its start-up (its first two steps), so no "
                    "step of it can be measured (give it more steps)",
                )
            if len(rows) < steps:
                restart_s.append(self._start(deadline))
                self.restarts += 1
                fresh = True
        self._freeze()
        return Ran(
            steps=tuple(rows),
            peak_memory_bytes=peak,
            restarts=len(restart_s),
            restart_s=tuple(restart_s),
            startup_s=startup_s,
        )

    def _freeze(self) -> None:
        """Stop the script's child processes until its next chunk (`suspend_children`)."""
        launch = self._launch
        if launch is None or launch.proc.poll() is not None:
            return
        self._frozen.extend(suspend_children(launch.proc.pid))

    def _thaw(self) -> None:
        frozen, self._frozen = self._frozen, []
        resume(frozen)

    # ---- the script's process --------------------------------------------------------------

    def _start(self, deadline: float) -> float:
        """Launch the script and wait for its ready boundary; the seconds that took."""
        self._launch = None
        host, port = self._listener.address
        config = LaunchConfig(
            out_dir=str(self._dir / "collect"),
            module=self.module,
            warmup=0,
            profile_steps=0,
            recipe=self.recipe,
            control=f"{host}:{port}",
            perturbation=self.perturbation,
            seed=self.seed,
        )
        config_path = config.write(self._dir / "launch_config.json")
        cmd, env = child_command(config_path, self.argv, python=self._python, env=self._env)
        env[CONTROL_AUTHKEY_ENV] = self._authkey.hex()
        with open(self._log_path, "ab") as log:
            proc = subprocess.Popen(
                cmd,
                env=env,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # its own process group: closing kills the script's DataLoader workers too
                start_new_session=True,
            )
        self.launches += 1
        launch = Launch(proc)
        self._launch = launch
        launch.conn = accept(
            self._listener,
            lambda: self._watch(launch, deadline, waiting_for="the script to connect"),
        )
        hello = self._receive(deadline, waiting_for="the script to connect")
        if not isinstance(hello, ScriptHello):
            raise self._fail(
                FailureKind.ERROR, f"unexpected first message from the script: {hello!r}"
            )
        launch.conn.send(DriverWelcome(self.seed, device_memory_cap_bytes=self._max_memory))
        ready = self._expect(
            self._receive(deadline, waiting_for="the script's first two steps"), ScriptReady
        )
        startup = time.monotonic() - launch.started
        launch.ready = True
        self.startup_s.append(startup)
        self.script_startup_s.append(float(ready.startup_s))
        self.script_seeded = self.script_seeded or ready.script_seeded
        self.injection = ready.injection
        self.loaders = list(ready.loaders)
        self.device = ready.device
        if ready.device == "cuda":
            # The cap now bounds the script's device memory (the script applied it at its
            # ready boundary), not this process tree's resident memory.
            self._memory_cap = None
        return startup

    def _exchange(
        self, message: DriverRun | DriverRelease | DriverPark, expected: type[_T], deadline: float
    ) -> _T:
        launch = self._launch
        assert launch is not None and launch.conn is not None
        try:
            launch.conn.send(message)
        except OSError:
            raise self._fail(FailureKind.CRASH, self._crash_reason()) from None
        reply = self._receive(deadline, waiting_for=f"the script to run {_command_text(message)}")
        return self._expect(reply, expected)

    def _expect(self, reply: object, expected: type[_T]) -> _T:
        """`reply` as the message the script should have sent; its error, or another message,
        ends the worker."""
        if isinstance(reply, ScriptError):
            if reply.ranks_disagree:
                # bad input, whichever arm shows it: the command ends in one line, exit 2
                self.close(kill=True)
                raise CollectError(
                    reply.reason, hint="make every rank build the same objects, then tune again"
                )
            raise self._fail(classify_reason(reply.reason), self._with_tail(reply.reason))
        if not isinstance(reply, expected):
            raise self._fail(FailureKind.ERROR, f"unexpected message from the script: {reply!r}")
        return reply

    def _receive(self, deadline: float, *, waiting_for: str) -> object:
        launch = self._launch
        assert launch is not None and launch.conn is not None
        return receive(
            launch.conn,
            crashed=lambda: self._fail(FailureKind.CRASH, self._crash_reason()),
            between_polls=lambda: self._watch(launch, deadline, waiting_for=waiting_for),
        )

    def _watch(self, launch: Launch, deadline: float, *, waiting_for: str) -> None:
        """Between polls: the process alive, under the memory cap, within the deadline."""
        if launch.proc.poll() is not None and (launch.conn is None or not launch.conn.poll()):
            raise self._fail(FailureKind.CRASH, self._crash_reason())
        over = self._over_cap(launch.proc.pid)
        if over is not None:
            raise self._fail(FailureKind.OOM, over)
        if time.monotonic() > deadline:
            hint = ""
            if not launch.ready:
                hint = (
                    " (a script is driven at its torch.optim optimizer steps, or at its "
                    "backward() calls when it builds no optimizer: does it reach either?)"
                )
            raise self._fail(
                FailureKind.TIMEOUT, self._with_tail(f"timed out waiting for {waiting_for}{hint}")
            )

    def _reap(self, deadline: float) -> None:
        """The script said it ended: wait for its process to exit (it writes its record)."""
        launch = self._launch
        if launch is None:
            return
        wait_for(launch.proc, max(0.1, min(EXIT_GRACE_S, deadline - time.monotonic())))
        self._stop(kill=True)

    def _stop(self, *, kill: bool) -> None:
        self._thaw()  # a stopped process would hold its SIGTERM until continued
        launch, self._launch = self._launch, None
        if launch is None:
            return
        proc = launch.proc
        tree = tree_of(proc.pid)  # before any exits: orphans move to init
        if proc.poll() is None and not kill and launch.conn is not None:
            with contextlib.suppress(OSError):
                launch.conn.send(DriverStop())
            wait_for(proc, EXIT_GRACE_S)
        # What is left of the tree, found before and now (torchrun's ranks in sessions of their
        # own, DataLoader workers started since): SIGTERM, the bootstrap unwinds and writes its
        # record, then SIGKILL (procs/_tree.py).
        known = {p.pid for p in tree}
        tree += [p for p in descendants(proc.pid) if p.pid not in known]
        end_processes(tree, grace_s=EXIT_GRACE_S, term=not kill)
        signal_group(proc.pid, signal.SIGKILL)  # anything else still in its session
        wait_for(proc, EXIT_GRACE_S)
        if launch.conn is not None:
            with contextlib.suppress(OSError):
                launch.conn.close()

    def _fail(self, kind: FailureKind, reason: str) -> WorkerFailure:
        self.close(kill=True)
        return WorkerFailure(kind, reason)

    def _crash_reason(self) -> str:
        launch = self._launch
        code = None
        if launch is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = launch.proc.wait(timeout=2)
        return self._with_tail(f"the script's process died (exit code {code})")

    def _with_tail(self, reason: str) -> str:
        tail = log_tail(self._log_path)
        return f"{reason}: {tail}" if tail else reason


def _command_text(message: DriverRun | DriverRelease | DriverPark) -> str:
    """A command as a timeout's reason names it (the words stored reasons already use)."""
    if isinstance(message, DriverRun):
        return str({"op": "run", "steps": message.steps, "release": message.release})
    if isinstance(message, DriverPark):
        return str({"op": "park" if message.off else "unpark"})
    return str({"op": "release"})
