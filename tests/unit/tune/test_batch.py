"""Batch size for throughput: grow while it pays, binary-search the memory edge."""

from __future__ import annotations

from pathlib import Path

from torchdoctor.tune import tune
from tune_sim import sim_config

MiB = 2**20


def _batches(result_trials: Path) -> list[tuple[int, str, str]]:
    from torchdoctor.tune.records import read_trial

    out = []
    for p in sorted(result_trials.iterdir()):
        r = read_trial(p)
        if r.kind == "batch":
            out.append((r.change["batch_size"], r.status, r.decision))
    return out


def test_grows_while_throughput_rises_then_searches_the_memory_edge(tmp_path: Path) -> None:
    # Step time grows as batch**0.5 (throughput keeps rising), memory 1 MiB per sample and a
    # simulated device of 200 MiB: 64 and 128 fit, 256 does not, the edge lies at 200.
    config = sim_config(
        [],
        search_batch=True,
        noise=0.01,
        batch_exponent=0.5,
        bytes_per_sample=MiB,
        memory_limit_bytes=200 * MiB,
        # A larger batch learns more per step: a much lower loss is no quality regression.
        loss_shift={"batch_size": {"64": -0.6}},
    )
    result = tune(config=config, out=tmp_path / "run")
    tried = _batches(tmp_path / "run" / "trials")
    assert tried[:3] == [(64, "ok", "kept"), (128, "ok", "kept"), (256, "oom", "failed")]
    assert all(b < 256 for b, status, _ in tried[3:] if status == "ok")
    best = result.best_recipe["batch_size"]
    assert 128 < best <= 200
    assert result.speedup > 2.0
    assert result.ladder.rungs[1].loss_deviation is not None
    assert result.ladder.rungs[1].loss_deviation < -0.5
    # The result says that the learning dynamics changed, and how to keep them.
    (note,) = [n for n in result.notes if n.startswith("the effective batch changed")]
    assert f"from 32 to {best} samples" in note and "--hold-effective-batch" in note


def test_stops_growing_when_throughput_flattens(tmp_path: Path) -> None:
    # Linear step time: a bigger batch brings no throughput, so the first doubling is rejected.
    config = sim_config([], search_batch=True, noise=0.01, batch_exponent=1.0)
    result = tune(config=config, out=tmp_path / "run")
    assert _batches(tmp_path / "run" / "trials") == [(64, "ok", "rejected")]
    assert "batch_size" not in result.best_recipe


def test_hold_effective_batch_trades_accumulation_for_micro_batch(tmp_path: Path) -> None:
    config = sim_config([], search_batch=True, noise=0.01, batch_exponent=0.5)
    config = config.model_copy(
        update={
            "hold_effective_batch": True,
            "baseline_recipe": {"batch_size": 32, "grad_accum": 4},
        }
    )
    result = tune(config=config, out=tmp_path / "run")
    best = result.best_recipe
    assert best["batch_size"] * best["grad_accum"] == 128
    assert best == {"batch_size": 128, "grad_accum": 1}
    assert not any(n.startswith("the effective batch changed") for n in result.notes)
