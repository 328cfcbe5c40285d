from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_samples import tune_record

from torchdoctor.core import rundir
from torchdoctor.core.errors import RecordError, ReportError
from torchdoctor.report.load import read_input, read_record_file, read_run_dir
from torchdoctor.tune.records import TuneResult


def test_reads_every_record_of_a_complete_run(run_dir: Path) -> None:
    found = read_run_dir(run_dir)
    assert set(found.records) == {"diagnosis", "analysis", "profile", "tune", "tune_config"}
    assert set(found.env) == {"fingerprint", "ceilings"}
    assert len(found.trials) == 5
    assert found.manifest is not None and found.manifest["status"] == "complete"
    # The adapters read the validated record's own JSON form, exactly.
    assert TuneResult.from_json_dict(found.records["tune"]) == TuneResult.read(
        run_dir / rundir.TUNE
    )


def test_unknown_schema_version_is_a_record_error(run_dir: Path) -> None:
    path = run_dir / rundir.TUNE
    data = json.loads(path.read_text())
    data["version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match="version 99 is not supported"):
        read_run_dir(run_dir)


def test_unknown_version_of_a_record_without_class_is_a_record_error(run_dir: Path) -> None:
    path = run_dir / rundir.ENV
    data = json.loads(path.read_text())
    data["ceilings"]["version"] = 7
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match="version 7"):
        read_run_dir(run_dir)


def test_truncated_record_is_a_record_error(run_dir: Path) -> None:
    path = run_dir / rundir.DIAGNOSIS
    path.write_text(path.read_text()[:50])
    with pytest.raises(RecordError, match="not valid JSON"):
        read_run_dir(run_dir)


def test_missing_folder_and_non_run_folder(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such run folder or record file"):
        read_input(tmp_path / "nope")
    with pytest.raises(RecordError, match="not a torchdoctor run folder"):
        read_input(tmp_path)


def test_a_lone_record_file(tmp_path: Path) -> None:
    path = tune_record(tmp_path).write(tmp_path / "copied-tune.json")
    found = read_input(path)
    assert found.is_run_dir is False and found.manifest is None
    assert set(found.records) == {"tune"}


def test_a_file_that_is_not_a_record(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"hello": 1}')
    with pytest.raises(RecordError, match="not a torchdoctor record"):
        read_record_file(tmp_path / "x.json")
    (tmp_path / "y.json").write_text('{"schema": "torchdoctor/bogus", "version": 1}')
    with pytest.raises(RecordError, match="cannot report on a 'torchdoctor/bogus' record"):
        read_record_file(tmp_path / "y.json")


def test_the_manifest_stands_for_its_run_folder(run_dir: Path) -> None:
    found = read_input(run_dir / rundir.MANIFEST)
    assert found.source == run_dir and "tune" in found.records


def test_a_tune_reads_the_trace_analysis_of_its_diagnosis_sub_run(run_dir: Path) -> None:
    """A tune's pre-tune diagnosis leaves analysis.json and the trace in diagnosis/, and copies
    only diagnosis.json up: the page shows that analysis, not "no trace analysis"."""
    from torchdoctor.report.api import render_text

    sub = run_dir / rundir.DIAGNOSIS_SUBDIR
    sub.mkdir()
    (run_dir / rundir.ANALYSIS).rename(sub / rundir.ANALYSIS)
    found = read_run_dir(run_dir)
    assert found.records["analysis"] == json.loads((sub / rundir.ANALYSIS).read_text())
    page = render_text(found, "html")
    assert "No trace analysis in this run" not in page
    assert 'id="roofline"' in page and "aten::addmm" in page


def test_a_study_setting_the_report_cannot_read_leaves_out_only_its_level(run_dir: Path) -> None:
    """tune_config.json gives the headline interval's level; one written by another version
    of the tuner (a field this build does not know) costs the level, not the report."""
    path = run_dir / "tune_config.json"
    data = json.loads(path.read_text())
    data["plan"]["a_setting_of_a_later_version"] = True
    path.write_text(json.dumps(data))
    found = read_run_dir(run_dir)
    assert "tune_config" not in found.records and "tune" in found.records
    from torchdoctor.report.api import render_text

    assert "the study's confidence (level unknown: no readable tune\\_config.json)" in render_text(
        found, "md"
    )
