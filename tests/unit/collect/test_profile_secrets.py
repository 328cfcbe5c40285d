"""A script's own secret (a database URL with its password among its arguments) stays out of
the records a run writes: the script profile, and the command a tune shows."""

from __future__ import annotations

from pathlib import Path

from torchdoctor.collect.script_profile import ScriptProfile
from torchdoctor.tune.sources import ScriptCommand

PASSWORD = "hunter2"
ARGV = ["train.py", "--db", f"postgresql://td:{PASSWORD}@db.internal/runs", "--epochs", "3"]


def test_a_profile_written_and_read_back_keeps_the_command_without_its_password(
    tmp_path: Path,
) -> None:
    path = ScriptProfile(argv=ARGV).write(tmp_path / "script_profile.json")
    assert PASSWORD not in path.read_text()
    read = ScriptProfile.read(path)
    # Everything but the secret is as typed.
    assert read.argv[0] == "train.py" and read.argv[-2:] == ["--epochs", "3"]
    assert read.argv[2].startswith("postgresql://td:") and read.argv[2].endswith(
        "@db.internal/runs"
    )


def test_the_command_a_tune_shows_masks_the_password() -> None:
    shown = ScriptCommand(tuple(ARGV)).display()
    assert PASSWORD not in shown and shown.startswith("python train.py --db postgresql://td:")
    job = ("torch.distributed.run", "--nproc-per-node", "2", *ARGV)
    torchrun = ScriptCommand(job, module=True).display()
    assert PASSWORD not in torchrun and torchrun.startswith("torchrun --nproc-per-node 2")
