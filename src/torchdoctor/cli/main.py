"""Entry point: `torchdoctor [--json] [--debug] COMMAND ...`.

`--json` and `--debug` are also taken after the command (`torchdoctor env --json`,
`torchdoctor diagnose --json -- python train.py`), where people type them; after `--` they
belong to the user's script and are left alone.

Errors from the `TorchDoctorError` hierarchy become one line on stderr and their exit code
(core/errors.py `ExitCode`: 2 for user errors, 3 when the user's script failed); `--debug`
shows the traceback as well. With `--json` an error is also one JSON document on stdout
(`{"schema": "torchdoctor/error", "error": ..., "exit_code": ...}`), unless the command had
already printed its record there. Ctrl-C, SIGTERM and SIGHUP end a command as "interrupted",
exit 128 + the signal's number (core/interrupt.py).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import json
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape

from torchdoctor._version import __version__
from torchdoctor.cli.state import err_console, settings, showing_warnings
from torchdoctor.core.errors import EXIT_CODE_MEANINGS, ExitCode, TorchDoctorError
from torchdoctor.core.interrupt import Interrupted, interrupt_on_signals, interruption
from torchdoctor.core.redact import redact_secrets
from torchdoctor.core.rundir import display_path

app = typer.Typer(
    name="torchdoctor",
    help=(
        "Find out why a PyTorch job is slow, prove the cure, and hand back the recipe.\n\n"
        "Start with `torchdoctor demo`, or `torchdoctor env` to see this machine's measured "
        "ceilings."
    ),
    epilog="Exit codes: "
    + "; ".join(f"{int(code)} {meaning}" for code, meaning in EXIT_CODE_MEANINGS.items())
    + ".",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

# Subcommand modules, each calling `@app.command()` at import, in the order `--help` lists
# them. A stage whose module is not installed yet is simply not offered.
COMMAND_MODULES: tuple[str, ...] = (
    "demo",
    "env",
    "bench",
    "workloads",
    "run",
    "profile",
    "memory",
    "analyze",
    "diagnose",
    "diff",
    "tune",
    "scale",
    "serve",
    "report",
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"torchdoctor {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    json_output: bool = typer.Option(
        False, "--json", help="Print results as versioned JSON on stdout (progress goes to stderr)."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logging."),
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    settings.json = json_output
    settings.debug = debug
    from torchdoctor.core.log import configure

    configure(debug=debug)


# Global options that may come before the command name; they take no value.
_GLOBAL_FLAGS = frozenset({"--json", "--debug"})


def _command_named(args: list[str]) -> str | None:
    """The subcommand module the command line names, or None (help, version, unknown).

    Only that module is imported then: the others pull in torch, optuna, scipy and the
    report stack (about a second of start-up that `torchdoctor analyze` does not need).
    """
    for arg in args:
        if arg in _GLOBAL_FLAGS:
            continue
        module = f"torchdoctor.cli.{arg}"
        if arg in COMMAND_MODULES and importlib.util.find_spec(module) is not None:
            return arg
        return None
    return None


def _hoist_global_flags(args: list[str]) -> list[str]:
    """`--json`/`--debug` given after the command name moved before it (click reads a group's
    options only there); anything after `--` is the user's own command line and stays."""
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in _GLOBAL_FLAGS]
    rest = [a for a in args[:end] if a not in _GLOBAL_FLAGS]
    return [*flags, *rest, *args[end:]]


def reflow_help(doc: str) -> str:
    """A docstring as `--help` shows it: each paragraph one line, each "- " item one line.

    Typer keeps a docstring's single line breaks after its first paragraph, so text wrapped
    at the source's line length would be printed with hard breaks whatever the terminal's
    width. An indented paragraph (a command line to copy) is kept as written.
    """
    paragraphs = []
    for para in inspect.cleandoc(doc).split("\n\n"):
        if para.startswith("    "):
            paragraphs.append(para)
            continue
        lines: list[str] = []
        for line in para.splitlines():
            text = line.strip()
            if lines and not text.startswith(("- ", "* ")):
                lines[-1] += " " + text
            else:
                lines.append(text)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def _register_commands(args: list[str] | None = None) -> None:
    """Import the command modules (each registers itself): the named one, else all of them."""
    named = _command_named(args) if args is not None else None
    for name in (named,) if named else COMMAND_MODULES:
        module = f"torchdoctor.cli.{name}"
        if module not in sys.modules and importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
    # A command module may import another (demo uses tune), which registers that one early:
    # restore the documented order.
    rank = {f"torchdoctor.cli.{name}": i for i, name in enumerate(COMMAND_MODULES)}
    app.registered_commands.sort(
        key=lambda info: rank.get(getattr(info.callback, "__module__", ""), len(rank))
    )
    for info in app.registered_commands:
        if info.callback is not None:
            info.callback = _interruptible(info.callback)
        doc = getattr(info.callback, "__doc__", None)
        if info.help is None and doc:
            info.help = reflow_help(doc)


class _CarriedInterruption(BaseException):
    """An interruption carried past typer, which turns a KeyboardInterrupt raised in a command
    into a silent exit 130 (whatever the signal, and with no word of the run folder)."""

    def __init__(self, stopped: Interrupted) -> None:
        super().__init__(str(stopped))
        self.stopped = stopped


def _interruptible(callback: Callable[..., Any]) -> Callable[..., Any]:
    """`callback` with its interruption carried to `main` (`_CarriedInterruption`)."""
    if getattr(callback, "_carries_interruption", False):
        return callback

    @functools.wraps(callback)
    def command(*args: Any, **kwargs: Any) -> Any:
        try:
            with showing_warnings():
                return callback(*args, **kwargs)
        except KeyboardInterrupt as exc:
            raise _CarriedInterruption(Interrupted.of(exc)) from exc

    command._carries_interruption = True  # type: ignore[attr-defined]
    return command


#: The `--json` form of an error: one document on stdout, beside the one line on stderr.
ERROR_SCHEMA = "torchdoctor/error"
ERROR_SCHEMA_VERSION = 1


def _fail(message: str, code: int, *, as_json: bool = False, markup: bool = True) -> int:
    err_console.print(
        f"[bold red]error:[/] {message}", markup=markup, highlight=False, soft_wrap=True
    )
    if as_json and not settings.emitted:
        _print_error_document(message, code)
    return code


def _print_error_document(message: str, code: int) -> None:
    """`--json`: an error is a document on stdout too, so that a reader of stdout never finds
    it empty (a command that already printed its record leaves stdout to that record)."""
    from rich.text import Text

    plain = Text.from_markup(message).plain
    document = {
        "schema": ERROR_SCHEMA,
        "version": ERROR_SCHEMA_VERSION,
        "error": plain,
        "exit_code": int(code),
    }
    sys.stdout.write(json.dumps(document, indent=2) + "\n")
    sys.stdout.flush()


def _asks_for_version(args: list[str]) -> bool:
    """`torchdoctor --version`: answered before any command module is imported."""
    end = args.index("--") if "--" in args else len(args)
    return "--version" in args[:end] and _command_named(args) is None


def _json_requested(args: list[str]) -> bool:
    end = args.index("--") if "--" in args else len(args)
    return "--json" in args[:end]


def _interrupted_line(stopped: Interrupted) -> str:
    """What an interrupted command says last: by what, and where its run folder is."""
    by = "" if stopped.signum == signal.SIGINT else f" by {signal.Signals(stopped.signum).name}"
    line = f"interrupted{by}"
    if stopped.run_dir is not None:
        line += f"; what was done is in {escape(display_path(stopped.run_dir))}"
    return line


def _is_click_usage_error(exc: Exception) -> bool:
    return callable(getattr(exc, "show", None)) and getattr(exc, "exit_code", None) == 2


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (also used by the tests)."""
    args = _hoist_global_flags(sys.argv[1:] if argv is None else list(argv))
    if _asks_for_version(args):
        sys.stdout.write(f"torchdoctor {__version__}\n")
        return ExitCode.OK
    as_json = _json_requested(args)
    settings.emitted = False
    _register_commands(args)
    try:
        # SIGTERM and SIGHUP unwind as Ctrl-C does: what the command started is ended, its run
        # folder says "interrupted", and the exit code is 128 + the signal (core/interrupt.py).
        with interrupt_on_signals():
            result = app(args=args, prog_name="torchdoctor", standalone_mode=False)
    except TorchDoctorError as exc:
        if settings.debug:
            traceback.print_exc()
        return _fail(escape(redact_secrets(str(exc))), exc.exit_code, as_json=as_json)
    except _CarriedInterruption as carried:
        stopped = carried.stopped
        return _fail(_interrupted_line(stopped), stopped.exit_code, as_json=as_json)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except OSError as exc:
        # A write the system refused (a full disk, a read-only folder): one line, not a
        # traceback; --debug shows where.
        if settings.debug:
            traceback.print_exc()
        where = f": {exc.filename}" if exc.filename else ""
        return _fail(escape(redact_secrets(f"{exc.strerror or exc}{where}")), 2, as_json=as_json)
    except (typer.Abort, KeyboardInterrupt) as exc:
        stopped = interruption(exc) or Interrupted()
        return _fail(_interrupted_line(stopped), stopped.exit_code, as_json=as_json)
    except Exception as exc:
        # Bad options and arguments: click's own message and usage line, exit 2. Newer typer
        # releases vendor click, so match the exception by its interface, not its class.
        if _is_click_usage_error(exc):
            exc.show()  # type: ignore[attr-defined]
            if as_json:
                _print_error_document(str(getattr(exc, "format_message", str)()), ExitCode.ERROR)
            return ExitCode.ERROR
        raise
    return result if isinstance(result, int) else ExitCode.OK


def run() -> None:  # pragma: no cover - console-script shim
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
