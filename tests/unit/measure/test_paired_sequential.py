"""measure.SequentialTest: the paired statistic and the decision at each look of an A/B."""

from __future__ import annotations

import numpy as np

from torchdoctor.measure import (
    LAST_LOOK_SHARE,
    SequentialTest,
    look_confidence,
    paired_speedup,
    sequential_looks,
    speed_verdict,
)


def test_looks_and_their_bonferroni_confidence() -> None:
    assert sequential_looks(min_rounds=6, rounds=12, look_every=2) == [6, 8, 10, 12]
    assert sequential_looks(min_rounds=6, rounds=4, look_every=2) == [4]
    # Weighted Bonferroni: the last look gets LAST_LOOK_SHARE of the 5%, the others the rest.
    early = [look_confidence(0.95, 4) for _ in range(3)]
    last = look_confidence(0.95, 4, last=True)
    assert abs(last - (1 - 0.05 * LAST_LOOK_SHARE)) < 1e-12
    assert abs(sum(1 - c for c in [*early, last]) - 0.05) < 1e-12  # the whole budget, no more
    assert last < early[0]  # the last look's interval is the narrower
    assert look_confidence(0.95, 1) == look_confidence(0.95, 1, last=True) == 0.95


def test_a_close_call_is_decided_at_the_last_look_with_its_own_confidence() -> None:
    test = SequentialTest(threshold=1.02, rounds=8, min_rounds=6, look_every=2)
    rng = np.random.default_rng(3)
    a = list(0.01 * rng.lognormal(0, 0.03, size=8))
    b = [x / 1.06 for x in 0.01 * rng.lognormal(0, 0.03, size=8)]
    first, final = test.look(a[:6], b[:6]), test.look(a, b)
    assert first is not None and final is not None and final.last
    assert first.estimate.confidence == look_confidence(0.95, 2)
    assert final.estimate.confidence == look_confidence(0.95, 2, last=True)


def test_pairing_cancels_load_that_hits_both_sides_of_a_round() -> None:
    # B is 1.25x faster; each round's load multiplies both chunks by up to 10x.
    load = np.random.default_rng(0).uniform(1.0, 10.0, size=12)
    a = list(0.010 * load)
    b = list(0.008 * load)
    est = paired_speedup(a, b, confidence=0.99)
    assert abs(est.speedup - 1.25) < 1e-9
    assert abs(est.ci_low - 1.25) < 1e-9 and abs(est.ci_high - 1.25) < 1e-9


def test_a_look_stops_on_a_proven_win_and_on_futility_only() -> None:
    test = SequentialTest(threshold=1.02, rounds=12, min_rounds=6, look_every=2)
    rng = np.random.default_rng(1)
    a = list(0.01 * rng.lognormal(0, 0.01, size=6))
    assert test.look(a[:5], a[:5]) is None  # between looks
    win = test.look(a, [x / 1.5 for x in a])
    assert win is not None and win.verdict == "faster" and win.stop
    loss = test.look(a, [x * 1.5 for x in a])
    assert loss is not None and loss.verdict == "futile" and loss.stop
    # A do-nothing change with noisy chunks at the first look: undecided, the test runs on.
    noisy = list(0.01 * rng.lognormal(0, 0.2, size=6))
    same = test.look(noisy, list(0.01 * rng.lognormal(0, 0.2, size=6)))
    assert same is not None and same.verdict == "undecided" and not same.stop
    assert speed_verdict(same.estimate, 1.02) == "undecided"
