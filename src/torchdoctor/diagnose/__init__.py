"""Stage: diagnose (see docs/DESIGN.md)."""
