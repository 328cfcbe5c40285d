"""Stage: collect (see docs/DESIGN.md).

Hooks that find steps and phases in code we did not write (`Instrumentation`), the launcher
that runs an unmodified script under them (`run_script`), and `watch()` for notebooks. The
names are loaded on first use, so reading a `ScriptProfile` does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchdoctor.collect._watch import watch
    from torchdoctor.collect.hooks import CollectConfig, Instrumentation
    from torchdoctor.collect.launcher import read_profiles, run_script
    from torchdoctor.collect.script_profile import ScriptProfile

_EXPORTS = {
    "CollectConfig": "torchdoctor.collect.hooks",
    "Instrumentation": "torchdoctor.collect.hooks",
    "ScriptProfile": "torchdoctor.collect.script_profile",
    "read_profiles": "torchdoctor.collect.launcher",
    "run_script": "torchdoctor.collect.launcher",
    "watch": "torchdoctor.collect._watch",
}

__all__ = [
    "CollectConfig",
    "Instrumentation",
    "ScriptProfile",
    "read_profiles",
    "run_script",
    "watch",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
