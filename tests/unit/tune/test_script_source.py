"""Scripts as tune workloads: the tuner opens its arms through one seam (`ArmSource`); a
script's command picks the script source, and a candidate whose changed knob did not act in
the script ends its trial as "does not apply", without an A/B, its other values untried."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from torchdoctor.procs import Losses, Ran, Reference, ReplyT, Request, Run, SessionSpec, StepRow
from torchdoctor.tune import TuneConfig
from torchdoctor.tune.api import _arm_source, script_not_injectable
from torchdoctor.tune.arms import Arm, MeasurePlan, Timeout
from torchdoctor.tune.ladder import LadderPlan, climb
from torchdoctor.tune.outcome import DOES_NOT_APPLY
from torchdoctor.tune.sources import ArmSource, ScriptArms, WorkloadArms, not_applied_of
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.study import Study
from torchdoctor.tune.tuner import Tuner, TuneSettings
from torchdoctor.tune.turns import DeviceTurns

NO_LOADER = "the script built no torch DataLoader"


def test_a_command_picks_the_script_source_and_a_workload_the_workload_source() -> None:
    settings = TuneSettings()
    script = TuneConfig(workload="script:train", command=["train.py", "--steps", "5"], seed=3)
    source = _arm_source(script, settings)
    assert isinstance(source, ScriptArms)
    assert source.command.argv == ("train.py", "--steps", "5")
    assert source.seed == 3  # every arm of the study gets the config's seed
    assert _arm_source(TuneConfig(workload="mlp"), settings) is None
    tuner = Tuner(SessionSpec("mlp", {}), settings, Study("sqlite://"))
    assert isinstance(tuner.arms, WorkloadArms)


def test_knobs_the_injection_never_injects_are_skipped_up_front_for_scripts_only() -> None:
    skipped = script_not_injectable(TuneConfig(workload="script:t", command=["t.py"]))
    assert sorted(k for knobs in skipped.values() for k in knobs) == [
        "attention",
        "cuda_graphs",
        "grad_accum",
        "non_blocking",
    ]
    assert script_not_injectable(TuneConfig(workload="mlp")) == {}


def test_not_applied_of_reads_the_injection_record() -> None:
    record = {
        "knobs": [
            {"knob": "num_workers", "status": "not_applied", "reason": NO_LOADER},
            {"knob": "threads", "status": "applied"},
        ]
    }
    assert not_applied_of(record) == {"num_workers": NO_LOADER}
    assert not_applied_of(None) == {}


class FakeScriptWorker:
    """A script whose steps take 10 ms for 8 samples, the loss falling by 0.01 a step."""

    def __init__(self) -> None:
        self.runs = 0
        self.step = 0

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        if isinstance(message, Run):
            self.runs += 1
            rows = []
            for _ in range(message.steps):
                self.step += 1
                rows.append(StepRow(0.01, 8, 2.0 - 0.01 * self.step))
            return message.expect(Ran(tuple(rows)))
        if isinstance(message, Reference):
            n = message.steps
            return message.expect(Losses(tuple(2.0 - 0.01 * (i + 2) for i in range(n))))
        raise AssertionError(message)

    def close(self) -> None:
        pass


class NoLoaderScript(ArmSource):
    """An `ArmSource` over a script without a DataLoader: num_workers never acts."""

    def __init__(self, plan: MeasurePlan) -> None:
        self.plan = plan
        self.turns = DeviceTurns()
        self.opened: list[tuple[dict[str, Any], FakeScriptWorker]] = []

    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        worker = FakeScriptWorker()
        self.opened.append((dict(recipe), worker))
        arm = Arm(recipe=dict(recipe), worker=worker, objective="throughput")
        if "num_workers" in recipe:
            arm.not_applied = {"num_workers": NO_LOADER}
        return arm


def test_a_knob_that_does_not_act_ends_its_trial_without_an_ab(tmp_path: Path) -> None:
    plan = MeasurePlan(min_chunk_s=0.0, parity_steps=8)
    source = NoLoaderScript(plan)
    tuner = Tuner(
        SessionSpec("script:t", {}),
        TuneSettings(plan=plan, budget_s=300),
        Study(f"sqlite:///{tmp_path / 'study.db'}"),
        arms=source,
    )
    knob = KnobSpec("num_workers", (0, 1, 2), "exact", 0)
    try:
        outcome = climb(tuner, LadderPlan(space=[knob], search_batch=False, confirm=False))
    finally:
        tuner.close()
    trials = [t for t in tuner.trials if t.kind == "ladder"]
    # One trial for the knob (num_workers=1); num_workers=2 is not tried.
    assert [t.change for t in trials] == [{"num_workers": 1}]
    assert trials[0].decision == "rejected"
    assert trials[0].reason.startswith(DOES_NOT_APPLY)
    assert NO_LOADER in trials[0].reason
    assert trials[0].speedup_vs_best is None  # no A/B was run
    candidate = next(w for recipe, w in source.opened if recipe.get("num_workers") == 1)
    assert candidate.runs == 0  # not even warmed up
    assert outcome.skipped == {NO_LOADER: ["num_workers"]}
    assert tuner.best_recipe == {}


def test_the_ladder_does_not_try_the_value_a_script_runs_with_of_its_own() -> None:
    from torchdoctor.tune.ladder import candidate_changes
    from torchdoctor.tune.sources import own_settings_of

    loaders = [{"num_workers": 2, "pin_memory": False, "batch_size": 16}]
    assert own_settings_of(loaders) == {"num_workers": 2, "pin_memory": False}
    tuner = Tuner(SessionSpec("script:t", {}), TuneSettings(), Study("sqlite://"))
    knob = KnobSpec("num_workers", (0, 1, 2), "exact", None)
    assert candidate_changes(tuner, knob, None, {}) == [
        {"num_workers": 0},
        {"num_workers": 1},
        {"num_workers": 2},
    ]
    tuner.own_settings = own_settings_of(loaders)
    assert candidate_changes(tuner, knob, None, {}) == [{"num_workers": 0}, {"num_workers": 1}]


def test_the_cli_reads_a_script_or_a_module_command() -> None:
    from torchdoctor.api import tune_config

    options: dict[str, Any] = dict(
        budget_s=90.0, objective="throughput", knobs=["num_workers"], min_gain=0.02, pairs=3,
        device="cpu", seed=0,
    )  # fmt: skip
    script = tune_config(["python", "train.py", "--steps", "4"], **options)
    assert (script.command, script.module, script.workload) == (
        ["train.py", "--steps", "4"],
        False,
        "script:train",
    )
    assert script.search_batch is False and script.knobs == ["num_workers"]
    assert script.final_pairs == 3
    module = tune_config(["python", "-m", "pkg.train", "--lr", "1"], **options)
    assert (module.command, module.module, module.workload) == (
        ["pkg.train", "--lr", "1"],
        True,
        "script:pkg.train",
    )


@pytest.mark.parametrize(("device", "release"), [("cuda", True), ("cpu", False), (None, False)])
def test_a_script_on_a_gpu_hands_its_cached_memory_back_after_each_chunk(
    monkeypatch: pytest.MonkeyPatch, device: str | None, release: bool
) -> None:
    import torchdoctor.procs as procs
    from torchdoctor.procs import Prepared
    from torchdoctor.tune.sources import ScriptCommand

    class ReadyWorker:
        peak_rss_bytes = 0

        def __init__(self, argv: list[str], **kwargs: Any) -> None:
            pass

        def request(self, message: Any, *, timeout_s: float) -> Any:
            return Prepared(1.0, startup_s=0.5, device=device)  # the script's ready report

        def close(self, *, kill: bool = False) -> None:
            pass

    monkeypatch.setattr(procs, "ScriptWorker", ReadyWorker)
    source = ScriptArms(ScriptCommand(("train.py",)), MeasurePlan(), "throughput")
    arm = source.prepare({}, timeout=lambda: 60.0, log_path=None)
    assert arm.release_after_run is release
