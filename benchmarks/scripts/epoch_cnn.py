"""The cnn workload with a short epoch: a data loader that restarts every few steps.

A loader with worker processes forks them again at every epoch and refills their prefetch
queue, one slow step per epoch; the built-in cnn's epoch is 64 steps (2048 images, batches of
32). This one is 16 steps, and narrower, so that a CPU host sees several restarts in a trial.
Used by `benchmarks/bench_trial_cost.py` as `benchmarks/scripts/epoch_cnn.py:factory`.
"""

from __future__ import annotations

from torchdoctor.workloads.cnn import CnnWorkload

#: Images of one epoch: 16 batches of 32.
EPOCH_IMAGES = 512


def factory() -> CnnWorkload:
    return CnnWorkload(width=8, images=EPOCH_IMAGES)
