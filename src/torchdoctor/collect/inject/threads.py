"""Intra-op threads: `torch.set_num_threads(N)` before the script starts.

A script that sets its own count later would undo the recipe, so `torch.set_num_threads` is
patched to keep N (the script's call is recorded as overridden).
"""

from __future__ import annotations

import torch

from torchdoctor.collect._patching import user_site
from torchdoctor.collect.inject.base import InjectSite, KnobValue, Ledger, where


class ThreadsInjector:
    """The thread-count knob (the one knob at `ScriptSite.THREADS`)."""

    def __init__(self, values: dict[str, KnobValue], ledger: Ledger) -> None:
        ((self.knob, threads),) = values.items()
        self.threads = int(threads)  # type: ignore[arg-type]
        self.ledger = ledger
        ledger.expect(self.knob, threads, "torch.set_num_threads was not called")

    def install(self, site: InjectSite) -> None:
        knob, threads, ledger = self.knob, self.threads, self.ledger
        original = torch.set_num_threads
        before = torch.get_num_threads()
        original(threads)
        site.undo.append(lambda: original(before))
        ledger.applied(knob, f"torch.set_num_threads({threads}) at start (was {before})")

        def set_num_threads(n: int) -> None:
            if n != threads:
                ledger.applied(
                    knob,
                    where(user_site(2), f"the script's set_num_threads({n}) kept at {threads}"),
                )
            original(threads)

        site.patcher.set(torch, "set_num_threads", set_num_threads)
