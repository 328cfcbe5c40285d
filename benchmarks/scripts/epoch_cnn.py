"""The cnn workload with a short epoch: a data loader that restarts every few steps.

A loader with worker processes forks them again at every epoch and refills their prefetch
queue, one slow step per epoch; the built-in cnn's epoch is 64 steps (2048 images, batches of
32). This one is 8 steps, and a quarter as wide, so that a shared 2-core CPU host sees several
restarts in a trial of a few minutes.
Used by `benchmarks/bench_trial_cost.py` as `benchmarks/scripts/epoch_cnn.py:factory`.
"""

from __future__ import annotations

from torchdoctor.workloads.cnn import CnnWorkload

#: Images of one epoch: 8 batches of 32.
EPOCH_IMAGES = 256
#: Channels of the first stage (the built-in cnn's 16)
WIDTH = 4


def factory() -> CnnWorkload:
    return CnnWorkload(width=WIDTH, images=EPOCH_IMAGES)
