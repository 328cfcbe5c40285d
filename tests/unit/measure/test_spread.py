"""How much processes of one recipe differ, and whether a win needs a second pair for it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from torchdoctor.measure import process_margin, process_spread, second_pair_needed

CONFIDENCE = 0.90


def test_the_spread_is_the_sd_of_a_log_rate_from_pairs_of_processes() -> None:
    # Processes whose log rate has sd 0.05: a pair's log ratio has sd 0.05 * sqrt(2).
    rng = np.random.default_rng(0)
    ratios = [float(d) for d in rng.normal(0.0, 0.05 * math.sqrt(2), 400)]
    spread = process_spread(ratios)
    assert spread is not None and spread.pairs == 400
    assert spread.sd == pytest.approx(0.05, rel=0.1)
    # The upper bound holds the truth and is wide with few pairs.
    assert spread.upper(CONFIDENCE) >= 0.05
    one = process_spread(ratios[:1])
    assert one is not None and one.upper(CONFIDENCE) > 5 * one.sd
    assert process_spread([]) is None


def test_without_a_measured_spread_every_win_gets_its_second_pair() -> None:
    assert second_pair_needed(3.0, None, confidence=CONFIDENCE)


def test_a_win_far_beyond_what_processes_differ_by_needs_no_second_pair() -> None:
    # Four pairs of processes within about 1% of each other (an H200's steady processes):
    # a win whose interval starts at 1.30 could not come from the processes.
    steady = process_spread([0.01, -0.012, 0.008, -0.006])
    assert steady is not None
    assert process_margin(1.30, steady, confidence=CONFIDENCE) > 3
    assert not second_pair_needed(1.30, steady, confidence=CONFIDENCE)
    # A win of a few percent is within their reach: it gets its second pair.
    assert second_pair_needed(1.02, steady, confidence=CONFIDENCE)


def test_processes_that_differ_by_as_much_as_the_win_ask_for_a_second_pair() -> None:
    # The H200 demo's two baseline readings, 958 and 1024 samples/s (one pair of processes),
    # against num_workers=32's first pair, whose interval started at 1.10.
    h200 = process_spread([math.log(1024.4 / 958.3)])
    assert h200 is not None
    assert second_pair_needed(1.0976, h200, confidence=CONFIDENCE)
    # A 2-core host's fresh processes of one recipe spanned 0.87-1.06 of each other.
    cpu = process_spread([math.log(1 / 0.87), math.log(1.06), -0.05])
    assert cpu is not None
    assert second_pair_needed(1.30, cpu, confidence=CONFIDENCE)
