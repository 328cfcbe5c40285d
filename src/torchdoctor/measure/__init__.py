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
- `process_spread(log_ratios)` -> `ProcessSpread`; `second_pair_needed(ci_low, spread)`: how
  much processes of one recipe differ, and whether a win needs a second pair of them.
- `synchronize(device)`: wait for queued device work.
- `settled(times)`: the warm-up rule (the last few timings agree within 10%); `warm_up`,
  `steady_rate`: a training job's warm-up and steady-state throughput by that rule, shared by
  `torchdoctor run` and the tuner.
- `min_chunk_s(timer)`, `calibrate_chunks(times, ...)` -> `ChunkCalibration`: a chunk's floor
  per timer kind (host clock 0.3 s, CUDA events 50 ms) and its length from steady steps, a
  whole number of stall periods (`stall_period`: an epoch restart every P steps).
- `make_block_timer(device)` -> `BlockTimer`: how one block is timed (CUDA events on a CUDA or
  ROCm device, synchronize + host clock elsewhere); injectable into `Timer`.
- `watch_load(probe)`: the other load on the machine while a block runs (`LoadProbe`; the
  default probe is `load.default_load_probe()`, which tests replace);
  `get_ceilings(device)`: the machine's measured ceilings, cached per fingerprint.

Implementation lives in private modules; this package re-exports the public names.
"""

from torchdoctor.measure._chunks import (
    CUDA_EVENT_MIN_CHUNK_S,
    MAX_CHUNK_STEPS,
    ChunkCalibration,
    TimerKind,
    calibrate_chunks,
    calibration_steps,
    min_chunk_s,
    more_calibration_steps,
    stall_period,
)
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
from torchdoctor.measure._spread import (
    ProcessSpread,
    process_margin,
    process_spread,
    second_pair_needed,
)
from torchdoctor.measure._steady import (
    DEFAULT_STEADY_STEPS,
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
    "CUDA_EVENT_MIN_CHUNK_S",
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
    "ChunkCalibration",
    "Clock",
    "Comparison",
    "LoadProbe",
    "Look",
    "Measurement",
    "PairedSpeedup",
    "ProcessSpread",
    "RatioEstimate",
    "SequentialTest",
    "Shift",
    "SpeedVerdict",
    "Timer",
    "TimerKind",
    "Verdict",
    "calibrate_chunks",
    "calibration_steps",
    "chunk_rates",
    "chunk_steps",
    "compare",
    "compare_samples",
    "get_ceilings",
    "look_confidence",
    "make_block_timer",
    "make_sync",
    "min_chunk_s",
    "more_calibration_steps",
    "paired_speedup",
    "process_margin",
    "process_spread",
    "ratio_verdict",
    "replicated_speedup",
    "replicates_agree",
    "second_pair_needed",
    "sequential_looks",
    "settled",
    "shift_estimate",
    "speed_verdict",
    "stall_period",
    "steady_rate",
    "steady_steps",
    "summarize",
    "synchronize",
    "warm_up",
    "warmup_length",
    "watch_load",
]
