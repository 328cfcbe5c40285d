"""torchdoctor: find out why a PyTorch job is slow, prove the cure, hand back the recipe.

The package is a pipeline of stages (see docs/DESIGN in the repository):
measure -> engine -> collect -> analyze -> diagnose -> tune -> report.
Importing the top-level package stays cheap: no torch import happens here.
"""

from torchdoctor._version import __version__
from torchdoctor.core.errors import TorchDoctorError

__all__ = ["TorchDoctorError", "__version__"]
