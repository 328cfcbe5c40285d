"""A write the system refuses (a full disk) while `analyze` fills its run folder: one line,
exit 2, the folder marked failed; a folder left "complete" has its reports."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from cli_output import one_error_line
from torchdoctor.cli.main import main

TRACE = Path(__file__).parents[1] / "data" / "traces" / "tracelens_h100_bert_small.json.gz"


def _full_disk_for(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """Every atomic write of a file whose name starts with `prefix` fails with ENOSPC."""
    import torchdoctor.core.io as io

    real = io.atomic_write_bytes

    def refusing(path: Path, data: bytes) -> Path:
        if Path(path).name.startswith(prefix):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(io, "atomic_write_bytes", refusing)


@pytest.mark.parametrize("prefix", ["analysis", "report"])
def test_a_full_disk_is_one_line_and_a_failed_run(
    prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _full_disk_for(monkeypatch, prefix)
    out = tmp_path / "run"
    assert main(["--json", "analyze", str(TRACE), "--out", str(out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "No space left on device" in line and prefix in line
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "failed" and "No space left on device" in manifest["error"]


def test_a_complete_run_has_its_reports(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["--json", "analyze", str(TRACE), "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    assert "Status: **complete**" in (out / "report.md").read_text()


def test_an_unwritable_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torchdoctor.core.rundir as rundir

    def refusing(*args: object, **kwargs: object) -> Path:
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "run"))

    monkeypatch.setattr(rundir, "new_run_dir", refusing)
    assert main(["analyze", str(TRACE), "--out", str(tmp_path / "run")]) == 2
    assert "Permission denied" in one_error_line(capsys.readouterr().err)
