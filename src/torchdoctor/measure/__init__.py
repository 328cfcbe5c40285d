"""Stage: measure. The timing harness every number in torchdoctor goes through.

- `Timer(stmt, setup).blocked_autorange()` / `.adaptive_autorange()` -> `Measurement`.
- `summarize(samples)` -> `Measurement`: median, IQR, percentiles, bootstrap CI, noise warnings.
- `compare_samples(baseline, candidate)` -> `RatioEstimate`: ratio of medians with a CI and a
  verdict (faster / slower / no_significant_difference).
- `compare({name: stmt}, baseline=...)` -> `Comparison`: interleaved rounds, one estimate per
  candidate.
- `SequentialTest(threshold).look(a, b)` -> `Look`: the sequential interleaved paired A/B
  (is B faster than A?) at one look: `paired_speedup`, Bonferroni-adjusted looks, and the
  verdict faster / futile / undecided (`speed_verdict`).
- `shift_estimate(a, b)` -> `Shift`: how much a quantity moved between two runs' independent
  samples (Hodges-Lehmann shift, its Mann-Whitney interval).
- `replicated_speedup(a, b)`: the speedup a new process sees, from replicated pairs of fresh
  processes (Student's t interval of the mean log ratio).
- `synchronize(device)`: wait for queued device work.
- `settled(times)`: the warm-up rule (the last few timings agree within 10%); `warm_up`,
  `steady_rate`: a training job's warm-up and steady-state throughput by that rule, shared by
  `torchdoctor run` and the tuner.
- `make_block_timer(device)` -> `BlockTimer`: how one block is timed (CUDA events on a CUDA or
  ROCm device, synchronize + host clock elsewhere); injectable into `Timer`.
- `watch_load(probe)`: the other load on the machine while a block runs (`LoadProbe`; the
  default probe is `load.default_load_probe()`, which tests replace);
  `get_ceilings(device)`: the machine's measured ceilings, cached per fingerprint.

Implementation lives in private modules; this package re-exports the public names.
"""

from torchdoctor.measure._compare import Comparison, compare
from torchdoctor.measure._device_timer import BlockTimer, make_block_timer
from torchdoctor.measure._measurement import Measurement, summarize
from torchdoctor.measure._ratio import (
    DEFAULT_MIN_EFFECT,
    RatioEstimate,
    Verdict,
    compare_samples,
    ratio_verdict,
)
from torchdoctor.measure._replicates import (
    DEFAULT_REPLICATES,
    MIN_REPLICATES,
    replicated_speedup,
    replicates_agree,
)
from torchdoctor.measure._sequential import (
    LAST_LOOK_SHARE,
    Look,
    PairedSpeedup,
    SequentialTest,
    SpeedVerdict,
    look_confidence,
    paired_speedup,
    sequential_looks,
    speed_verdict,
)
from torchdoctor.measure._shift import MIN_SHIFT_SAMPLES, Shift, shift_estimate
from torchdoctor.measure._steady import (
    DEFAULT_STEADY_STEPS,
    MAX_CHUNK_STEPS,
    MAX_EXTRA_WARMUP_STEPS,
    MAX_STEADY_STEPS,
    MIN_CHUNK_S,
    MIN_STEADY_S,
    MIN_WARMUP_STEPS,
    chunk_rates,
    chunk_steps,
    steady_rate,
    steady_steps,
    warm_up,
    warmup_length,
)
from torchdoctor.measure._sync import make_sync, synchronize
from torchdoctor.measure._timer import SETTLE_WINDOW, Clock, Timer, settled
from torchdoctor.measure.ceilings import get_ceilings
from torchdoctor.measure.load import LoadProbe, watch_load

__all__ = [
    "DEFAULT_MIN_EFFECT",
    "DEFAULT_REPLICATES",
    "DEFAULT_STEADY_STEPS",
    "LAST_LOOK_SHARE",
    "MAX_CHUNK_STEPS",
    "MAX_EXTRA_WARMUP_STEPS",
    "MAX_STEADY_STEPS",
    "MIN_CHUNK_S",
    "MIN_REPLICATES",
    "MIN_SHIFT_SAMPLES",
    "MIN_STEADY_S",
    "MIN_WARMUP_STEPS",
    "SETTLE_WINDOW",
    "BlockTimer",
    "Clock",
    "Comparison",
    "LoadProbe",
    "Look",
    "Measurement",
    "PairedSpeedup",
    "RatioEstimate",
    "SequentialTest",
    "Shift",
    "SpeedVerdict",
    "Timer",
    "Verdict",
    "chunk_rates",
    "chunk_steps",
    "compare",
    "compare_samples",
    "get_ceilings",
    "look_confidence",
    "make_block_timer",
    "make_sync",
    "paired_speedup",
    "ratio_verdict",
    "replicated_speedup",
    "replicates_agree",
    "sequential_looks",
    "settled",
    "shift_estimate",
    "speed_verdict",
    "steady_rate",
    "steady_steps",
    "summarize",
    "synchronize",
    "warm_up",
    "warmup_length",
    "watch_load",
]
