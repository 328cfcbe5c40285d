"""A tune's report leads with its result in every form, with one number format."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

from markupsafe import escape
from report_samples import TUNE_NOTES, tune_record
from rich.console import Console

from torchdoctor.report import format as fmt
from torchdoctor.report.api import render_text
from torchdoctor.report.load import read_input
from torchdoctor.report.markdown import md
from torchdoctor.report.terminal.tune import render_result

#: The headline as the sample tune states it: speedup, interval and the study's level.
HEADLINE = "3.30x 95% CI [3.00, 3.50]"


def _terminal(run_dir: Path) -> str:
    out = StringIO()
    render_result(tune_record(run_dir), Console(file=out, width=200, color_system=None))
    return out.getvalue()


def _forms(run_dir: Path) -> dict[str, str]:
    found = read_input(run_dir)
    return {
        "terminal": _terminal(run_dir),
        "md": render_text(found, "md"),
        "html": render_text(found, "html"),
    }


def test_every_note_of_tune_json_is_in_every_form(run_dir: Path) -> None:
    forms = _forms(run_dir)
    for note in TUNE_NOTES:
        assert note in forms["terminal"], note
        assert md(note) in forms["md"], note
        assert str(escape(note)) in forms["html"], note


def test_the_first_table_holds_the_result_in_every_form(run_dir: Path) -> None:
    forms = _forms(run_dir)
    first_md = next(b for b in forms["md"].split("\n\n") if b.startswith("|"))
    assert md(HEADLINE) in first_md and "num\\_workers=2; compile=default" in first_md
    first_html = re.search(r"<table.*?</table>", forms["html"], re.DOTALL)
    assert first_html is not None and HEADLINE in first_html.group(0)
    # The terminal says the result before its first table (the ladder).
    head = forms["terminal"].split("Ladder:")[0]
    assert "3.30x faster" in head and "95% CI [3.00, 3.50]" in head
    # Both speedups are explained where they stand.
    said = "the ladder's last row is the product of its rungs"
    assert said in forms["md"] and said in forms["terminal"]
    assert str(escape(said)) in forms["html"]


def test_the_result_names_the_check_that_measures_the_claim_again(run_dir: Path) -> None:
    text = render_text(read_input(run_dir), "md")
    assert f"torchdoctor run --recipe {run_dir} --vs-baseline --" in text
    assert text.index("## Result") < text.index("## Tuning ladder") < text.index("## Findings")
    assert text.index("## Findings") < text.index("## Environment and measured ceilings")


def test_an_unfinished_tune_says_how_to_resume(killed_run_dir: Path) -> None:
    found = read_input(killed_run_dir)
    hint = f"torchdoctor tune --resume {killed_run_dir}"
    assert hint in render_text(found, "md")
    assert hint in render_text(found, "html")


def test_a_complete_run_has_no_resume_hint(run_dir: Path) -> None:
    assert "--resume" not in render_text(read_input(run_dir), "md")


def test_numbers_have_one_format() -> None:
    assert fmt.signed_percent(-0.08932) == "-8.9%" and fmt.signed_percent(0.004) == "+0.4%"
    assert fmt.interval(1.38, 1.67, 0.95) == "95% CI [1.38, 1.67]"
    assert fmt.interval(1.38, 1.67) == "[1.38, 1.67]"
    assert fmt.level(0.975) == "97.5%" and fmt.level(0.997) == "99.7%"
    assert fmt.evidence_value("compute_share", 0.7861) == "78.6%"
    assert fmt.evidence_value("loss_deviation", -0.08932) == "-8.9%"
    assert fmt.evidence_value("num_workers", 0) == "0"


def test_trial_ids_read_as_labels_never_json() -> None:
    key = 'ladder:{"channels_last": true}->{"channels_last": true, "precision": "bf16"}'
    assert fmt.trial_label(key) == "ladder: precision=bf16 on channels_last=true"
    assert fmt.trial_label('ladder:{}->{"c": true}') == "ladder: c=true on baseline"
    assert fmt.trial_label("baseline:{}") == "baseline"
    confirm = 'confirm-pairs:{}->{"a": true, "c": true}'
    assert fmt.trial_label(confirm) == "final A/B: a=true, c=true vs baseline"
    assert fmt.trial_label("t003") == "t003"
    assert fmt.trial_label("ladder:{not json") == "ladder:{not json"


def test_the_final_ab_row_is_labelled_as_what_it_is(run_dir: Path) -> None:
    from torchdoctor.report.adapters.tune import confirmation_view

    view = confirmation_view(
        {
            "schema": "torchdoctor/tune_confirmation",
            "key": "confirm-pairs:{}->{}",
            "step": 3,
            "status": "ok",
            "samples_per_s": 289.8,
            "baseline_samples_per_s": 190.7,
            "speedup": 1.52,
        }
    )
    assert view.change.startswith("final A/B") and view.change != "baseline"
    assert view.throughput == "190.7 \u2192 289.8 samples/s"


def test_a_figure_shows_its_unit_and_drops_it_from_its_label() -> None:
    assert fmt.evidence_value("mean_us", 2.1e5) == "210.00 ms"
    assert fmt.evidence_label("mean_us") == "mean"
    assert fmt.evidence_value("tiny_kernels_pct", 17.72) == "17.7%"
    assert fmt.evidence_value("peak_memory_bytes", 2**30) == "1.0 GiB"
    assert fmt.evidence_label("peak_memory_bytes") == "peak memory"
    assert fmt.evidence_value("achieved_bytes_per_s", 1e10) == "10 GB/s"


def test_a_roofline_class_share_says_it_is_of_op_time_in_the_roofline_words() -> None:
    from typing import get_args

    from torchdoctor.diagnose.evidence import Evidence, OpBound, StepEvidence, TraceEvidence
    from torchdoctor.diagnose.regime import classify_regime

    # every class the diagnosis records has its roofline words
    assert set(get_args(OpBound)) == set(fmt.ROOFLINE_CLASSES)
    shares = {"compute": 0.25, "memory": 0.6, "overhead": 0.15}
    phases = {"data_wait": 0.1, "forward": 0.5, "backward": 0.4}
    ev = Evidence(
        source="trace",
        steps=StepEvidence(count=3, measured=3, phase_fractions=phases),
        trace=TraceEvidence(has_device=False, time_by_bound=shares),
    )
    _, evidence = classify_regime(ev)
    rows = {fmt.evidence_label(k): fmt.evidence_value(k, v) for k, v in evidence.items()}
    assert rows["op time bound by memory bandwidth (bytes/s roof)"] == "60.0%"
    assert rows["op time bound by compute (FLOP/s roof)"] == "25.0%"
    assert rows["op time bound by call overhead"] == "15.0%"
    assert rows["outside the model (data wait, copies, other) of step time"] == "10.0%"
    # the rules' own keys read the same way; the model's compute share names its whole
    assert fmt.evidence_label("compute_bound_op_share") == "op time bound by compute (FLOP/s roof)"
    assert fmt.evidence_label("compute_share") == "model compute (forward + backward) of step time"
    assert fmt.evidence_label("bogus_bound_op_share") == "bogus bound op share"
    # the op table's cell: the roof that bounds the op
    assert fmt.roofline_class("memory") == "memory bandwidth"
    assert fmt.roofline_class("overhead") == "call overhead"
    assert fmt.roofline_class(None) == fmt.NA


def test_a_fit_leads_with_its_peak_against_the_cap(tmp_path: Path) -> None:
    from torchdoctor.report.adapters.result import result_section

    tune = tune_record(tmp_path).to_json_dict()
    tune["fit"] = {"max_memory_bytes": 2**30, "peak_memory_bytes": 2**29, "fits": True}
    view = result_section(tune, None, "RUN")
    assert "peaks at 512.0 MiB, under the cap" in view.sentence
    assert view.recheck == [] and view.notes == list(TUNE_NOTES)


def test_a_tune_stopped_before_its_settings_were_written_has_no_resume_hint(
    killed_run_dir: Path,
) -> None:
    (killed_run_dir / "tune_config.json").unlink()
    assert "--resume" not in render_text(read_input(killed_run_dir), "md")


def test_an_interrupted_tune_says_so_and_how_to_resume(killed_run_dir: Path) -> None:
    from torchdoctor.core import rundir

    rundir.finish_run_dir(killed_run_dir, error="KeyboardInterrupt", interrupted=True)
    found = read_input(killed_run_dir)
    text, page = render_text(found, "md"), render_text(found, "html")
    assert "Interrupted: KeyboardInterrupt" in text and "failed" not in text.split("##")[0]
    assert "The run was interrupted: KeyboardInterrupt" in page
    hint = f"torchdoctor tune --resume {killed_run_dir}"
    assert hint in text and hint in page


def _retold(run_dir: Path, **update: object) -> dict[str, str]:
    """The sample tune's forms with `update` applied to its tune.json."""
    record = tune_record(run_dir).model_copy(update=update)
    record.write(run_dir / "tune.json")
    out = StringIO()
    render_result(record, Console(file=out, width=200, color_system=None))
    return {**_forms(run_dir), "terminal": out.getvalue()}


CHAINED_NOTE = (
    "speedup chained from the ladder's step ratios (no final A/B: the budget left time for 2 "
    "fresh process pairs; an interval needs 3)"
)


def test_a_headline_chained_from_the_ladder_is_not_called_the_final_ab(run_dir: Path) -> None:
    forms = _retold(run_dir, speedup_from="ladder", notes=[CHAINED_NOTE])
    for form in ("terminal", "md"):
        text = forms[form]
        assert "chained from the ladder's rungs (no final A/B)" in text, form
        assert "from the final A/B in fresh process pairs" not in text, form
        assert "the budget left no room for the final A/B" in text, form
    assert "speedup (ladder's rungs chained, no final A/B)" in forms["md"]


def test_an_older_record_says_where_its_headline_came_from_in_its_figures(run_dir: Path) -> None:
    # Written before tune.json kept speedup_from. The sample's headline is its ladder's last
    # row to the digit, interval and all: the ladder's figure.
    forms = _retold(run_dir, speedup_from=None, notes=[CHAINED_NOTE])
    assert "chained from the ladder's rungs (no final A/B)" in forms["md"]
    # A headline of its own is the final A/B's.
    forms = _retold(run_dir, speedup_from=None, speedup=3.1, speedup_ci=(2.9, 3.3))
    assert (
        "3.10x faster" in forms["md"] and "from the final A/B in fresh process pairs" in forms["md"]
    )
    # A kept ladder whose best recipe is the baseline's was refuted by the final A/B.
    forms = _retold(run_dir, speedup_from=None, best_recipe={"batch_size": 32}, speedup=1.0)
    assert "did not confirm a gain over the baseline" in forms["md"]


def test_a_ladder_the_final_ab_refuted_recommends_the_baseline_in_words(run_dir: Path) -> None:
    forms = _retold(
        run_dir,
        speedup_from="none",
        best_recipe={"batch_size": 32},
        speedup=1.0,
        speedup_ci=(1.0, 1.0),
        best_samples_per_s=100.0,
    )
    for form in ("terminal", "md"):
        text = forms[form]
        assert "did not confirm a gain over the baseline" in text, form
        assert "made it" not in text.split("Ladder")[0], form
