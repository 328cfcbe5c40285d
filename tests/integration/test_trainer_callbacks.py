"""The Lightning and Hugging Face callbacks, with the real libraries and a tiny model built in
the script (nothing downloaded): the run folder a callback leaves diagnoses as
`torchdoctor diagnose -- python` does on the same script, `report` renders it and `diff` reads
it. A study: each library's import costs seconds, and each case trains twice (the script under
`diagnose`, then in this process with the callback)."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path

import pytest

from torchdoctor.core import rundir
from torchdoctor.diagnose import Diagnosis, diff_inputs, examine_script

SCRIPTS = Path(__file__).parents[1] / "scripts"


def _installed(*modules: str) -> bool:
    return any(importlib.util.find_spec(m) is not None for m in modules)


@pytest.mark.study
@pytest.mark.parametrize(
    ("script", "modules"),
    [
        ("lightning_data_wait.py", ("lightning", "pytorch_lightning")),
        ("hf_data_wait.py", ("transformers",)),
    ],
)
def test_callback_folder_diagnoses_as_diagnose_does(
    script: str, modules: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _installed(*modules):
        pytest.skip(f"{modules[0]} is not installed (the [{modules[0]}] extra)")
    path = SCRIPTS / script
    exam = examine_script([str(path)], out=tmp_path / "diagnose", stdout_to_stderr=True)
    assert exam.error is None, exam.error
    # The callback's run in this process: the library is imported once, and the ceilings the
    # diagnosis reads are this test session's (measured briefly, conftest), as above.
    monkeypatch.setenv("TORCHDOCTOR_CALLBACK_OUT", str(tmp_path / "callback"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", [str(path)])
    with pytest.raises(SystemExit) as ended:
        runpy.run_path(str(path), run_name="__main__")
    assert ended.value.code in (None, 0)
    folder = tmp_path / "callback"
    assert rundir.read_manifest(folder).status == "complete"
    mine = Diagnosis.read(folder / rundir.DIAGNOSIS)
    theirs = exam.diagnosis
    assert theirs is not None
    # The same verdict, and the planted wait found by both. Which bottleneck is primary is the
    # host's to say (on a quiet host the wait is most of the step; on a crowded one the
    # trainer's own work can outgrow it), but both ways of recording must say the same.
    assert mine.primary_bottleneck == theirs.primary_bottleneck
    assert "dataloader_wait" in {f.rule_id for f in mine.findings}
    assert "dataloader_wait" in {f.rule_id for f in theirs.findings}
    # Forward and backward are timed as phases of their own (Lightning runs them in a closure).
    assert mine.phase_fractions["forward"] > 0 and mine.phase_fractions["backward"] > 0
    assert (folder / rundir.PROFILE).is_file() and (folder / rundir.TRACE).is_file()
    from torchdoctor.report.api import render_text
    from torchdoctor.report.load import read_input

    assert "## Verdict" in render_text(read_input(folder), "md")
    assert diff_inputs(tmp_path / "diagnose", folder).kind == "run"
