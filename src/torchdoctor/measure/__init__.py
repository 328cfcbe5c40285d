"""Stage: measure. The timing harness every number in torchdoctor goes through.

- `summarize(samples)` -> `Measurement`: median, IQR, percentiles, bootstrap CI, noise warnings.
- `compare_samples(baseline, candidate)` -> `RatioEstimate`: ratio of medians with a CI and a
  verdict (faster / slower / no_significant_difference).

Implementation lives in private modules; this package re-exports the public names.
"""

from torchdoctor.measure._measurement import Measurement, summarize
from torchdoctor.measure._ratio import RatioEstimate, compare_samples

__all__ = ["Measurement", "RatioEstimate", "compare_samples", "summarize"]
