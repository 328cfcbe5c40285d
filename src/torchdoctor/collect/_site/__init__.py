"""Holds the `sitecustomize` the launcher puts on a child's PYTHONPATH (see launcher.py)."""
