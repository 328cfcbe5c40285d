"""Stage: tune (see docs/DESIGN.md)."""
