from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from torchdoctor import __version__
from torchdoctor.cli import main as cli_main
from torchdoctor.cli.state import emit
from torchdoctor.core.errors import EXIT_CODE_MEANINGS, ExitCode, ScriptExit, WorkloadError


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"torchdoctor {__version__}"


def test_help_lists_global_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--json" in out and "--debug" in out


def test_command_help_flows_with_the_terminal_not_the_source_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    assert cli_main.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    # A paragraph of `run`'s docstring, wrapped at 100 columns in the source, is one line.
    (line,) = [s for s in out.splitlines() if "Throughput comes from STEPS" in s]
    assert line.rstrip().endswith("synchronize at every phase boundary.")


def test_reflow_keeps_items_and_command_lines() -> None:
    doc = """First line.

    A paragraph
    over two lines.

    - one item
      continued
    - another

        torchdoctor run -- python train.py
        --steps 10
    """
    assert cli_main.reflow_help(doc) == (
        "First line.\n\nA paragraph over two lines.\n\n- one item continued\n- another\n\n"
        "    torchdoctor run -- python train.py\n    --steps 10"
    )


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


BERT = Path(__file__).parents[2] / "data" / "traces" / "tracelens_h100_bert_small.json.gz"


def test_json_after_the_command_is_the_global_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--json", "analyze", str(BERT), "--top", "2", "--no-report"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert cli_main.main(["analyze", "--json", str(BERT), "--top", "2", "--no-report"]) == 0
    assert json.loads(capsys.readouterr().out) == before
    assert cli_main.main(["analyze", str(BERT), "--top", "2", "--no-report", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == before


def test_diagnose_json_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["diagnose", "--json", str(BERT)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "torchdoctor/diagnosis"


def test_debug_after_the_command_shows_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.json")
    assert cli_main.main(["analyze", missing, "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_flags_after_the_separator_belong_to_the_script() -> None:
    hoist = cli_main._hoist_global_flags
    assert hoist(["diagnose", "--json", "--", "python", "t.py", "--debug"]) == [
        "--json", "diagnose", "--", "python", "t.py", "--debug"
    ]  # fmt: skip
    assert hoist(["env", "--debug", "--json"]) == ["--debug", "--json", "env"]
    assert hoist(["--json", "env"]) == ["--json", "env"]


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for code in ExitCode:
        assert f"{int(code)} {EXIT_CODE_MEANINGS[code]}" in out


def test_an_error_under_json_is_a_json_document_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.json")
    assert cli_main.main(["--json", "analyze", missing]) == 2
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["schema"] == "torchdoctor/error" and doc["exit_code"] == 2
    assert "nope.json" in doc["error"] and captured.err.startswith("error: ")


def test_a_bad_option_under_json_is_a_json_document_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_main.main(["--json", "analyze", "t.json", "--no-such-option"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 2 and "--no-such-option" in doc["error"]


def test_an_error_after_the_record_leaves_stdout_to_the_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @cli_main.app.command("_emit_then_raise_for_test", hidden=True)
    def _emit_then_raise() -> None:
        emit({"schema": "x"}, lambda console: None)
        raise WorkloadError("after the record")

    assert cli_main.main(["--json", "_emit_then_raise_for_test"]) == 2
    assert json.loads(capsys.readouterr().out) == {"schema": "x"}


def test_a_failing_script_exits_3_whatever_its_own_code() -> None:
    error = ScriptExit("the script raised", script_code=2)
    assert error.exit_code == ExitCode.SCRIPT_FAILED == 3
    assert "exit code 2" in str(error) and error.script_code == 2


def test_version_imports_no_command() -> None:
    code = (
        "import sys\n"
        "from torchdoctor.cli.main import main\n"
        "assert main(['--version']) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('torchdoctor.cli.') "
        "and m not in ('torchdoctor.cli.main', 'torchdoctor.cli.state')))\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[1:3] == ["[]", "False"]
