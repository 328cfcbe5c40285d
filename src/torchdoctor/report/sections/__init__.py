"""The sections of the report, one module per stage that writes their records.

Importing this package imports every module in it, and each module registers its record
types and sections (report/registry.py reads the package on first use). A new stage's
section is one more module here: nothing else in the report names it.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
