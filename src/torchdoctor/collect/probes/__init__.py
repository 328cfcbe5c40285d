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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from torch import nn

from torchdoctor.collect._patching import Patcher

#: The hook dicts of an `nn.Module` that a forward hook's handle id may key.
_FORWARD_HOOK_DICTS = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
)


@dataclass
class ProbeSite:
    """What probes hook through: the reversible patcher and the removable hook handles.

    What a probe or an injector puts on the user's own modules (a replaced forward, a forward
    hook) goes through `replace` and `hook`: besides being undone at `remove`, it is left out
    of the module's pickled and copied state (`keep_copies_plain`), so `torch.save(model, f)`,
    `copy.deepcopy(model)` (EMA, SWA) and `torch.load` see the module the user built.
    """

    patcher: Patcher = field(default_factory=Patcher)
    handles: list[Any] = field(default_factory=list)
    #: id(object) -> (the object, {attribute: (it had its own, its own value)})
    _replaced: dict[int, tuple[Any, dict[str, tuple[bool, Any]]]] = field(
        default_factory=dict, init=False, repr=False
    )
    #: ids of the hook handles `hook` registered on the user's modules
    _hooks: set[int] = field(default_factory=set, init=False, repr=False)
    _plain_copies: bool = field(default=False, init=False, repr=False)

    def keep_copies_plain(self) -> None:
        """From now on until `remove`, a module's pickled or copied state leaves out what this
        site put on it. Called at install (so the patch is undone in install order)."""
        if self._plain_copies:
            return
        self._plain_copies = True
        original: Callable[[nn.Module], dict[str, Any]] = nn.Module.__getstate__
        site = self

        def getstate(module: nn.Module) -> dict[str, Any]:
            return site.plain_state(module, original(module))

        self.patcher.set(nn.Module, "__getstate__", getstate)

    def replace(self, obj: Any, name: str, value: Any) -> None:
        """Set `obj.name` on the instance; `remove` deletes it again (or puts back its own)."""
        entry = self._replaced.get(id(obj))
        if entry is None or entry[0] is not obj:
            entry = self._replaced[id(obj)] = (obj, {})
        own = vars(obj)
        entry[1].setdefault(name, (name in own, own.get(name)))
        setattr(obj, name, value)

    def hook(self, handle: Any) -> None:
        """A hook registered on a user's module: removed at `remove`, absent from its copies."""
        self.handles.append(handle)
        self._hooks.add(handle.id)

    def plain_state(self, module: Any, state: dict[str, Any]) -> dict[str, Any]:
        """`state` (a shallow copy of the module's `__dict__`) without what this site added."""
        entry = self._replaced.get(id(module))
        if entry is not None and entry[0] is module:
            for name, (had, own) in entry[1].items():
                if had:
                    state[name] = own
                else:
                    state.pop(name, None)
        if self._hooks:
            for key in _FORWARD_HOOK_DICTS:
                hooks = state.get(key)
                if hooks and not self._hooks.isdisjoint(hooks):
                    state[key] = type(hooks)(
                        (i, h) for i, h in hooks.items() if i not in self._hooks
                    )
        return state

    def remove(self) -> None:
        """Undo every hook: handles first, then replaced attributes, then the patched
        attributes in reverse order."""
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self._hooks.clear()
        while self._replaced:
            _, (obj, names) = self._replaced.popitem()
            for name, (had, own) in names.items():
                if had:
                    setattr(obj, name, own)
                elif name in vars(obj):
                    delattr(obj, name)
        self.patcher.restore()
        self._plain_copies = False


class Probe(Protocol):
    """A hook family: installed once, told of each step end (after the step is recorded)."""

    def install(self, site: ProbeSite) -> None: ...

    def on_step_end(self) -> None: ...
