"""torchdoctor: find out why a PyTorch job is slow, prove the cure, hand back the recipe.

The package is a pipeline of stages (see docs/DESIGN in the repository):
measure -> engine -> collect -> analyze -> diagnose -> tune -> report.
Importing the top-level package stays cheap: no torch import happens here.

The Python API (torchdoctor/api.py): `torchdoctor.diagnose(...)`, `torchdoctor.tune(...)`,
`torchdoctor.run(...)` return the records the commands print; `torchdoctor.watch()`
instruments a block of notebook code.
"""

import importlib
from typing import Any

from torchdoctor._version import __version__
from torchdoctor.core.errors import TorchDoctorError

__all__ = ["TorchDoctorError", "__version__", "diagnose", "run", "tune", "watch"]


def __getattr__(name: str) -> Any:
    # Loaded on first use only, so `import torchdoctor` stays light (no torch, no scipy).
    # `diagnose` and `tune` are the stage packages, callable as the API's functions
    # (core/lazy.py `callable_module`); `run` is torchdoctor/api.py's.
    if name == "watch":
        from torchdoctor.collect import watch

        return watch
    if name in ("diagnose", "tune"):
        return importlib.import_module(f"torchdoctor.{name}")
    if name == "run":
        from torchdoctor.api import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
