"""Stage: collect (see docs/DESIGN.md)."""
