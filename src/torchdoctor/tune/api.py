"""`tune()`: open (or resume) a study in a run folder, climb the ladder, write the results.

Run folder (see `torchdoctor.core.rundir`)::

    RUN_DIR/
      run.json             manifest (running / complete / failed)
      tune_config.json     the study's settings (what --resume continues)
      study.db             the Optuna storage, unless --storage names a shared one (its URL
                           recorded without the password: tune/storage.py)
      trials/NNN-kind.json every trial's TrialResult (the final A/B's: a Confirmation)
      logs/                each worker process's stdout/stderr
      tune.json            TuneResult
      best_recipe.json     the best recipe
      best_recipe.py       the same as a ready-to-paste Python snippet
      best_recipe.patch    a script's recipe as a unified diff of its files (tune.cure)
      best_recipe_snippets.py  what of it has no line to edit

A script (`TuneConfig.command`: `tune -- python train.py ARGS`) is tuned the same way with
`ScriptArms` as the tuner's arm source (tune/sources.py): the same ladder, statistics, budget,
quality check (its yardstick: fresh launches with a perturbed model), study and report; the
knobs the injection never injects (each knob's `Script.not_injectable`) are left out of its
space, and `best_recipe.json` is what `torchdoctor run --recipe R -- python train.py` injects.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from torchdoctor.core.env import cpu_computes_bf16
from torchdoctor.core.errors import TorchDoctorError, TuneError
from torchdoctor.core.interrupt import Interrupted
from torchdoctor.core.io import atomic_write_text
from torchdoctor.core.redact import redact_argv
from torchdoctor.core.rundir import TRIALS, TUNE, finish_run_dir, new_run_dir
from torchdoctor.knobs import BATCH_SIZE, GRAD_ACCUM, NUM_WORKERS, THREADS
from torchdoctor.procs import ENGINE_FACTORY, SessionSpec
from torchdoctor.tune.config import CONFIG_FILE, STUDY_FILE, KnobSpecModel, TuneConfig
from torchdoctor.tune.confirm import confirmation_verdict
from torchdoctor.tune.disturbed import disturbed_notes
from torchdoctor.tune.fit import check_fit_config, climb_fit, fit_ladder, fit_notes, fit_plan
from torchdoctor.tune.fit_records import FitLadder
from torchdoctor.tune.joint import refine_jointly
from torchdoctor.tune.ladder import LadderPlan, climb
from torchdoctor.tune.parity import quality_bands, quality_notes
from torchdoctor.tune.prescriptions import diagnosed_bounds, diagnosed_values
from torchdoctor.tune.records import Ladder, SpeedupFrom, Trial, TuneResult
from torchdoctor.tune.resume import open_resume, secrets_held
from torchdoctor.tune.snippet import recipe_snippet
from torchdoctor.tune.sources import ArmSource, ScriptArms, ScriptCommand
from torchdoctor.tune.space import (
    KnobSpec,
    catalogue_space,
    recipe_validator,
    static_prior,
    with_diagnosed,
)
from torchdoctor.tune.storage import StorageURL
from torchdoctor.tune.study import Study
from torchdoctor.tune.torchrun import (
    check_fsdp_knobs,
    check_tunable,
    is_torchrun,
    job_script,
    offered_to_job,
)
from torchdoctor.tune.tuner import Tuner, TuneSettings

BEST_RECIPE_JSON = "best_recipe.json"
BEST_RECIPE_PY = "best_recipe.py"
LOGS = "logs"

TrialCallback = Callable[[Trial, Tuner], None]


def _default_batch(config: TuneConfig) -> int:
    if config.is_script:
        return 0  # a script's batch is its own (the batch search is off for scripts)
    if config.factory != ENGINE_FACTORY:
        return int(config.factory_options.get("base_batch", 32))
    return int(_workload_of(config).default_batch_size)


def _workload_params(config: TuneConfig) -> dict[str, Any]:
    """The workload's own parameters (`tune --param`), which the engine's factory takes as
    its `params` option (procs `engine_session`)."""
    return dict(config.factory_options.get("params") or {})


def _workload_of(config: TuneConfig) -> Any:
    from torchdoctor.workloads import get_workload

    return get_workload(config.workload, **_workload_params(config))


def _check_workload(config: TuneConfig) -> None:
    if config.factory != ENGINE_FACTORY or config.is_script:
        return
    try:
        _workload_of(config)
    except TorchDoctorError as exc:
        raise TuneError(f"cannot tune workload {config.workload!r}: {exc}") from None


def _space(config: TuneConfig) -> list[KnobSpec]:
    if config.space is not None:
        return [m.spec() for m in config.space]
    specs = catalogue_space(config.device)
    # Only a torchrun job builds a DistributedDataParallel or shards with fully_shard
    # (tune/torchrun.py).
    specs = offered_to_job(specs, config.command, config.module, config.cwd)
    if config.knobs is not None:
        specs = [s for s in specs if s.name in config.knobs]
    return _resolve_defaults(config, specs)


def _resolve_defaults(config: TuneConfig, specs: list[KnobSpec]) -> list[KnobSpec]:
    """Knobs whose default is "whatever the job does" get the value that means here.

    threads=None is torch's own intra-op thread count and num_workers=None the workload's
    default: without resolving them the ladder would spend a trial on threads=2 or
    num_workers=0 when that is exactly what the current recipe already runs.
    """
    if config.factory != ENGINE_FACTORY:
        return specs
    import torch

    if config.is_script:
        # A script's own num_workers is not known ahead: only threads resolves here.
        return [
            replace(s, default=torch.get_num_threads())
            if s.default is None and s.name == THREADS.name
            else s
            for s in specs
        ]

    effective = {
        THREADS.name: torch.get_num_threads(),
        NUM_WORKERS.name: _workload_of(config).default_num_workers,
    }
    return [
        replace(s, default=effective[s.name]) if s.default is None and s.name in effective else s
        for s in specs
    ]


def script_not_injectable(config: TuneConfig) -> dict[str, list[str]]:
    """why -> knobs of the catalogue the injection never injects into a script (skipped up
    front: each would need the script's own code changed)."""
    if not config.is_script:
        return {}
    from torchdoctor.knobs import not_injectable

    wanted = set(config.knobs) if config.knobs is not None else None
    skipped: dict[str, list[str]] = {}
    for name, why in not_injectable().items():
        if wanted is None or name in wanted:
            skipped.setdefault(why, []).append(name)
    return skipped


def check_script_job(config: TuneConfig) -> None:
    """A script's or torchrun job's study that cannot run is bad input, said before any launch
    or run folder: a script that does not exist or compile, a job that cannot be tuned, an
    FSDP knob for a job without `fully_shard`."""
    assert config.command is not None
    check_fsdp_knobs(config.knobs, config.command, config.module, config.cwd)
    if is_torchrun(config.command, config.module):
        check_tunable(config.command)
        job_file = job_script(config.command)
        if job_file is not None and not (Path(config.cwd or ".") / job_file).is_file():
            raise TuneError(
                f"script {job_file!r} not found",
                hint="give the path of a training script, e.g. -- torchrun ... train.py",
            )
        return
    if config.module or not config.command:
        return
    script = Path(config.cwd or ".") / config.command[0]
    if not script.is_file():
        raise TuneError(
            f"script {config.command[0]!r} not found",
            hint="give the path of a training script, e.g. -- python train.py",
        )
    from torchdoctor.collect import check_script

    check_script(str(script))  # CollectError: one that does not compile is said before a launch


def _arm_source(config: TuneConfig, settings: TuneSettings) -> ArmSource | None:
    """The tuner's arm source: a script's launches, or None (the workload's default)."""
    if config.command is None:
        return None
    return ScriptArms(
        ScriptCommand(tuple(config.command), module=config.module, cwd=config.cwd),
        settings.plan,
        settings.objective,
        seed=config.seed,
        memory_cap_bytes=settings.memory_cap_bytes,
    )


def _open_study(config: TuneConfig, run_dir: Path, storage: StorageURL | None) -> Study:
    """The study: shared in `storage` (or, for a new study, the caller's config's), else
    private in the run folder. A resumed study's storage is always the caller's
    (`tune.resume`)."""
    if storage is None and config.storage:
        storage = StorageURL.parse(config.storage)
    if storage is not None:
        if config.storage is not None and storage.public != config.storage:
            raise TuneError(
                f"--storage {storage.public!r} is not the study's storage {config.storage!r}",
                hint="resume with the study's own storage URL, or without --storage",
            )
        return Study(storage, shared=True, heartbeat_s=config.heartbeat_s)
    return Study(f"sqlite:///{(run_dir / STUDY_FILE).resolve()}")


def tune(
    workload: str | None = None,
    *,
    config: TuneConfig | None = None,
    out: Path | None = None,
    resume: Path | None = None,
    on_trial: TrialCallback | None = None,
    on_start: Callable[[Tuner, int], None] | None = None,
    command: tuple[list[str], bool] | None = None,
    storage: StorageURL | None = None,
) -> TuneResult:
    """Tune `workload` (or continue the study in `resume`); returns the `TuneResult`.

    With `resume`, the folder's settings are read from it, but what runs code or reaches a
    server is the caller's, checked against the folder's (`tune.resume`): `workload` for a
    workload file, `command` (argv, module) for a script (run in the current directory), the
    study's own `config` for a session factory and its options, and `storage`.
    `storage`: the shared study's storage URL with its password, held in memory only; the
    config records its public form (`config.storage` is set from it when it has none).
    """
    if storage is None and resume is None and config is not None and config.storage:
        # A new study's own config names its storage: its password is held the same way.
        storage = StorageURL.parse(config.storage)
    with secrets_held(storage) as held:
        return _tune(
            workload,
            config=config,
            out=out,
            resume=resume,
            on_trial=on_trial,
            on_start=on_start,
            command=command,
            storage=held,
        )


def _tune(
    workload: str | None,
    *,
    config: TuneConfig | None,
    out: Path | None,
    resume: Path | None,
    on_trial: TrialCallback | None,
    on_start: Callable[[Tuner, int], None] | None,
    command: tuple[list[str], bool] | None,
    storage: StorageURL | None,
) -> TuneResult:
    if resume is not None:
        config = open_resume(resume, workload, command, given=config, storage=storage)
        if config.is_script:
            check_script_job(config)
        run_dir = resume
        study = _open_study(config, run_dir, storage)
    else:
        if config is None:
            if workload is None:
                raise TuneError("no workload to tune", hint="name one, e.g. `tune cnn`")
            config = TuneConfig(workload=workload)
        if storage is not None and config.storage is None:
            config = config.model_copy(update={"storage": storage.public})
        _check_workload(config)
        check_fit_config(config)
        if config.is_script:
            check_script_job(config)  # a missing script is bad input: said before any folder
        # An explicit storage is opened before the run folder exists: a bad URL leaves nothing.
        early = _open_study(config, Path(), storage) if config.storage else None
        run_dir = new_run_dir("tune", config.workload, out=out)
        config.write(run_dir / CONFIG_FILE)
        study = early if early is not None else _open_study(config, run_dir, None)
    study.set_attr("workload", config.workload)
    if config.command is not None:
        shown = redact_argv(config.command)
        study.set_attr("command", [*(["-m"] if config.module else []), *shown])
    try:
        result = _run(config, run_dir, study, on_trial=on_trial, on_start=on_start)
    except TorchDoctorError as exc:
        finish_run_dir(run_dir, error=str(exc))
        raise
    except KeyboardInterrupt as exc:
        # Ctrl-C, SIGTERM or SIGHUP (core/interrupt.py): the trials decided so far are in the
        # study, and `tune --resume RUN_DIR` goes on from them; the arms were ended as the
        # interruption unwound through them.
        stopped = Interrupted.of(exc, run_dir)
        finish_run_dir(run_dir, error=str(stopped), interrupted=True)
        raise stopped from None
    except BaseException as exc:
        lost = study.storage_failure(exc)
        finish_run_dir(run_dir, error=str(lost) if lost else f"{type(exc).__name__}: {exc}")
        if lost is not None:
            raise lost from None
        raise
    finally:
        study.close()
    finish_run_dir(run_dir)
    return result


def _run(
    config: TuneConfig,
    run_dir: Path,
    study: Study,
    *,
    on_trial: TrialCallback | None,
    on_start: Callable[[Tuner, int], None] | None,
) -> TuneResult:
    trials_dir = run_dir / TRIALS
    (run_dir / LOGS).mkdir(parents=True, exist_ok=True)
    space = _space(config)
    if config.space is None:
        # The diagnosis's own values among the candidates (its loader workers, ...).
        space = with_diagnosed(space, diagnosed_values(run_dir))
    not_injectable = script_not_injectable(config)
    space = [s for s in space if not any(s.name in v for v in not_injectable.values())]
    if config.space is not None:
        validate = None
    else:
        validate = recipe_validator(
            None if config.is_script else config.workload,
            config.device,
            params=_workload_params(config),
        )
    plan = LadderPlan(
        space=space,
        prescribed=config.prescribed,
        validate=validate,
        search_batch=config.search_batch,
        values_after_keep=config.values_after_keep,
        default_batch=_default_batch(config),
        max_batch=config.max_batch,
        hold_effective_batch=config.hold_effective_batch,
        prior=static_prior(config.device, native_bf16=cpu_computes_bf16()),
        bounds=diagnosed_bounds(run_dir) if config.space is None else {},
    )
    settings = TuneSettings(
        objective=config.objective,
        min_gain=config.min_gain,
        replicate_wins=config.replicate_wins,
        final_pairs=config.final_pairs,
        plan=config.plan,
        isolate=config.isolate,
        device_sharing=config.device_sharing,
        # The memory ladder measures the peak each recipe reaches, the baseline's over the cap
        # included, so its workers run without the watch that would end them at the cap.
        memory_cap_bytes=None if config.objective == "fit" else config.max_memory_bytes,
        budget_s=config.budget_s,
        trial_timeout_s=config.trial_timeout_s,
    )
    spec = SessionSpec(
        workload=config.workload,
        recipe=dict(config.baseline_recipe),
        device=config.device,
        seed=config.seed,
        factory=config.factory,
        options=dict(config.factory_options),
    )

    def record(result: Trial) -> None:
        result.write(trials_dir / f"{len(tuner.trials) - 1:03d}-{result.kind}.json")
        if on_trial is not None:
            on_trial(result, tuner)

    tuner = Tuner(
        spec,
        settings,
        study,
        log_dir=run_dir / LOGS,
        on_trial=record,
        arms=_arm_source(config, settings),
    )
    from torchdoctor.tune.ladder import planned_trials

    if config.objective == "fit":
        return _run_fit(config, run_dir, tuner, plan, on_start)
    tuner.planned_order = [s.name for s in plan.order()]  # the ladder's (`ladder.climb`)
    if on_start is not None:
        on_start(tuner, planned_trials(plan) + config.joint_trials)
    try:
        outcome = climb(tuner, plan)
        pareto = []
        if config.joint_trials and not outcome.budget_exhausted:
            pareto = refine_jointly(tuner, space, config.joint_trials, plan.validate)
    finally:
        tuner.close()
    for why, knobs in not_injectable.items():
        outcome.skipped.setdefault(why, []).extend(knobs)
    try:
        return _finish(config, run_dir, tuner, outcome, pareto)
    finally:
        tuner.arms.close()  # the workers started ahead: the confirmation was the last need


def _run_fit(
    config: TuneConfig,
    run_dir: Path,
    tuner: Tuner,
    plan: LadderPlan,
    on_start: Callable[[Tuner, int], None] | None,
) -> TuneResult:
    """The memory ladder (`tune.fit`) in place of the speed ladder."""
    memory = fit_plan(config, plan.validate, default_batch=_default_batch(config))
    tuner.planned_order = [name for name, _, _ in memory.steps]
    if on_start is not None:
        on_start(tuner, 1 + len(memory.steps) + 3)
    try:
        outcome = climb_fit(tuner, memory)
    finally:
        tuner.close()
    try:
        return _finish(config, run_dir, tuner, outcome, [], fit=fit_ladder(tuner, outcome.plan))
    finally:
        tuner.arms.close()


def _finish(
    config: TuneConfig,
    run_dir: Path,
    tuner: Tuner,
    outcome: Any,
    pareto: Any,
    *,
    fit: FitLadder | None = None,
) -> TuneResult:
    baseline = tuner.baseline
    assert baseline is not None and baseline.samples_per_s is not None
    last = tuner.rungs[-1]
    confirm = outcome.confirmation
    notes = [*config.notes] + [
        f"not tried, they do not apply here: {', '.join(knobs)} ({why})"
        for why, knobs in outcome.skipped.items()
    ]
    not_tried = getattr(outcome, "not_tried", [])
    if not_tried:
        shown = ", ".join(_settings(change) for change in not_tried)
        notes.append(
            f"not tried: {shown}, once another value of the same knob was kept (one trial "
            "per knob where it wins)"
        )
    best_recipe = dict(tuner.best_recipe)
    source: SpeedupFrom = "none" if len(tuner.rungs) <= 1 else "ladder"
    if confirm is not None and confirm.ok and confirm.speedup is not None:
        source = "final_ab"
        speedup = confirm.speedup
        ci = confirm.speedup_ci or (speedup, speedup)
        best_sps = baseline.samples_per_s * speedup
        pairs = len(confirm.rates) or "a"
        verdict = confirmation_verdict(ci, last.speedup_vs_baseline_ci)
        changed = {k: v for k, v in best_recipe.items() if config.baseline_recipe.get(k) != v}
        if verdict == "confirmed":
            notes.append(
                f"speedup from {pairs} fresh process pairs of the best and the baseline, each "
                "timed as `torchdoctor run` times a recipe"
            )
        elif verdict == "inconclusive":
            notes.append(inconclusive_note(changed, speedup, ci, last.speedup_vs_baseline_ci))
        else:
            notes.append(unconfirmed_note(changed, speedup, ci))
            best_recipe = dict(config.baseline_recipe)
            source = "none"
            speedup, ci, best_sps = 1.0, (1.0, 1.0), baseline.samples_per_s
    else:
        speedup, ci = last.speedup_vs_baseline, last.speedup_vs_baseline_ci
        best_sps = baseline.samples_per_s * speedup
        if len(tuner.rungs) > 1 and fit is None:
            notes.append(chained_note(confirm, tuner.confirm_dropped))
    if fit is not None:
        notes += fit_notes(fit)
    if outcome.budget_exhausted:
        notes.append(budget_note(outcome.cut, outcome.cut_after_s))
    notes += _dynamics_notes(config, best_recipe)
    notes += disturbed_notes(tuner.trials)
    reference = tuner.judging.reference()
    notes += quality_notes(reference, tuner.settings.tolerances)
    if tuner.sharing is not None:  # a GPU study: how its arms shared the device, and why
        notes.append(tuner.sharing.note())
    result = TuneResult(
        workload=config.workload,
        objective=config.objective,
        device=config.device,
        run_dir=str(run_dir),
        baseline_recipe=dict(config.baseline_recipe),
        best_recipe=best_recipe,
        baseline_samples_per_s=baseline.samples_per_s,
        best_samples_per_s=best_sps,
        speedup=speedup,
        speedup_ci=ci,
        speedup_from=source,
        ladder=Ladder(rungs=tuner.rungs, rejected=tuner.rejected),
        pareto_front=pareto,
        n_trials=len(tuner.trials),
        n_failed=sum(1 for t in tuner.trials if not t.ok),
        n_reused=tuner.reused,
        budget_s=config.budget_s,
        elapsed_s=tuner.budget.elapsed_s(),
        budget_exhausted=outcome.budget_exhausted,
        notes=notes,
        quality_bands=quality_bands(reference, tuner.settings.tolerances),
        fit=fit,
        device_sharing=tuner.sharing,
    )
    result.write(run_dir / TUNE)
    atomic_write_text(run_dir / BEST_RECIPE_JSON, json.dumps(result.best_recipe, indent=2) + "\n")
    atomic_write_text(
        run_dir / BEST_RECIPE_PY,
        recipe_snippet(
            config.workload,
            result.best_recipe,
            config.baseline_recipe,
            command=_command_text(config) if config.is_script else None,
        ),
    )
    if config.is_script:
        # A torchrun job's arms report rank 0's record, not every rank's: its patch is left to
        # the recording run, as before.
        arms, torchrun = tuner.arms, is_torchrun(list(config.command or []), config.module)
        recorded = (
            arms.injection_of(result.best_recipe)
            if isinstance(arms, ScriptArms) and not torchrun
            else None
        )
        _write_script_changes(config, run_dir, result, recorded)
    return result


def _command_text(config: TuneConfig) -> str:
    """The script's command as the user typed it, its secrets masked (core/redact.py)."""
    argv = redact_argv(list(config.command or []))
    if is_torchrun(argv, config.module):
        return shlex.join(["torchrun", *argv[1:]])
    return shlex.join(["python", *(["-m"] if config.module else []), *argv])


def _write_script_changes(
    config: TuneConfig, run_dir: Path, result: TuneResult, recorded: dict[str, Any] | None
) -> None:
    """The best recipe as changes to the user's own files, beside best_recipe.json: a patch
    (`best_recipe.patch`, for `patch -p1` in the folder the command ran in) and snippets for
    what has no line to edit (`tune.cure`), from `recorded`, the injection record of an arm
    that ran the recipe (no further launch), else from a short recording run."""
    from torchdoctor.tune.cure import write_script_cure

    write_script_cure(
        list(config.command or []),
        module=config.module,
        cwd=Path(config.cwd or "."),
        recipe=dict(result.best_recipe),
        run_dir=run_dir,
        recorded=recorded,
    )


def _settings(recipe: dict[str, Any]) -> str:
    """A recipe as its notes show it: `knob=value` pairs, space-separated."""
    return " ".join(f"{k}={v}" for k, v in recipe.items())


def chained_note(confirm: Any, dropped: str | None) -> str:
    """Why the headline is the ladder's chained step ratios: the final A/B's reason, or why
    it was dropped after a keep (`Allowance.hold_reserve`)."""
    why = f": {confirm.reason}" if confirm is not None and confirm.reason else ""
    if confirm is None and dropped is not None:
        why = f": {dropped}"
    return f"speedup chained from the ladder's step ratios (no final A/B{why})"


def budget_note(cut: dict[str, Any] | None, cut_after_s: float) -> str:
    """What the budget left undone: a trial cut before its A/B decided, or untried candidates."""
    if not cut:
        return "the budget ran out before every candidate was tried"
    shown = _settings(cut)
    return (
        f"the budget ran out during the trial of {shown}: its A/B had not decided after "
        f"{cut_after_s:.0f} s, so it is neither kept nor rejected; re-run with a larger --budget "
        "to decide it"
    )


def inconclusive_note(
    recipe: dict[str, Any],
    speedup: float,
    ci: tuple[float, float],
    ladder_ci: tuple[float, float],
) -> str:
    """Why the ladder's best stands although the end-to-end A/B does not prove it faster."""
    shown = _settings(recipe)
    return (
        f"not confirmed end to end: fresh process pairs put the ladder's best ({shown}) at "
        f"{speedup:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}] of the baseline, an interval that holds both "
        f"no gain and the ladder's {ladder_ci[0]:.2f}-{ladder_ci[1]:.2f}x: processes of one "
        "recipe differ by more than the gain here. Each change was proven in its own paired "
        "A/B, so the recipe stands; re-run with a larger --budget for more pairs"
    )


def unconfirmed_note(recipe: dict[str, Any], speedup: float, ci: tuple[float, float]) -> str:
    """Why the ladder's best is not recommended: the end-to-end A/B did not prove it faster.

    Every rung cleared its own A/B, but those compare two long-lived worker processes, and a
    process can run several percent faster than another with the same recipe (memory
    placement, the core it lands on): a keep against a baseline worker that ran slow does not
    reproduce in the fresh process pairs of the final confirmation, whose interval then lies
    below the ladder's (`confirmation_verdict` "refuted").
    """
    shown = _settings(recipe)
    return (
        f"the final A/B did not confirm the ladder's best ({shown}) against the baseline: "
        f"{speedup:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}], an interval that includes no gain; the "
        "baseline recipe is recommended (re-run with a larger --budget or --min-gain to settle it)"
    )


def _dynamics_notes(config: TuneConfig, best_recipe: dict[str, Any]) -> list[str]:
    """What a kept batch change does to learning, which samples/s alone does not show."""
    before = int(config.baseline_recipe.get(BATCH_SIZE.name) or _default_batch(config))
    after = int(best_recipe.get(BATCH_SIZE.name) or before)
    accum = int(best_recipe.get(GRAD_ACCUM.name) or 1)
    base_accum = int(config.baseline_recipe.get(GRAD_ACCUM.name) or 1)
    if after * accum == before * base_accum:
        return []
    return [
        f"the effective batch changed from {before * base_accum} to {after * accum} samples "
        "per optimizer step, which changes the learning dynamics (the quality check compares "
        "loss per step); at the same learning rate the loss per sample seen can differ: "
        "scale the learning rate with the batch (Goyal et al. 2017) or tune with "
        "--hold-effective-batch to keep the dynamics"
    ]


def knob_space_config(specs: Sequence[KnobSpec]) -> list[KnobSpecModel]:
    """KnobSpecs as the JSON models a `TuneConfig.space` holds."""
    return [
        KnobSpecModel(name=s.name, values=list(s.values), safety=s.safety, default=s.default)
        for s in specs
    ]
