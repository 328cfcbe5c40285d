"""Memory to its owners in a script's step (collect/probes/step_memory.py): the instrumentation in
this process around a plain training loop, as the launcher installs it in a script's."""

from __future__ import annotations

import torch
from torch import nn

from torchdoctor.analyze import owners_plan, split_owners
from torchdoctor.collect.hooks import CollectConfig, Instrumentation
from torchdoctor.collect.probes.step_memory import NO_OPTIMIZER, MemoryProbe
from torchdoctor.collect.step_recorder import StepRecorder
from torchdoctor.report.adapters.memory import memory_blocks

BATCH = 64


def _train(config: CollectConfig) -> Instrumentation:
    torch.manual_seed(0)
    # BatchNorm: buffers beside the parameters; Adam: two moments per parameter.
    model = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.BatchNorm1d(256), nn.Linear(256, 4))
    opt = torch.optim.Adam(model.parameters())
    x, y = torch.randn(BATCH, 32), torch.randint(0, 4, (BATCH,))
    with Instrumentation(config) as inst:
        for _ in range(6):
            opt.zero_grad()  # at the top of the loop: last step's gradients live until here
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    return inst


def _config() -> CollectConfig:
    return CollectConfig(warmup=3, profile_steps=0, memory_owners=True, sample_lines=False)


def test_a_scripts_last_warm_up_step_is_split_into_its_owners() -> None:
    profile = _train(_config()).result()
    step = profile.memory
    assert step is not None, profile.memory_skipped
    weights = (32 * 256 + 256 + 2 * 256 + 256 * 4 + 4) * 4
    buffers = (2 * 256) * 4 + 8  # BatchNorm's running mean and variance, its batch count
    assert step.parameters_bytes == weights + buffers
    assert step.gradients_bytes == weights
    assert step.optimizer_state_bytes >= 2 * weights  # Adam's two moments (and step counts)
    assert step.batch_size == BATCH  # the outermost forward's first input (no DataLoader)
    assert step.activations_bytes > 0
    owners = split_owners(step)
    total = (
        owners.parameters_bytes
        + owners.gradients_at_peak_bytes
        + owners.optimizer_state_bytes
        + owners.activations_at_peak_bytes
        + owners.temporaries_bytes
    )
    assert total == owners.peak_bytes
    # zero_grad freed last step's gradients before the forward: at the peak (the end of the
    # forward or in backward) only the gradients made so far count, never all of them twice.
    assert owners.gradients_at_peak_bytes <= weights
    # The one-step plan renders as the report's memory section, without a fit.
    plan = owners_plan("train.py", step)
    assert plan.peak_fit is None and plan.envelope == []
    blocks = memory_blocks(plan.to_json_dict())
    facts = {f.label: f.value for f in blocks.facts}
    assert facts["fit against the batch"].startswith("none: one step measured")
    assert blocks.tables[0].rows[0][0] == str(BATCH)


def test_without_a_torch_optim_optimizer_nothing_is_measured_and_it_says_why() -> None:
    # The boundary before the last warm-up step, with no optimizer stepped so far.
    recorder = StepRecorder()
    probe = MemoryProbe(recorder, warmup=3)
    recorder.closed_count = 2
    probe.on_step_end()
    assert probe.step_memory is None and probe.skipped == NO_OPTIMIZER


def test_off_by_default() -> None:
    config = CollectConfig(warmup=3, profile_steps=0, sample_lines=False)
    profile = _train(config).result()
    assert profile.memory is None and profile.memory_skipped is None
