"""Stage: workloads (see docs/DESIGN.md)."""
