"""Instrumenting a torchrun rank from `sitecustomize`, where we do not own the main loop.

torchrun starts each rank as `python [-u] train.py ...` itself, so the rank cannot be run
through the bootstrap: instead the hooks go in at interpreter start and the record is
written at exit (atexit), with the exit code taken from `sys.exit` or an uncaught exception.
"""

from __future__ import annotations

import atexit
import os
import sys
from types import TracebackType
from typing import Any

from torchdoctor.collect._target import (
    CONFIG_ENV,
    LaunchConfig,
    make_injection,
    make_instrumentation,
    one_line_error,
    profile_path,
)

_MULTIPROCESSING_MARKERS = ("--multiprocessing-fork", "-c")


def _is_rank_main(config_path: str) -> bool:
    argv = sys.argv
    if not argv or argv[0] in _MULTIPROCESSING_MARKERS or "--multiprocessing-fork" in argv:
        return False  # a spawned DataLoader worker or a `python -c` helper
    return argv[1:2] != [config_path]  # the bootstrap itself instruments its own process


def install_for_rank() -> None:
    config_path = os.environ.get(CONFIG_ENV)
    if not config_path or not _is_rank_main(config_path):
        return
    from torchdoctor.collect.hooks import StopCollection

    cfg = LaunchConfig.read(config_path)
    inst = make_instrumentation(cfg)
    injection, _ = make_injection(cfg)  # a bad recipe is refused by the launching process
    if injection is not None and injection.model is not None:
        # No global module hooks inside a compiled forward (ForwardProbe.pin).
        injection.model.on_compile = inst.forward.pin
    controller = None
    if cfg.control is not None:  # a tuner drives the job: rank 0 talks to it, the others follow
        from torchdoctor.collect.control import ControlError
        from torchdoctor.collect.rank_control import attach_rank_controller

        try:
            controller = attach_rank_controller(cfg.control, inst, seed=cfg.seed)
        except ControlError as exc:
            # Run undriven, the rank would train while the tuner waits for it: end the job.
            print(f"torchdoctor: {exc}", file=sys.stderr, flush=True)
            os._exit(2)
        controller.injection = injection
    state: dict[str, Any] = {"code": 0, "ended_by": "completed", "error": None, "done": False}
    original_exit, original_hook = sys.exit, sys.excepthook

    def write() -> None:
        if state["done"]:
            return
        state["done"] = True
        if controller is not None:
            controller.finish(state["ended_by"], state["code"], state["error"])
        if injection is not None:
            injection.uninstall()
            injection.write(cfg.out_dir)
        profile = inst.result(
            argv=list(sys.argv),
            module=False,
            exit_code=state["code"],
            ended_by=state["ended_by"],
            error=state["error"],
        )
        profile.write(profile_path(cfg.out_dir))

    def exit_(code: Any = None) -> Any:
        state["code"] = code if isinstance(code, int) else (0 if code is None else 1)
        state["ended_by"] = "sys_exit"
        original_exit(code)

    def excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if isinstance(exc, StopCollection):
            state["ended_by"] = "max_steps"
            write()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)  # a clean stop: skip the traceback and the exit code 1
        state.update(code=1, ended_by="exception", error=one_line_error(exc))
        original_hook(kind, exc, tb)

    sys.exit = exit_
    sys.excepthook = excepthook
    atexit.register(write)
    inst.install()
    if injection is not None:
        injection.install()
