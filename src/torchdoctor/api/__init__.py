"""The Python API: a function for each command, `torchdoctor.<command>(...)`.

Each does what its command does, with its command's defaults (core/defaults.py), and returns
the record the command prints (`--json`):

    import torchdoctor

    d = torchdoctor.diagnose(["python", "train.py", "--epochs", "1"])   # a Diagnosis
    d.primary_bottleneck, [f.title for f in d.findings]
    t = torchdoctor.tune("cnn", budget_s=300, recipe={"threads": 2})      # a TuneResult
    t.best_recipe, t.speedup, t.speedup_ci
    r = torchdoctor.run("cnn", recipe=t.best_recipe)                     # a RunResult
    r.samples_per_s
    p = torchdoctor.run(["python", "train.py"], recipe="runs/tune")         # a ScriptRun
    c = torchdoctor.recheck(["python", "train.py"], recipe="runs/tune")     # a Confirmation
    c.speedup, c.speedup_ci
    s = torchdoctor.scale("mlp", nproc=[1, 2])                            # a ScalingStudy
    v = torchdoctor.serve("mlp", sla="p99<=5ms")                          # a ServeResult

The commands are thin shells over these functions: each parses its options, calls the
function (or the part of it the command shares, where it adds a live view or renders from the
run folder: `examine`, `run_script_into`, `recheck_into`, `time_statements`, `memory_into`,
`scale_into`, `serve_into`, `tune_into`, the tune stage's `demo_config`) and renders; `tune`
takes the command's live view as a `TuneProgress`. `torchdoctor.recheck`
is `run --recipe R --vs-baseline`'s function, as `shard_memory` is `memory --nproc`'s. What
the API works around it says with a `TorchDoctorWarning`, which the commands print as a
`warning:` line.

A knob mapping is `recipe=` in every function (`--set knob=value`); `run` and `recheck` take
the path of a recipe file or a tune run folder there too (`--recipe`); a keyword that names an
option otherwise is in `CLI_FLAGS`. Each writes the run folder its command writes (`out=`,
else a new one under torchdoctor-runs/) and raises the command's errors (`TorchDoctorError`
subclasses) instead of exiting. In a notebook, `diagnose`, `tune` and `run` show their
progress (api/progress.py). The stages behind them are imported on the first call, so
`import torchdoctor` stays light. `torchdoctor.diagnose`, `tune`, `analyze`, `report`,
`workloads`, `scale` and `serve` are these functions; the stage packages of those names are
reached by their full names (`from torchdoctor.tune import TuneResult`).
"""

import torchdoctor
from torchdoctor.api.command_line import (
    CLI_FLAGS,
    CLI_NEGATED_FLAGS,
    TORCHRUN_MODULE,
    RecipeSource,
    Target,
    TorchDoctorWarning,
    _command,
    load_recipe_file,
    parse_command,
    read_recipe,
    recipe_folder,
    workload_options,
)
from torchdoctor.api.script_run import run_script_into, script_error
from torchdoctor.api.studies import (
    MIN_SERVE_BUDGET_S,
    demo,
    scale,
    scale_into,
    scale_script,
    serve,
    serve_into,
    serve_options,
)
from torchdoctor.api.tools import (
    Environment,
    ProfileRun,
    analyze,
    bench,
    check_edge_usage,
    diff,
    env,
    memory,
    memory_into,
    profile,
    report,
    shard_memory,
    shard_memory_into,
    shard_workload,
    time_statements,
    workloads,
    write_analysis,
    write_diff,
)
from torchdoctor.api.training import diagnose, examine, run
from torchdoctor.api.tuning import (
    TuneProgress,
    check_objective,
    check_study_out,
    check_target,
    diagnosed_run_dir,
    open_storage,
    tune,
    tune_config,
    tune_into,
)
from torchdoctor.api.vs_baseline import (
    RECHECK_LOGS,
    RecheckPlan,
    plan_recheck,
    recheck,
    recheck_into,
)

__all__ = [
    "CLI_FLAGS",
    "CLI_NEGATED_FLAGS",
    "COMMANDS",
    "MIN_SERVE_BUDGET_S",
    "RECHECK_LOGS",
    "TORCHRUN_MODULE",
    "Environment",
    "ProfileRun",
    "RecheckPlan",
    "RecipeSource",
    "Target",
    "TorchDoctorWarning",
    "TuneProgress",
    "_command",
    "analyze",
    "bench",
    "check_edge_usage",
    "check_objective",
    "check_study_out",
    "check_target",
    "demo",
    "diagnose",
    "diagnosed_run_dir",
    "diff",
    "env",
    "examine",
    "load_recipe_file",
    "memory",
    "memory_into",
    "open_storage",
    "parse_command",
    "plan_recheck",
    "profile",
    "read_recipe",
    "recheck",
    "recheck_into",
    "recipe_folder",
    "report",
    "run",
    "run_script_into",
    "scale",
    "scale_into",
    "scale_script",
    "script_error",
    "serve",
    "serve_into",
    "serve_options",
    "shard_memory",
    "shard_memory_into",
    "shard_workload",
    "time_statements",
    "tune",
    "tune_config",
    "tune_into",
    "workload_options",
    "workloads",
    "write_analysis",
    "write_diff",
]

#: The functions of the commands, each `torchdoctor.<name>`: the package's API names
#: (torchdoctor/__init__.py) but `shard_memory`, which is `memory --nproc`'s, and `recheck`,
#: which is `run --vs-baseline`'s.
COMMANDS = tuple(name for name in __all__ if name in torchdoctor._API - {"shard_memory", "recheck"})
