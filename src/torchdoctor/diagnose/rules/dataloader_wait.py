"""dataloader_wait: the training loop waits for the next batch."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import data_wait_share, knob_default_workers
from torchdoctor.diagnose.rules.host_python_lines import line_evidence
from torchdoctor.knobs import NUM_WORKERS, PERSISTENT_WORKERS, PIN_MEMORY, PREFETCH_FACTOR

RULE_ID: Final = "dataloader_wait"
TITLE: Final = "The training loop waits for data"

#: Data-wait share from which the rule fires. The TensorBoard profiler plugin calls a step
#: "moderately input-bound" from 5% of step time spent waiting for input
#: (tensorboard_plugin_profile, input_pipeline_analyzer).
MIN_SHARE: Final = 0.05


def check(ev: Evidence) -> Finding | None:
    share = data_wait_share(ev)
    if share is None or share < MIN_SHARE:
        return None
    knobs: dict[str, int | bool | str | None] = {}
    dl = ev.dataloader
    cores = ev.threads.usable_cores if ev.threads else None
    steps: list[str] = []
    if dl is not None and dl.uses_dataloader:
        if not dl.num_workers:
            knobs[NUM_WORKERS.name] = knob_default_workers(cores)
            steps.append("load batches in worker processes: DataLoader(..., num_workers=N)")
        else:
            if not dl.persistent_workers:
                knobs[PERSISTENT_WORKERS.name] = True
            knobs[PREFETCH_FACTOR.name] = max(4, (dl.prefetch_factor or 2) * 2)
            knobs[NUM_WORKERS.name] = (
                dl.num_workers + 1
                if cores is None
                else min(dl.num_workers * 2, max(dl.num_workers + 1, cores))
            )
            steps.append("add workers / prefetch deeper, and make __getitem__ cheaper")
        if ev.is_gpu and not dl.pin_memory:
            knobs[PIN_MEMORY.name] = True
    else:
        steps.append("move per-batch preparation (decode, augmentation) out of the loop")
    evidence: dict[str, EvidenceValue] = {
        "data_wait_share": round(share, 4),
        "num_workers": dl.num_workers if dl else None,
        "uses_dataloader": dl.uses_dataloader if dl else None,
    }
    # Where the wait is spent in the script's own code (its Dataset's __getitem__, a
    # collate_fn, a get_batch), when the line sampler saw it.
    lines = ev.host_lines
    top = lines.top("data_wait") if lines is not None and lines.enough else None
    if top is not None:
        evidence.update(line_evidence(top, top.share * top.phases.get("data_wait", 0.0)))
        steps.append(f"the wait is spent at {top.site} in {top.function}")
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"{share:.0%} of each step is spent waiting for the next batch.",
        bottleneck="data_loading",
        share=share,
        evidence=evidence,
        prescription=Prescription(
            knobs=knobs, code_change="; ".join(steps), site=top.site if top else None
        ),
        # Data wait is measured directly around the iterator's __next__: high confidence.
        confidence=0.9 if ev.steps is not None else 0.6,
    )
