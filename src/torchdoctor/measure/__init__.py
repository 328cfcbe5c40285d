"""Stage: measure (see docs/DESIGN.md)."""
