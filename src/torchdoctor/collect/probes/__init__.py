"""One probe per hook family: each hooks torch for one thing and owns a typed counter.

- `forward.ForwardProbe`: module forward pre/post hooks (forward phase), global first, then
  on the outermost modules once they repeat;
- `backward.BackwardProbe`: `Tensor.backward` / `torch.autograd.backward` (backward phase);
- `optimizer.OptimizerProbe`: optimizer step pre/post hooks (optimizer phase, step ends);
- `data.DataLoaderProbe` and `data.CopyProbe`: batches and the wait for them; host-to-device
  copies;
- `syncs.SyncProbe`: host sync points (`.item()`, `.cpu()`, printing, synchronize);
- `settings.ZeroGradProbe` and `settings.AutocastProbe`: what the script sets.

`Instrumentation` (collect/hooks.py) composes them: it installs each through one `ProbeSite`
(the reversible patcher and the hook handles, so uninstalling undoes every probe), tells
each that a step ended, and reads their counters into the `ScriptProfile`. A probe sees
the others only through what it is given at construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from torchdoctor.collect._patching import Patcher


@dataclass
class ProbeSite:
    """What probes hook through: the reversible patcher and the removable hook handles."""

    patcher: Patcher = field(default_factory=Patcher)
    handles: list[Any] = field(default_factory=list)

    def remove(self) -> None:
        """Undo every hook: handles first, then the patched attributes in reverse order."""
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.patcher.restore()


class Probe(Protocol):
    """A hook family: installed once, told of each step end (after the step is recorded)."""

    def install(self, site: ProbeSite) -> None: ...

    def on_step_end(self) -> None: ...
