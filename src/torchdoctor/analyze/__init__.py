"""Stage: analyze (see docs/DESIGN.md)."""
