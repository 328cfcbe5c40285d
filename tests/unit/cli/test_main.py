from __future__ import annotations

import pytest
import typer

from torchdoctor import __version__
from torchdoctor.cli import main as cli_main
from torchdoctor.core.errors import WorkloadError


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"torchdoctor {__version__}"


def test_help_lists_global_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--json" in out and "--debug" in out


def test_torchdoctor_error_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    @cli_main.app.command("_raise_for_test", hidden=True)
    def _raise() -> None:
        raise WorkloadError("unknown workload 'x[1]'", hint="see `torchdoctor workloads`")

    code = cli_main.main(["_raise_for_test"])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == ["error: unknown workload 'x[1]'; see `torchdoctor workloads`"]


def test_unknown_command_is_usage_error_exit_2() -> None:
    code = cli_main.main(["no-such-command"])
    assert code == 2


def test_typer_is_used_for_the_app() -> None:
    assert isinstance(cli_main.app, typer.Typer)
