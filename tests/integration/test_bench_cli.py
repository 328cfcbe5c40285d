from __future__ import annotations

import json

import pytest

from torchdoctor.cli.main import main


def test_bench_json_measurement(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--json", "bench", "y = x * 2", "--setup", "x = torch.ones(8)", "--budget", "0.3"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "torchdoctor/measurement"
    assert data["median"] > 0 and data["ci_low"] <= data["median"] <= data["ci_high"]
    assert len(data["times"]) >= 1


def test_bench_vs_json_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["--json", "bench", "sum(range(200))", "--vs", "sum(range(2000))", "--budget", "0.6"]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "torchdoctor/comparison"
    est = data["estimates"]["sum(range(2000))"]
    assert est["verdict"] == "slower" and est["speedup"] < 0.5


def test_bench_rich_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "pass", "--budget", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "median" in out and "95% CI" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["bench", "1/0"], "statement '1/0' raised ZeroDivisionError"),
        (["bench", "x", "--setup", "import no_such_mod_td"], "setup 'import no_such_mod_td'"),
        (["bench", "x +"], "not valid Python"),
        (["bench", "pass", "--budget", "-1"], "--budget -1"),
        (["bench", "pass", "--confidence", "1.5"], "--confidence 1.5"),
        (["bench", "pass", "--vs", "1/0", "--budget", "0.2"], "raised ZeroDivisionError"),
        (["bench", "pass", "--device", "tpu"], "--device tpu"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    args: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err


def test_bench_takes_a_device(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--json", "bench", "y = x * 2", "-s", "x = torch.ones(8)", "--device", "cpu",
                 "--budget", "0.2"])  # fmt: skip
    assert code == 0
    assert json.loads(capsys.readouterr().out)["median"] > 0
