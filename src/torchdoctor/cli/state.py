"""Global CLI settings (`--json`, `--debug`) and the two ways of printing a result."""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from torchdoctor.core.records import Record
from torchdoctor.core.text import printable_console


@dataclass
class Settings:
    json: bool = False
    debug: bool = False
    #: Whether a record was printed on stdout (with --json, an error after it prints no
    #: second document there).
    emitted: bool = False


settings = Settings()

# Human output goes to stdout; progress, warnings and errors go to stderr so that
# `--json` output on stdout stays machine-readable.
# What a record holds (an op name from a trace) may carry escape sequences: both consoles
# strip control characters from whatever they render (core/text.py).
console: Console = printable_console()
err_console: Console = printable_console(stderr=True)


def emit(result: Record | dict[str, Any], render: Callable[[Console], None]) -> None:
    """Print `result` as JSON when --json is set, otherwise call `render` for rich output."""
    if settings.json:
        data = result.to_json_dict() if isinstance(result, Record) else result
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
        sys.stdout.flush()
        settings.emitted = True
    else:
        render(console)


def progress_enabled() -> bool:
    """Progress bars only for a person watching a terminal, never inside --json output."""
    return err_console.is_terminal and not settings.json


@contextmanager
def showing_warnings() -> Iterator[None]:
    """The API's warnings (`TorchDoctorWarning`) printed as the commands print theirs, one
    `warning:` line on stderr as each happens; any other warning as Python shows it."""
    from torchdoctor.api import TorchDoctorWarning

    with warnings.catch_warnings():
        python_shows = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: Any = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, TorchDoctorWarning):
                err_console.print(f"[yellow]warning:[/] {message}", highlight=False)
            else:
                python_shows(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        warnings.simplefilter("always", TorchDoctorWarning)
        yield
