"""Run folders rendered in every form, for the golden test of the report (test_golden.py).

Each case builds a run folder (or a lone record) from the sample records, renders it as HTML,
Markdown and JSON, and the terminal renderers print the sample records; the texts are compared
with the files under tests/data/report_golden/. What differs from one machine or clock to the
next is fixed or replaced before the comparison: the manifest's command line, timestamps and
version are pinned, and the folder the cases are built in reads as <ROOT>.

    python tests/unit/report/golden_cases.py      # rewrite the golden files (after a change
                                                  # that is meant to change the output)
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).parent))
from report_samples import (
    EVIL_OP,
    analysis_record,
    diagnosis_record,
    env_json,
    make_plain_run,
    make_run,
    run_result_record,
    trials,
    tune_record,
)

from torchdoctor.core import rundir
from torchdoctor.core.env import Ceilings, EnvFingerprint
from torchdoctor.core.load import MachineLoad
from torchdoctor.core.shard_memory import ShardPlan
from torchdoctor.tune import Outcome
from torchdoctor.tune.records import Confirmation

GOLDEN_DIR = Path(__file__).parents[2] / "data" / "report_golden"
INPUTS = GOLDEN_DIR / "inputs"
FIXED_TIME = "2024-01-02T03:04:05+00:00"
FIXED_COMMAND = ["/usr/bin/torchdoctor", "demo", "cnn"]
FIXED_VERSION = "0.0.0+golden"
ROOT = "<ROOT>"
#: matplotlib's version when the goldens were written: its SVG is compared only under it.
MATPLOTLIB_FILE = "matplotlib-version.txt"
#: The goldens' file names end in .golden, so that no formatter takes them for its own
#: (`ruff format` rewrites the Python blocks of a .md file).
SUFFIX = ".golden"
_SVG = re.compile(r"<svg.*?</svg>", re.DOTALL)


@contextmanager
def pinned() -> Iterator[None]:
    """The manifest's command, clock and version pinned while a case is built."""
    with (
        mock.patch.object(rundir, "_now", lambda: FIXED_TIME),
        mock.patch.object(sys, "argv", FIXED_COMMAND),
    ):
        yield


def _pin_version(run_dir: Path) -> None:
    path = run_dir / rundir.MANIFEST
    data = json.loads(path.read_text())
    data["torchdoctor_version"] = FIXED_VERSION
    path.write_text(json.dumps(data, indent=2))


def _disturbed() -> MachineLoad:
    return MachineLoad(
        interval_s=10.0,
        cores=2,
        own_cpu_s=10.0,
        other_cpu_s=9.0,
        other_cores=0.9,
        disturbed=True,
        warning="other work kept 0.9 of 2 cores busy",
    )


def _demo(root: Path) -> Path:
    return make_run(root)


def _demo_snippet(root: Path) -> Path:
    run_dir = make_run(root)
    (run_dir / "best_recipe.py").write_text(
        "# Best recipe found by `torchdoctor tune cnn`.\nrecipe = Recipe.from_dict({})\n"
    )
    return run_dir


def _killed(root: Path) -> Path:
    return make_run(root, complete=False)


def _failed(root: Path) -> Path:
    run_dir = make_run(root, complete=False)
    rundir.finish_run_dir(run_dir, error=f"RuntimeError: out of memory in {EVIL_OP}")
    return run_dir


def _plain(root: Path) -> Path:
    return make_plain_run(root)


def _env_fallback(root: Path) -> Path:
    from torchdoctor.diagnose.evidence import CeilingEvidence

    run_dir = make_run(root)
    (run_dir / rundir.ENV).unlink()
    ceilings = CeilingEvidence(
        device="cpu",
        peak_flops={"float32": 9.0e10},
        mem_bandwidth_bytes_per_s=8.0e9,
        source="cached",
    )
    diagnosis_record().model_copy(update={"ceilings": ceilings}).write(run_dir / rundir.DIAGNOSIS)
    return run_dir


def _analyze_gpu(root: Path) -> Path:
    run_dir = rundir.new_run_dir("analyze", "alexnet.json.gz", out=root / "run")
    (run_dir / rundir.ANALYSIS).write_text((INPUTS / "analysis_gpu.json").read_text())
    rundir.finish_run_dir(run_dir)
    return run_dir


def _disturbed_run(root: Path) -> Path:
    run_dir = make_run(root)
    load = _disturbed()
    diagnosis = diagnosis_record().model_copy(update={"machine_load": load})
    diagnosis.write(run_dir / rundir.DIAGNOSIS)
    Confirmation(
        key="t005-confirm",
        step=3,
        baseline_recipe={"batch_size": 32},
        recipe={"batch_size": 32, "num_workers": 2, "compile": "default"},
        status="ok",
        outcome=Outcome.MEASURED,
        samples_per_s=331.0,
        baseline_samples_per_s=100.0,
        speedup=3.31,
        speedup_ci=(3.1, 3.5),
    ).write(run_dir / rundir.TRIALS / "t005-confirm.json")
    first = trials()[1].model_copy(update={"machine_load": load})
    first.write(run_dir / rundir.TRIALS / f"{first.key}.json")
    env = env_json()
    env["ceilings"]["machine_load"] = load.model_dump(mode="json")
    (run_dir / rundir.ENV).write_text(json.dumps(env, indent=2))
    run_result_record().model_copy(update={"machine_load": load}).write(run_dir / rundir.RUN_RESULT)
    return run_dir


def _shard_plan_record() -> ShardPlan:
    """A real `memory gpt --nproc 1,4 --max-memory 4MiB` estimate of a tiny gpt (2 layers,
    embd 16, 2 heads, block 8, 512 characters), as `estimate_shards` and the command wrote it."""
    return ShardPlan.from_json_dict(json.loads((INPUTS / "shard_plan.json").read_text()))


#: The command that wrote the stored estimate (its "how to reproduce").
SHARD_COMMAND = ["/usr/bin/torchdoctor", "memory", "gpt", "--param", "layers=2"]
SHARD_COMMAND += ["--param", "embd=16", "--param", "heads=2", "--param", "block=8"]
SHARD_COMMAND += ["--param", "characters=512", "--nproc", "1,4", "--max-memory", "4MiB"]


def _memory_shards(root: Path) -> Path:
    with mock.patch.object(sys, "argv", SHARD_COMMAND):
        run_dir = rundir.new_run_dir("memory", "gpt", out=root / "run")
    _shard_plan_record().write(run_dir / rundir.SHARD_PLAN)
    rundir.finish_run_dir(run_dir)
    return run_dir


#: Case name -> what builds its run folder under a root folder.
RUN_CASES: dict[str, Callable[[Path], Path]] = {
    "demo": _demo,
    "demo_snippet": _demo_snippet,
    "killed": _killed,
    "failed": _failed,
    "plain": _plain,
    "env_fallback": _env_fallback,
    "analyze_gpu": _analyze_gpu,
    "disturbed": _disturbed_run,
    "memory_shards": _memory_shards,
}
#: Lone record files (a record copied out of its run folder): case name -> path in the demo.
LONE_CASES: dict[str, str] = {
    "lone_tune": rundir.TUNE,
    "lone_diagnosis": rundir.DIAGNOSIS,
    "lone_trial": f"{rundir.TRIALS}/t004.json",
    "lone_analysis": rundir.ANALYSIS,
    "lone_profile": rundir.PROFILE,
}


def _normalised(text: str, root: Path) -> str:
    return text.replace(str(root.resolve()), ROOT).replace(str(root), ROOT)


def _bundle(text: str) -> str:
    data = json.loads(text)
    data["torchdoctor_version"] = FIXED_VERSION
    return json.dumps(data, indent=2) + "\n"


def render_forms(source: Path, root: Path) -> dict[str, str]:
    """The report of `source` as html, md and json, normalised."""
    from torchdoctor.report.api import render_text
    from torchdoctor.report.load import read_input

    found = read_input(source)
    return {
        "html": _normalised(render_text(found, "html"), root),
        "md": _normalised(render_text(found, "md"), root),
        "json": _normalised(_bundle(render_text(found, "json")), root),
    }


def build(case: str, root: Path) -> Path:
    """The run folder (or record file) of `case`, built under `root`."""
    with pinned():
        if case in RUN_CASES:
            run_dir = RUN_CASES[case](root)
            _pin_version(run_dir)
            return run_dir
        run_dir = make_run(root)
        _pin_version(run_dir)
        return run_dir / LONE_CASES[case]


def render_case(case: str, root: Path) -> dict[str, str]:
    return render_forms(build(case, root), root)


def without_charts(root: Path) -> str:
    """The demo's HTML page when matplotlib is not installed."""
    from torchdoctor.report.charts import _svg

    source = build("demo", root)
    with (
        mock.patch.object(_svg, "pyplot", lambda: None),
        mock.patch("torchdoctor.report.charts.pyplot", lambda: None),
    ):
        return render_forms(source, root)["html"]


def terminal_texts(root: Path) -> dict[str, str]:
    """What the commands print for the sample records (rich, no colour, 100 columns)."""
    from rich.console import Console

    from torchdoctor.analyze import TraceAnalysis
    from torchdoctor.report import render_records, render_run_folder

    def console() -> tuple[Console, StringIO]:
        out = StringIO()
        return Console(file=out, width=100, color_system=None, force_terminal=False), out

    # Each command prints its records by the section walk (report/terminal/sections.py).
    texts: dict[str, str] = {}
    with pinned():
        run_dir = make_run(root)
    c, out = console()
    render_records(c, {"tune": tune_record(run_dir)})
    texts["tune"] = out.getvalue()
    c, out = console()
    render_records(c, {"diagnosis": diagnosis_record()})
    render_run_folder(c, run_dir)
    texts["diagnosis"] = out.getvalue()
    c, out = console()
    # The terminal's phase table lists every phase (a run times them all).
    fractions = {"data_wait": 0.4, "h2d": 0.0, "forward": 0.2, "backward": 0.25}
    fractions |= {"optimizer": 0.1, "other": 0.05}
    run = run_result_record().model_copy(update={"phase_fractions": fractions})
    render_records(c, {"run_result": run})
    texts["run"] = out.getvalue()
    c, out = console()
    render_records(c, {"analysis": analysis_record()})
    gpu = TraceAnalysis.from_json_dict(json.loads((INPUTS / "analysis_gpu.json").read_text()))
    render_records(c, {"analysis": gpu})
    texts["analysis"] = out.getvalue()
    c, out = console()
    env = env_json()
    fingerprint = EnvFingerprint.from_json_dict(env["fingerprint"])
    ceilings = Ceilings.from_json_dict(env["ceilings"])
    render_records(c, {"env": {"fingerprint": fingerprint, "ceilings": ceilings}})
    texts["env"] = out.getvalue()
    c, out = console()
    render_records(c, {"shard_plan": _shard_plan_record()})
    texts["shard_plan"] = out.getvalue()
    return {k: _normalised(v, root) for k, v in texts.items()}


def strip_svg(html: str) -> str:
    """The page with each chart's SVG body replaced (for a matplotlib other than the goldens')."""
    return _SVG.sub("<svg/>", html)


def matplotlib_version() -> str | None:
    try:
        import matplotlib
    except ImportError:
        return None
    return str(matplotlib.__version__)


def all_texts(tmp: Path) -> dict[str, str]:
    """Golden file name -> its text, for every case."""
    texts: dict[str, str] = {}
    for i, case in enumerate([*RUN_CASES, *LONE_CASES]):
        root = tmp / f"c{i}"
        for fmt, text in render_case(case, root).items():
            texts[f"{case}.{fmt}"] = text
    texts["demo_no_charts.html"] = without_charts(tmp / "nocharts")
    for name, text in terminal_texts(tmp / "terminal").items():
        texts[f"terminal_{name}.txt"] = text
    return texts


def write_goldens() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        texts = all_texts(Path(tmp))
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (GOLDEN_DIR / f"{name}{SUFFIX}").write_text(text, encoding="utf-8")
    (GOLDEN_DIR / MATPLOTLIB_FILE).write_text(f"{matplotlib_version()}\n")
    print(f"wrote {len(texts)} golden files to {GOLDEN_DIR}")


if __name__ == "__main__":
    write_goldens()
