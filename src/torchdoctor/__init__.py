"""torchdoctor: find out why a PyTorch job is slow, prove the cure, hand back the recipe.

The package is a pipeline of stages, each importing only those before it (docs/DESIGN.md in
the repository draws the order the architecture test checks): measure a step, collect it from
a script, analyze the trace, diagnose the bound, tune the cure, report it.
Importing the top-level package stays cheap: no torch import happens here.

The Python API (torchdoctor/api/): a function for each command, `torchdoctor.diagnose(...)`,
`torchdoctor.tune(...)`, `torchdoctor.run(...)` (a workload or a script), `bench`, `profile`,
`memory`, `analyze`, `diff`, `report`, `env`, `workloads`, `scale`, `serve`, `demo`, each
returning the record its command prints, and `torchdoctor.recheck(...)`, a recipe against the
job as it is (`run --vs-baseline`);
`torchdoctor.watch()` instruments a block of notebook code.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from torchdoctor._version import __version__
from torchdoctor.core.errors import TorchDoctorError

if TYPE_CHECKING:
    from torchdoctor.api import (
        analyze,
        bench,
        demo,
        diagnose,
        diff,
        env,
        memory,
        profile,
        recheck,
        report,
        run,
        scale,
        serve,
        shard_memory,
        tune,
        workloads,
    )
    from torchdoctor.collect import watch

__all__ = [
    "TorchDoctorError",
    "__version__",
    "analyze",
    "bench",
    "demo",
    "diagnose",
    "diff",
    "env",
    "memory",
    "profile",
    "recheck",
    "report",
    "run",
    "scale",
    "serve",
    "shard_memory",
    "tune",
    "watch",
    "workloads",
]
#: The API's functions, one per command (torchdoctor/api/__init__.py `COMMANDS`).
_API = frozenset(__all__) - {"TorchDoctorError", "__version__", "watch"}


class _Package(types.ModuleType):
    """The package, whose API functions keep their names when a stage of the same name loads.

    Importing `torchdoctor.tune` (the stage) binds it on the package as `tune`, as Python does
    for every submodule; that would hide the function `torchdoctor.tune`. The binding is
    refused for the API's names, so `torchdoctor.tune` is always the function (its signature
    and docstring what `help` shows), and the stage is reached by its full name
    (`from torchdoctor.tune import TuneResult`, `importlib.import_module`), as the code does.
    `import torchdoctor.tune as t` binds the function too: Python reads `t` off the package.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    # Loaded on first use only, so `import torchdoctor` stays light (no torch, no scipy).
    if name == "watch":
        from torchdoctor.collect import watch

        return watch
    if name in _API:
        import importlib
        import importlib.util

        function = getattr(importlib.import_module("torchdoctor.api"), name)
        if importlib.util.find_spec(f"torchdoctor.{name}") is not None:
            # A stage of the same name: `import torchdoctor.tune.storage as storage` reads
            # `tune` off the package (this function), then falls back on the module named
            # `<its __name__>.storage` in sys.modules, so the function is named as the stage.
            function.__name__ = f"{__name__}.{name}"
        globals()[name] = function
        return function
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
