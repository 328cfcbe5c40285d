"""Joint refinement: Optuna multi-objective trials in the same study, Pareto front reported."""

from __future__ import annotations

from pathlib import Path

from torchdoctor.tune import Study, tune
from torchdoctor.tune.config import STUDY_FILE
from torchdoctor.tune.joint import pareto_front
from torchdoctor.tune.space import KnobSpec
from tune_sim import sim_config

COMPILE = KnobSpec("compile", ("off", "default"), "close", "off")
LAYOUT = KnobSpec("channels_last", (False, True), "exact", False)
BATCH = KnobSpec("batch_size", (16, 32, 64), "semantic", 32)


def test_joint_trials_are_stored_and_the_front_is_non_dominated(tmp_path: Path) -> None:
    config = sim_config(
        [COMPILE, LAYOUT, BATCH],
        effects={"compile": {"default": 0.6}, "channels_last": {"True": 0.9}},
        batch_exponent=0.6,
        bytes_per_sample=2**20,
    ).model_copy(update={"joint_trials": 5})
    result = tune(config=config, out=tmp_path / "run")
    records = list(Study(f"sqlite:///{tmp_path / 'run' / STUDY_FILE}").records())
    joint = [r for r in records if r.kind == "joint"]
    assert len(joint) == 5
    assert all(r.recipe.get("batch_size") for r in joint)  # the batch was part of the search
    # A joint trial records what every trial of an arm records, its chunk peaks among them.
    for r in joint:
        assert r.chunk_times_s and r.chunk_peak_memory_bytes
        assert max(r.chunk_peak_memory_bytes) == r.peak_memory_bytes
    front = result.pareto_front
    assert front
    for p in front:
        for q in front:
            assert not (
                q.samples_per_s > p.samples_per_s and q.peak_memory_bytes < p.peak_memory_bytes
            )
    assert front == pareto_front([*records])


def test_pareto_front_drops_dominated_points() -> None:
    from torchdoctor.tune import TrialResult
    from torchdoctor.tune.outcome import Outcome

    def rec(sps: float, mem: int) -> TrialResult:
        return TrialResult(
            key=f"{sps}-{mem}",
            kind="joint",
            step=1,
            recipe={"x": sps},
            status="ok",
            decision="measured",
            outcome=Outcome.MEASURED,
            samples_per_s=sps,
            peak_memory_bytes=mem,
        )

    front = pareto_front([rec(10, 100), rec(20, 200), rec(15, 300), rec(5, 50)])
    assert [(p.samples_per_s, p.peak_memory_bytes) for p in front] == [
        (20, 200),
        (10, 100),
        (5, 50),
    ]
