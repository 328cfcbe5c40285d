"""torchdoctor: find out why a PyTorch job is slow, prove the cure, hand back the recipe.

The package is a pipeline of stages (see docs/DESIGN in the repository):
measure -> engine -> collect -> analyze -> diagnose -> tune -> report.
Importing the top-level package stays cheap: no torch import happens here.
"""

from typing import Any

from torchdoctor._version import __version__
from torchdoctor.core.errors import TorchDoctorError

__all__ = ["TorchDoctorError", "__version__", "watch"]


def __getattr__(name: str) -> Any:
    # `torchdoctor.watch` loads torch on first use only, so `import torchdoctor` stays light.
    if name == "watch":
        from torchdoctor.collect import watch

        return watch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
