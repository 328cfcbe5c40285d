"""`tune`'s options (`--objective fit`, `--final-pairs`) are checked before anything runs
(exit 2, one line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.cli import main as cli_main
from torchdoctor.cli.tune import _memory_cap


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["tune", "mlp", "--objective", "fit"], "--objective fit needs the memory cap"),
        (["tune", "mlp", "--objective", "speed"], "unknown objective 'speed'"),
        (["tune", "mlp", "--max-memory", "75%"], "a share of the baseline's peak"),
        (
            ["tune", "--objective", "fit", "--max-memory", "1GiB", "--", "python", "t.py"],
            "--objective fit tunes a workload, not a script",
        ),
        # Two pairs give no interval worth the name (measure.MIN_REPLICATES).
        (["tune", "mlp", "--final-pairs", "2"], "--final-pairs"),
    ],
)
def test_bad_fit_options_exit_2_before_any_run(
    argv: list[str],
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_main.main(argv) == 2
    assert says in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # no run folder left behind


def test_the_cap_is_a_size_or_with_fit_a_share_of_the_baseline() -> None:
    assert _memory_cap("4GiB", "fit") == (4 * 2**30, None)
    assert _memory_cap("75%", "fit") == (None, 0.75)
    assert _memory_cap(None, "throughput") == (None, None)
