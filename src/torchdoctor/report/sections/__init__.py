"""The built-in sections of the report, one module per stage that writes their records.

Importing this package registers them (report/registry.py reads it on first use). A new
stage adds its own module here, or registers its section from its own package.
"""

from __future__ import annotations

from torchdoctor.report.sections import breakdown, diagnosis, environment, reproduce, tune

__all__ = ["breakdown", "diagnosis", "environment", "reproduce", "tune"]
