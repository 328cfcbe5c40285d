"""Fixtures of the tests that call the CLI's `main` in this process, and the loopback made slow
with a network namespace and tbf that the FSDP studies run their torchrun jobs under."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from torchdoctor.cli.state import settings


@pytest.fixture(autouse=True)
def _reset_cli_settings() -> None:
    """`--json`/`--debug` set by one test's `main([...])` call must not leak into the next."""
    settings.json = False
    settings.debug = False


#: The shaped loopback's rate: at 1 Gbit/s the zoo job's fp32 gradients (~19 MB reduced per
#: step) take ~0.2 s a step on the link, several times a block's compute, while a traced step
#: stays under two seconds on a 2-core host. Measured on such a host (two ranks, one thread
#: each, the median of ten steps): the unplanted zoo job's step 383 ms under the link against
#: 218 ms on an unshaped loopback; its planted fp32 reduce 508 ms and its planted reshard
#: 488 ms under the link, each cured by its knob (bf16 reduce; no reshard) back to 383 ms.
SLOW_LINK_MBIT = 1000


@pytest.fixture
def slow_loopback() -> Iterator[str]:
    """A network namespace whose loopback is shaped by tbf to `SLOW_LINK_MBIT`
    (`scale.netns.shaped_loopback`); every process left inside is ended and the namespace
    deleted on the way out."""
    from torchdoctor.scale.netns import shaped_loopback, unavailable

    why = unavailable()
    if why:
        pytest.skip(f"no network namespace here: {why}")
    with shaped_loopback(SLOW_LINK_MBIT) as name:
        yield name
