"""What a script's study hands back, for each thing its fresh process pairs can say.

A study of a script whose bottleneck no knob cures (host syncs, Python bookkeeping between
steps) ends in one of four ways, and `tune()` (tune/api.py `_finish`) must say which: nothing
kept (the script's own recipe, speedup 1.0, no final A/B); a kept change the final A/B of
fresh process pairs confirms; one the pairs can neither confirm nor rule out (kept, with a
note); one the pairs refute (the baseline recommended, with a note). Each is reached here with
the script path of `tune()` (its command, its knobs from the catalogue, its snippet and patch)
and simulated arms of known speed in place of the script's launches, so the outcome is
decided by the scenario, not by the host's noise. A loader knob in a script without a
DataLoader (the zoo's well-tuned control) is tried once and said not to apply. The launches
themselves, and a gain found in a real script, are the studies of
tests/integration/test_tune_script.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import torchdoctor.tune.api as api
from torchdoctor.collect.inject.base import ALREADY_RUNS_WITH
from torchdoctor.procs import SessionSpec
from torchdoctor.tune import Confirmation, TuneConfig, TuneResult, tune
from torchdoctor.tune.arms import Arm, MeasurePlan, Timeout
from torchdoctor.tune.confirm import CONFIRM_PAIRS
from torchdoctor.tune.records import read_trial
from torchdoctor.tune.sources import ArmSource, WorkloadArms
from torchdoctor.tune.space import catalogue_space
from torchdoctor.tune.tuner import TuneSettings
from tune_sim import SIMULATED_FACTORY, study_story

#: A small training loop with the `zero_grad()` call the set_to_none knob acts on: the patch
#: a kept set_to_none=False writes edits that line.
TRAIN = """\
import torch

w = torch.nn.Parameter(torch.ones(4))
opt = torch.optim.SGD([w], lr=0.01)
for _ in range(20):
    opt.zero_grad()
    (w * w).sum().backward()
    opt.step()
"""

#: The knobs the no-knob studies tune: both act in any script, neither cures its bottleneck.
KNOBS = ["threads", "set_to_none"]
#: The catalogue's candidate for set_to_none (its default, True, is what scripts run).
SET_TO_NONE_OFF = {"set_to_none": False}


def _threads_cost(factor: float) -> dict[str, float]:
    """A step-time factor for every thread count the ladder tries on this host (all but the
    one the script runs with): the sim's `effects` entry for a knob that only costs."""
    import torch

    (spec,) = [s for s in catalogue_space("cpu") if s.name == "threads"]
    return {str(v): factor for v in spec.values if v != torch.get_num_threads()}


#: What the injection says of loader knobs in a script that builds no DataLoader.
NO_LOADER = "the script built no torch DataLoader"


@dataclass(frozen=True)
class LoaderlessArms(WorkloadArms):
    """Simulated arms of a script without a DataLoader: loader workers never act in it, as
    the injection reports for the zoo's control (tests/integration/test_script_worker.py)."""

    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        arm = super().prepare(recipe, timeout=timeout, log_path=log_path)
        if "num_workers" in recipe:
            arm.not_applied = {"num_workers": NO_LOADER}
        return arm


#: What the injection says of a value the script's own call already passes (the first
#: num_workers value tried, in `OwnValueArms`).
OWN_VALUE = f"the script's DataLoader {ALREADY_RUNS_WITH} num_workers={{}}"


@dataclass(frozen=True)
class OwnValueArms(WorkloadArms):
    """Simulated arms of a script whose own call already passes the first num_workers value the
    ladder tries (as a script's fully_shard passes reshard_after_forward=True): that value is
    said not to act; the knob's other values act."""

    own: list[object] = field(default_factory=list)

    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        arm = super().prepare(recipe, timeout=timeout, log_path=log_path)
        if "num_workers" in recipe and not self.own:
            self.own.append(recipe["num_workers"])
        if "num_workers" in recipe and recipe["num_workers"] in self.own:
            arm.not_applied = {"num_workers": OWN_VALUE.format(recipe["num_workers"])}
        return arm


def _tune_script(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    knobs: list[str] = KNOBS,
    loader: bool = True,
    arm_kind: type[WorkloadArms] | None = None,
    replicate_wins: bool = True,
    **model: Any,
) -> TuneResult:
    """`tune -- python train.py` with the study's arms drawn from a simulated session
    (tests/sim_session.py) whose speed per recipe is `model`'s, in this process."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    options: dict[str, Any] = {
        "base_step_s": 0.01,
        "noise": 0.002,
        "base_batch": 32,
        "lottery_id": str(tmp_path),  # a fresh count of prepared sessions for this test
        **model,
    }

    def simulated_arms(config: TuneConfig, settings: TuneSettings) -> ArmSource:
        assert config.command == ["train.py"]  # the script path of tune() asks for them
        spec = SessionSpec("sim", {}, factory=SIMULATED_FACTORY, options=options)
        arms = arm_kind or (WorkloadArms if loader else LoaderlessArms)
        return arms(spec, settings.plan, settings.objective, isolate=False)

    monkeypatch.setattr(api, "_arm_source", simulated_arms)
    config = TuneConfig(
        workload="script:train",
        command=["train.py"],  # run in the script's folder, as a user runs it
        cwd=str(tmp_path),
        knobs=knobs,
        search_batch=False,
        replicate_wins=replicate_wins,
        budget_s=300,
        trial_timeout_s=20,
        plan=MeasurePlan(min_chunk_s=0.0),  # simulated steps take no wall time: 4-step chunks
    )
    return tune(config=config, out=tmp_path / "run")


def _trials(run: Path) -> list[Any]:
    return [read_trial(p) for p in sorted((run / "trials").iterdir())]


def _confirmations(run: Path) -> list[Confirmation]:
    return [t for t in _trials(run) if isinstance(t, Confirmation)]


def _complete(run: Path) -> bool:
    return bool(json.loads((run / "run.json").read_text())["status"] == "complete")


def test_no_knob_helps_the_script_keeps_its_own_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _tune_script(tmp_path, monkeypatch)
    run = Path(result.run_dir)
    story = study_story(run)

    assert result.workload == "script:train" and _complete(run)
    ladder = [t for t in _trials(run) if t.kind == "ladder"]
    # Both knobs were tried (threads at the one other value a 2-core host offers, or more),
    # and none kept.
    assert {next(iter(t.change)) for t in ladder} == set(KNOBS), story
    assert SET_TO_NONE_OFF in [t.change for t in ladder], story
    assert all(t.decision == "rejected" for t in ladder), story
    assert result.best_recipe == result.baseline_recipe == {}
    assert result.speedup == 1.0 and tuple(result.speedup_ci) == (1.0, 1.0)
    assert result.speedup_from == "none"
    assert [r.change for r in result.ladder.rungs] == [{}]
    # Nothing to confirm: no final A/B, and no note speaks of one.
    assert _confirmations(run) == []
    assert not [n for n in result.notes if n.startswith(("speedup ", "not confirmed", "the final"))]
    assert json.loads((run / "best_recipe.json").read_text()) == {}
    snippet = (run / "best_recipe.py").read_text()
    assert "torchdoctor run --recipe best_recipe.json -- python train.py" in snippet
    assert "(none: no change was proven faster than the baseline)" in snippet
    assert not (run / "best_recipe.patch").exists()


def test_a_change_the_fresh_pairs_confirm_is_kept_with_its_figure_and_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # threads costs 4x wherever the ladder tries it: set_to_none is the one gain.
    effects = {"set_to_none": {"False": 1 / 1.3}, "threads": _threads_cost(4.0)}
    result = _tune_script(tmp_path, monkeypatch, effects=effects)
    run = Path(result.run_dir)
    story = study_story(run)

    assert result.best_recipe == SET_TO_NONE_OFF, story
    (confirm,) = _confirmations(run)
    assert confirm.ok and len(confirm.rates) == CONFIRM_PAIRS, story
    # The headline is the fresh pairs' figure, and it proves the gain.
    assert result.speedup_from == "final_ab"
    assert result.speedup == pytest.approx(confirm.speedup)
    assert 1.0 < result.speedup_ci[0] <= 1.3 <= result.speedup_ci[1], story
    assert any(
        n.startswith(f"speedup from {CONFIRM_PAIRS} fresh process pairs") for n in result.notes
    )
    assert json.loads((run / "best_recipe.json").read_text()) == SET_TO_NONE_OFF
    # The script's own zero_grad() call, edited in a patch for `patch -p1`.
    patch = (run / "best_recipe.patch").read_text()
    assert "-    opt.zero_grad()" in patch and "set_to_none=False" in patch, patch
    assert _complete(run)


def test_a_change_the_fresh_pairs_cannot_tell_from_no_gain_is_kept_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ladder's pair of processes runs at the recipes' nominal speeds and proves a 10%
    # gain; every later process runs up to ~40% faster or slower than another (lognormal sd
    # 0.3), so the fresh pairs can neither tell the gain from no gain nor rule it out.
    # threads costs 4x, more than any process's luck can hide: it is never kept.
    result = _tune_script(
        tmp_path,
        monkeypatch,
        effects={"set_to_none": {"False": 1 / 1.1}, "threads": _threads_cost(4.0)},
        process_spread=0.3,
        process_spread_after=1,
    )
    run = Path(result.run_dir)
    story = study_story(run)

    assert result.best_recipe == SET_TO_NONE_OFF, story
    (confirm,) = _confirmations(run)
    assert confirm.ok, story
    assert result.speedup_from == "final_ab"  # the pairs' figure, its interval holding 1.0
    assert result.speedup_ci[0] <= 1.0 <= result.speedup_ci[1], story
    (note,) = [n for n in result.notes if n.startswith("not confirmed end to end")]
    assert "set_to_none=False" in note and "the recipe stands" in note
    assert json.loads((run / "best_recipe.json").read_text()) == SET_TO_NONE_OFF


def test_a_change_the_fresh_pairs_refute_is_not_recommended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The baseline's first process runs 1.3x slow (the process lottery) and neither knob does
    # anything: with the ladder's wins resting on their first pair, it keeps the first
    # candidate against that slow worker; fresh pairs find no gain.
    result = _tune_script(
        tmp_path,
        monkeypatch,
        replicate_wins=False,
        first_session_effects={"set_to_none": {"None": 1.3}},
    )
    run = Path(result.run_dir)
    story = study_story(run)

    kept = [r.change for r in result.ladder.rungs][1:]
    assert kept, story  # kept on the ladder ...
    assert result.best_recipe == {} and result.speedup == 1.0, story  # ... not recommended
    assert result.speedup_from == "none"
    (confirm,) = _confirmations(run)
    assert confirm.ok and confirm.speedup_ci is not None and confirm.speedup_ci[0] <= 1.0, story
    (note,) = [n for n in result.notes if n.startswith("the final A/B did not confirm")]
    shown = " ".join(f"{k}={v}" for change in kept for k, v in change.items())
    assert shown in note and "baseline recipe is recommended" in note
    assert json.loads((run / "best_recipe.json").read_text()) == {}
    assert not (run / "best_recipe.patch").exists()


def test_loader_workers_in_a_script_without_a_dataloader_are_tried_once_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A well-tuned script that feeds pre-batched tensors (the zoo's control): num_workers does
    # not act in it, so its first candidate ends its trial as "does not apply" without an A/B,
    # no other value is tried, the result says why, and nothing else helps.
    result = _tune_script(tmp_path, monkeypatch, knobs=["num_workers", "set_to_none"], loader=False)
    run = Path(result.run_dir)
    story = study_story(run)

    ladder = [t for t in _trials(run) if t.kind == "ladder"]
    workers = [t for t in ladder if "num_workers" in t.change]
    assert len(workers) == 1, story
    assert workers[0].decision == "rejected" and workers[0].reason.startswith("does not apply")
    assert NO_LOADER in workers[0].reason and workers[0].speedup_vs_best is None
    (note,) = [n for n in result.notes if "num_workers" in n]
    assert note == f"not tried, they do not apply here: num_workers ({NO_LOADER})"
    assert result.best_recipe == {} and result.speedup == 1.0, story
    assert _confirmations(run) == [] and _complete(run)


def test_a_value_the_script_already_runs_with_moves_the_ladder_to_the_knobs_next_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The script's own call passes the first num_workers value tried: that candidate ends as
    # "does not apply", and the knob's other values are still tried (the knob reaches the
    # script; only that value is the script's own), with no note that the knob cannot act.
    (spec,) = [s for s in catalogue_space("cpu") if s.name == "num_workers"]
    faster = {str(v): 0.5 for v in spec.values}  # each value twice as fast as the baseline
    result = _tune_script(
        tmp_path, monkeypatch, knobs=["num_workers"], arm_kind=OwnValueArms,
        effects={"num_workers": faster},
    )  # fmt: skip
    run = Path(result.run_dir)
    story = study_story(run)
    tried = [t for t in _trials(run) if t.kind == "ladder" and "num_workers" in t.change]
    assert len(tried) >= 2, story
    first, second, *_ = tried
    assert first.reason.startswith("does not apply") and ALREADY_RUNS_WITH in first.reason
    assert second.change != first.change and not second.reason.startswith("does not apply")
    assert not [n for n in result.notes if "do not apply here" in n], result.notes
    assert result.best_recipe == second.change, story
