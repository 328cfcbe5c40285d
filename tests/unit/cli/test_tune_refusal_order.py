"""`tune` refuses an input with two faults by the first in its order: the checks it shares with
`torchdoctor.api.tune` (objective, stored study, something to tune, the storage) interleaved with
its own (--force's rule, an option a script cannot honour, a malformed --set, --param or
--max-memory), so that a command line gets the one line it always got."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_output import one_error_line
from torchdoctor.cli.main import main


@pytest.mark.parametrize(
    ("argv", "first"),
    [
        (["tune", "--set", "compile"], "no workload to tune"),
        (["tune", "--param", "oops"], "no workload to tune"),
        (
            ["tune", "--objective", "fit", "--max-memory", "lots", "--", "python", "t.py"],
            "--objective fit tunes a workload, not a script",
        ),
        (["tune", "mlp", "--storage", "notaurl", "--set", "compile"], "cannot read the storage"),
        (["tune", "mlp", "--objective", "speed", "--max-memory", "75%"], "unknown objective"),
        (["tune", "mlp", "--objective", "fit", "--out", "full"], "needs the memory cap"),
        (["tune", "--out", "stored", "--", "python", "t.py"], "holds a stored study"),
        (
            [
                "tune",
                "--no-batch-search",
                "--objective",
                "fit",
                "--max-memory",
                "1GiB",
                "--",
                "t.py",
            ],
            "--no-batch-search cannot be honoured for a script",
        ),
    ],
)
def test_the_first_fault_is_the_one_said(
    argv: list[str],
    first: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for folder, name in (("full", "x"), ("stored", "study.db")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text("")
    (tmp_path / "t.py").write_text("")
    before = sorted(tmp_path.rglob("*"))
    assert main(argv) == 2
    assert first in one_error_line(capsys.readouterr().err)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written
