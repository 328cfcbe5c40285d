"""The trainer callbacks: each starts its recording on the main process only, with the target
it names, and finishes it when training ends (the trainers' libraries faked, since they are
optional extras; `test_recording.py` checks what a recording writes)."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from torchdoctor.integrations.recording import Recording, RecordingOptions


class _FakeRecording:
    def __init__(self, target: str, options: RecordingOptions) -> None:
        self.target, self.options = target, options
        self.run_dir = Path(str(options.out))
        self.started = False
        self.finished_with: list[BaseException | None] = []

    @property
    def active(self) -> bool:
        return self.started and not self.finished_with

    def start(self) -> None:
        self.started = True

    def finish(self, error: BaseException | None = None) -> None:
        self.finished_with.append(error)


@pytest.fixture
def fake_recordings(monkeypatch: pytest.MonkeyPatch) -> None:
    def recording(options: RecordingOptions, target: str) -> Recording:
        return _FakeRecording(target, options)  # type: ignore[return-value]

    monkeypatch.setattr(RecordingOptions, "recording", recording)


class _Base:
    pass


def _import_with(monkeypatch: pytest.MonkeyPatch, module: str, fakes: dict[str, Any]) -> Any:
    for name, attrs in fakes.items():
        fake = types.ModuleType(name)
        for key, value in attrs.items():
            setattr(fake, key, value)
        monkeypatch.setitem(sys.modules, name, fake)
    monkeypatch.delitem(sys.modules, module, raising=False)
    return importlib.import_module(module)


class _Model:
    pass


def test_the_lightning_callback_records_rank_0_from_start_to_end(
    monkeypatch: pytest.MonkeyPatch, fake_recordings: None, tmp_path: Path
) -> None:
    lightning = _import_with(
        monkeypatch,
        "torchdoctor.integrations.lightning",
        {"lightning": {}, "lightning.pytorch": {"Callback": _Base}},
    )
    other = lightning.TorchDoctorCallback(out=tmp_path / "other")
    other.on_train_start(types.SimpleNamespace(global_rank=1), _Model())
    assert other.recording is None and other.run_dir is None

    callback = lightning.TorchDoctorCallback(out=tmp_path / "run", warmup=2, profile_steps=3)
    assert isinstance(callback, _Base)
    callback.on_train_start(types.SimpleNamespace(global_rank=0), _Model())
    rec = callback.recording
    assert rec.target == "_Model" and rec.started
    assert (rec.options.warmup, rec.options.profile_steps) == (2, 3)
    failure = RuntimeError("nan")
    callback.on_exception(None, _Model(), failure)
    callback.on_train_end(None, _Model())
    assert rec.finished_with == [failure, None]
    assert callback.run_dir == tmp_path / "run"


def test_the_transformers_callback_records_the_main_process(
    monkeypatch: pytest.MonkeyPatch, fake_recordings: None, tmp_path: Path
) -> None:
    hf = _import_with(
        monkeypatch,
        "torchdoctor.integrations.transformers",
        {"transformers": {"TrainerCallback": _Base}},
    )
    other = hf.TorchDoctorTrainerCallback(out=tmp_path / "other")
    other.on_train_begin(None, types.SimpleNamespace(is_world_process_zero=False), None)
    assert other.recording is None

    callback = hf.TorchDoctorTrainerCallback(out=tmp_path / "run", report=False)
    callback.on_train_begin(None, types.SimpleNamespace(), None)
    rec = callback.recording
    assert rec.target == "trainer" and rec.started and rec.options.report is False
    callback.on_train_end(None, types.SimpleNamespace(), None)
    assert rec.finished_with == [None]
    assert callback.run_dir == tmp_path / "run"
