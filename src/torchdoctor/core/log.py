"""Logging: one `torchdoctor` logger tree; the CLI sets the level from --debug."""

from __future__ import annotations

import logging

LOGGER_NAME = "torchdoctor"


def get_logger(name: str) -> logging.Logger:
    """Logger for a module: `get_logger(__name__)`."""
    if not name.startswith(LOGGER_NAME):
        name = f"{LOGGER_NAME}.{name}"
    return logging.getLogger(name)


def configure(*, debug: bool) -> None:
    from rich.logging import RichHandler

    from torchdoctor.core.text import printable_console

    root = logging.getLogger(LOGGER_NAME)
    root.handlers.clear()
    # Log to stderr: stdout carries the --json record and must stay machine-readable.
    handler = RichHandler(
        console=printable_console(stderr=True), show_path=debug, rich_tracebacks=debug, markup=False
    )
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    root.propagate = False
