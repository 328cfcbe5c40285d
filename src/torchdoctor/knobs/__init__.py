"""Stage: knobs (see docs/DESIGN.md)."""
