"""Running a user's script inside an instrumented process, exactly as `python` would.

Shared by the bootstrap (`python -m torchdoctor.collect._child`) and by torchrun ranks
(instrumented from `sitecustomize` at interpreter start). The launch settings travel as a
small JSON file named by the `TORCHDOCTOR_COLLECT_CONFIG` environment variable.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from torchdoctor.core.rank import RankIdentity

#: Environment variable naming the launch config file; inherited by every child process.
CONFIG_ENV = "TORCHDOCTOR_COLLECT_CONFIG"
PROFILE_STEM = "script_profile"
TRACE_STEM = "trace"


#: Modules that launch a distributed job's ranks (torchrun and its predecessor): under one, the
#: launcher process trains nothing, and each rank is instrumented from `sitecustomize`.
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def launches_ranks(cfg: LaunchConfig, target: list[str]) -> bool:
    """Whether `target` is torchrun (its ranks, not this process, are the script)."""
    return cfg.module and bool(target) and target[0] in TORCHRUN_MODULES


@dataclass(frozen=True)
class LaunchConfig:
    out_dir: str
    module: bool = False
    warmup: int = 5
    profile_steps: int = 5
    max_steps: int | None = None
    cuda_sync_debug: bool = False
    #: knob -> value injected into the script (collect/inject); None: the script runs as is
    recipe: dict[str, Any] | None = None
    #: "host:port" of a tuner driving the script step by step (collect/control.py), or None.
    control: str | None = None
    #: > 0: the trained model's floating parameters get the engine's no-op perturbation of this
    #: index before its first step (a quality-reference run of a tuned script); 0: untouched
    perturbation: int = 0
    #: the seed a driven script's process is seeded with: a torchrun rank other than 0, which
    #: does not talk to the tuner, reads it here (rank 0 gets it from the tuner's welcome)
    seed: int | None = None
    #: split the last warm-up step's memory into its owners (collect/probes/step_memory.py): what
    #: `diagnose` and `memory` ask for; a timed run (`run`, a tuner's arm, `scale`) does not
    memory_owners: bool = False

    def write(self, path: Path) -> Path:
        from torchdoctor.core.io import atomic_write_text

        return atomic_write_text(path, json.dumps(self.__dict__))

    @classmethod
    def read(cls, path: str | Path) -> LaunchConfig:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


def profile_path(out_dir: str | Path) -> Path:
    return Path(out_dir) / f"{PROFILE_STEM}{RankIdentity.from_env().suffix}.json"


def make_instrumentation(cfg: LaunchConfig) -> Any:
    from torchdoctor.collect.hooks import CollectConfig, Instrumentation

    trace = Path(cfg.out_dir) / f"{TRACE_STEM}{RankIdentity.from_env().suffix}.json.gz"
    return Instrumentation(
        CollectConfig(
            warmup=cfg.warmup,
            profile_steps=cfg.profile_steps,
            max_steps=cfg.max_steps,
            trace_path=trace if cfg.profile_steps > 0 else None,
            cuda_sync_debug=cfg.cuda_sync_debug,
            # A driven script is timed by its controller on the host; CUDA events would add
            # an event pair per phase and a wait one step late for timings nobody reads.
            cuda_events=cfg.control is None,
            # Nor lines: a tuning trial reads throughput only, and the sampler's few percent
            # would be paid by every arm.
            sample_lines=cfg.control is None,
            # Nor memory unless asked for: its counted step is slower than the others.
            memory_owners=cfg.memory_owners and cfg.control is None,
        )
    )


class Terminated(BaseException):
    """SIGTERM (a timeout, torchrun stopping its workers): unwind so results get written."""


def _on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    # A driver that is gone (or ends this run) may have left the script's DataLoader workers
    # stopped: continued, they can exit when the script shuts them down (collect/_lifeline.py).
    from torchdoctor.collect._lifeline import resume_children

    resume_children()
    raise Terminated("terminated by SIGTERM")


def exit_code_of(exc: SystemExit) -> int:
    """The process exit code Python gives `raise SystemExit(code)`."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints the message, exits 1
    return 1


def one_line_error(exc: BaseException) -> str:
    """`Type: message (file:line in function)` at the innermost frame of user code."""
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not _is_internal(f.filename)]
    where = user[-1] if user else (frames[-1] if frames else None)
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if where is not None:
        text += f" ({where.filename}:{where.lineno} in {where.name})"
    return text


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: Frames of the launcher itself: runpy (a frozen module on 3.11+) and torchdoctor.
_LAUNCH_FRAMES = ("<frozen runpy>", os.path.abspath(runpy.__file__), _PACKAGE_DIR)


def _is_internal(filename: str) -> bool:
    return filename.startswith(_LAUNCH_FRAMES) or os.sep + "torch" + os.sep in filename


def print_script_traceback(exc: BaseException) -> None:
    """Print the traceback as Python would, without the launcher's own frames on top."""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_LAUNCH_FRAMES):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)


def run_target(cfg: LaunchConfig, target: list[str]) -> int:
    """Run `target` (script path or module name, then its args) instrumented; write the record.

    Returns the exit code the script would have had under plain `python`.
    """
    from torchdoctor.collect.hooks import StopCollection

    name, args = target[0], target[1:]
    setup_error = _prepare_sys(cfg, name, args)
    injection, recipe_error = make_injection(cfg)
    setup_error = setup_error or recipe_error
    inst = make_instrumentation(cfg)
    if injection is not None and injection.model is not None:
        # No global module hooks inside a compiled forward (ForwardProbe.pin).
        injection.model.on_compile = inst.forward.pin
    controller = None
    # Under torchrun the ranks are driven, rank 0 talking to the tuner (collect/_rank.py).
    if cfg.control is not None and not launches_ranks(cfg, target):
        from torchdoctor.collect.control import ControlError, attach_controller

        try:
            controller = attach_controller(cfg.control, inst)
        except ControlError as exc:
            setup_error = setup_error or str(exc)
        else:
            if injection is not None:
                # The tuner reads at the ready boundary which knobs acted (a knob that did not is
                # a trial that does not apply, ended without an A/B).
                controller.injection = injection
    if setup_error is not None:
        if controller is not None:
            controller.finish("not_started", 2, setup_error)
        profile = inst.result(
            argv=target, module=cfg.module, exit_code=2, ended_by="not_started", error=setup_error
        )
        profile.write(profile_path(cfg.out_dir))
        return 2
    signal.signal(signal.SIGTERM, _on_sigterm)
    code, ended_by, error = 0, "completed", None
    inst.install()
    if injection is not None:
        injection.install()  # after the probes: its wrappers call theirs
    try:
        if cfg.module:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(name, run_name="__main__")
    except StopCollection:
        ended_by = "max_steps"
    except SystemExit as exc:
        code, ended_by = exit_code_of(exc), "sys_exit"
    except (KeyboardInterrupt, Terminated) as exc:
        code, ended_by, error = (
            130 if isinstance(exc, KeyboardInterrupt) else 143,
            "killed",
            str(exc) or type(exc).__name__,
        )
    except BaseException as exc:
        print_script_traceback(exc)
        code, ended_by, error = 1, "exception", one_line_error(exc)
    if controller is not None:
        controller.finish(ended_by, code, error)
        # Once more before the interpreter's exit joins the children: a DataLoader that shut
        # down while its workers were stopped left them a SIGTERM they take only when continued
        # (collect/_lifeline.py).
        from torchdoctor.collect._lifeline import resume_children

        resume_children()
    if injection is not None:
        injection.uninstall()  # before the probes' patches are put back: reverse order
        injection.write(cfg.out_dir)
    profile = inst.result(
        argv=target, module=cfg.module, exit_code=code, ended_by=ended_by, error=error
    )
    if launches_ranks(cfg, target) and code == 0 and error is None:
        # torchrun trained nothing here; its ranks wrote theirs. A record of its own (rank
        # None, 0 steps) beside them would read as one more process that measured nothing.
        # A launcher that failed still writes one: its error is the run's.
        return code
    profile.write(profile_path(cfg.out_dir))
    return code


def make_injection(cfg: LaunchConfig) -> tuple[Any, str | None]:
    """The launch's recipe injection, not yet installed (None without a recipe), or the
    one-line reason the recipe cannot be used."""
    if cfg.recipe is None and cfg.perturbation <= 0:
        return None, None
    from torchdoctor.collect.inject import Injection
    from torchdoctor.core.errors import KnobError

    try:
        return Injection(cfg.recipe or {}, perturbation=cfg.perturbation), None
    except KnobError as exc:
        return None, f"recipe: {exc}"


def _prepare_sys(cfg: LaunchConfig, name: str, args: list[str]) -> str | None:
    """Set sys.argv and sys.path[0] as `python script.py` / `python -m mod` would."""
    site_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != site_dir]
    if cfg.module:
        import importlib.util

        sys.path[0:1] = [os.getcwd()]
        sys.argv = [name, *args]  # run_module(alter_sys=True) replaces argv[0] with the file
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as exc:
            return f"cannot import module {name!r}: {exc}"
        if spec is None:
            return f"no module named {name!r}"
        return None
    if not os.path.isfile(name):
        return f"script {name!r} not found"
    sys.path[0:1] = [os.path.dirname(os.path.abspath(name))]
    sys.argv = [name, *args]
    return None
