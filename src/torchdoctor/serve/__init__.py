"""Stage: serve. Inference under a latency objective."""
