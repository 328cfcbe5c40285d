from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.core.env import (
    SIMD_FLAGS,
    Ceilings,
    EnvFingerprint,
    cache_dir,
    fingerprint,
    fingerprint_key,
)


def test_fingerprint_describes_this_machine() -> None:
    import torch

    fp = fingerprint()
    assert fp.cpu_model and fp.cores_logical >= 1
    assert set(fp.cpu_flags) <= set(SIMD_FLAGS)
    assert fp.torch_version == str(torch.__version__)
    assert fp.intra_op_threads == torch.get_num_threads()
    assert fp.torch_cuda == torch.version.cuda
    if not torch.cuda.is_available():
        assert fp.cuda_devices == []
    assert EnvFingerprint.from_json_dict(fp.to_json_dict()) == fp


def test_fingerprint_reads_flags_from_proc_cpuinfo() -> None:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if "avx2" not in text:
        pytest.skip("no /proc/cpuinfo with avx2 here")
    assert "avx2" in fingerprint().cpu_flags


def test_key_is_stable_and_changes_with_what_matters() -> None:
    fp = fingerprint()
    assert fingerprint_key(fp) == fingerprint_key(fp) == fp.key()
    assert len(fp.key()) == 16
    assert fingerprint_key(fp.model_copy(update={"python": "0.0"})) == fp.key()
    assert fingerprint_key(fp.model_copy(update={"intra_op_threads": 999})) != fp.key()
    assert fingerprint_key(fp.model_copy(update={"torch_version": "0.0"})) != fp.key()


def test_cache_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHDOCTOR_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("TORCHDOCTOR_CACHE_DIR")
    assert "torchdoctor" in str(cache_dir())


def test_ceilings_roundtrip(tmp_path: Path) -> None:
    c = Ceilings(
        device="cpu",
        device_name="x",
        peak_flops={"float32": 1e11},
        mem_bandwidth_bytes_per_s=1e10,
        source="measured",
        fingerprint_key="abc",
    )
    assert Ceilings.read(c.write(tmp_path / "c.json")) == c
