"""A rank launcher (torchrun) that trains nothing itself writes no record of its own beside
its ranks', unless it failed: then its error is the run's."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from torchdoctor.collect import _target
from torchdoctor.collect._target import LaunchConfig, run_target


@pytest.fixture
def launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module standing for torchrun: it exits as its ranks did (the first argument)."""
    (tmp_path / "fake_rank_launcher.py").write_text("import sys\nsys.exit(int(sys.argv[1]))\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)  # `python -m` finds modules in the working folder
    monkeypatch.setattr(_target, "TORCHRUN_MODULES", ("fake_rank_launcher",))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    before = signal.getsignal(signal.SIGTERM)
    yield tmp_path / "out"
    signal.signal(signal.SIGTERM, before)


def _run(out: Path, code: int) -> int:
    out.mkdir(exist_ok=True)
    cfg = LaunchConfig(out_dir=str(out), module=True, profile_steps=0)
    return run_target(cfg, ["fake_rank_launcher", str(code)])


def test_a_launcher_whose_ranks_succeeded_writes_no_record(launcher: Path) -> None:
    assert _run(launcher, 0) == 0
    assert list(launcher.glob("script_profile*.json")) == []


def test_a_failed_launcher_keeps_its_record(launcher: Path) -> None:
    assert _run(launcher, 3) == 3
    assert [p.name for p in launcher.glob("script_profile*.json")] == ["script_profile.json"]
