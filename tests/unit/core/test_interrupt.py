"""`Interrupted`: Ctrl-C, SIGTERM and SIGHUP as one exception, with the signal's exit code."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from torchdoctor.core.interrupt import Interrupted, interrupt_on_signals, interruption


def test_ctrl_c_is_an_interruption_exit_130() -> None:
    stopped = Interrupted.of(KeyboardInterrupt())
    assert stopped.signum == signal.SIGINT and stopped.exit_code == 130
    assert stopped.run_dir is None


def test_the_run_folder_is_kept_as_the_interruption_goes_up(tmp_path: Path) -> None:
    inner = Interrupted.of(Interrupted(signal.SIGTERM), tmp_path)
    assert (inner.signum, inner.exit_code, inner.run_dir) == (signal.SIGTERM, 143, tmp_path)
    # A stage further up without a folder of its own keeps the one below's.
    assert Interrupted.of(inner).run_dir == tmp_path


def test_an_interruption_is_found_behind_what_wraps_it() -> None:
    try:
        try:
            raise Interrupted(signal.SIGHUP)
        except KeyboardInterrupt as exc:
            raise RuntimeError("aborted") from exc
    except RuntimeError as wrapped:
        found = interruption(wrapped)
    assert found is not None and found.exit_code == 129
    assert interruption(RuntimeError("no")) is None


def test_sigterm_raises_inside_and_is_put_back_after() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as info, interrupt_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the handler raises here, at once
    assert info.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before
