"""Stage: report (see docs/DESIGN.md)."""
