"""Stage: engine (see docs/DESIGN.md)."""
