"""Shared foundations: errors, typed records, atomic file output, environment and ceilings.

Nothing in `core` imports torch at module import time.
"""

from torchdoctor.core.errors import TorchDoctorError
from torchdoctor.core.records import Record

__all__ = ["Record", "TorchDoctorError"]
