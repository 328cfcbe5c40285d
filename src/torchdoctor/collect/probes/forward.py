"""`ForwardProbe`: module forward pre/post hooks time the forward phase (outermost call only).

Global hooks first; once the same outermost modules have run in `FORWARD_SETTLE_STEPS`
consecutive steps, hooks on those modules alone (see `ForwardProbe.on_step_end`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.modules import module as module_mod

from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.script_profile import ForwardEvidence
from torchdoctor.collect.step_recorder import StepRecorder

#: Consecutive steps whose outermost modules must be the same before the global forward
#: hooks give way to hooks on those modules: a training loop calls its model every step, so
#: three identical steps in a row identify it (a warm-up step that also runs, say, a summary
#: forward of another module just delays the switch).
FORWARD_SETTLE_STEPS = 3
#: What a global forward hook pair adds to one module call: 4.0-4.8 µs measured on the dev
#: machine (benchmarks/RESULTS.md, bench_instrumentation_overhead: 1.2-1.5 µs plain vs
#: 5.3-6.3 µs instrumented per call); 5 µs rounds it up.
HOOK_CALL_COST_S = 5e-6
#: Share of step time the global hooks must cost on inner module calls before they give way
#: to hooks on the outermost modules: 1%, a third of the 3% overhead budget (issue 5) and
#: under the smallest effect the rules report (findings.LOW_SHARE). Below it the global
#: hooks stay, and so does forward coverage of models first called later (evaluation).
MIN_HOOK_SAVING_SHARE = 0.01


@dataclass
class ForwardCounts:
    """Outermost forward calls, those with grad enabled, and those of them in eval mode;
    grad-enabled forwards not yet followed by a backward (`pending`), and those that were."""

    calls: int = 0
    grad: int = 0
    eval_grad: int = 0
    pending: int = 0
    consumed: int = 0

    def backward_done(self) -> None:
        """A backward ran: the grad-enabled forwards before it were for training."""
        self.consumed += self.pending
        self.pending = 0

    def record(self) -> ForwardEvidence:
        return ForwardEvidence(
            calls=self.calls,
            grad_enabled_calls=self.grad,
            eval_mode_grad_calls=self.eval_grad,
            grad_forwards_without_backward=self.grad - self.consumed,
        )


class ForwardProbe:
    def __init__(self, recorder: StepRecorder) -> None:
        self.recorder = recorder
        self.counts = ForwardCounts()
        self._site: ProbeSite | None = None
        # global hooks until the outermost modules are known (on_step_end)
        self._global: list[Any] = []
        self._hooks: tuple[Callable[..., Any], Callable[..., Any]] | None = None
        self._outer_step: dict[int, torch.nn.Module] = {}
        self._outer_prev: frozenset[int] = frozenset()
        self._outer_streak = 0
        self._module_calls = 0

    def install(self, site: ProbeSite) -> None:
        recorder, counts = self.recorder, self.counts
        self._site = site
        # Hooks that move onto the user's modules stay out of their pickles and copies.
        site.keep_copies_plain()

        def pre(module: torch.nn.Module, _args: Any) -> None:
            outermost = recorder.active_phase is None
            self._module_calls += 1
            if outermost:
                counts.calls += 1
                if torch.is_grad_enabled():
                    counts.grad += 1
                    counts.pending += 1
                    if not module.training:
                        counts.eval_grad += 1
            # begin() may close the previous step (backward mode): this call is the next's.
            recorder.begin("forward")
            if outermost and self._global:
                self._outer_step[id(module)] = module

        def post(_module: torch.nn.Module, _args: Any, _out: Any) -> None:
            recorder.end("forward")

        self._hooks = (pre, post)
        self._global = [
            module_mod.register_module_forward_pre_hook(pre),
            module_mod.register_module_forward_hook(post, always_call=True),
        ]
        site.handles.extend(self._global)

    def uninstall(self) -> None:
        """Forget the modules of the step in progress (the hooks go with the site)."""
        self._outer_step.clear()

    def on_step_end(self) -> None:
        """Replace the global forward hooks by hooks on the outermost modules once those have
        been the same for FORWARD_SETTLE_STEPS steps, if the global hooks' cost on inner
        module calls is at least MIN_HOOK_SAVING_SHARE of the step.

        A global module hook sends every module call (every conv, norm, activation) through
        torch's slow call path plus two Python calls, ~4-5 µs each (benchmarks/RESULTS.md,
        bench_instrumentation_overhead): small for a CNN, but a tenth of the step of a model
        of many tiny modules, whose framework overhead it would then inflate. Hooks on the
        outermost modules cost that once per forward. The price: a model first called after
        the switch (a separate evaluation model) is no longer seen as forward, which is why
        cheap global hooks stay.
        """
        if not self._global:
            return
        ids = frozenset(self._outer_step)
        self._outer_streak = self._outer_streak + 1 if ids and ids == self._outer_prev else 1
        self._outer_prev = ids
        modules, self._outer_step = self._outer_step, {}
        inner_calls, self._module_calls = max(0, self._module_calls - len(ids)), 0
        last = self.recorder.steps[-1].total_s if self.recorder.steps else 0.0
        saving = inner_calls * HOOK_CALL_COST_S / last if last > 0 else 0.0
        if not ids or self._outer_streak < FORWARD_SETTLE_STEPS:
            return
        if saving < MIN_HOOK_SAVING_SHARE:
            return
        self._hook_only(modules.values())

    def pin(self, module: torch.nn.Module) -> None:
        """Hooks on `module` alone from now on, without waiting for the steps to settle.

        For a module whose forward is about to be compiled (the injected compile knob):
        torch.compile traces the submodule calls inside the compiled forward, global hooks
        included, and recompiles when their state changes and again when they give way to
        module hooks, which lands compilations in the middle of a measurement. Hooks on the
        compiled module itself run outside its graph.
        """
        if self._global:
            self._outer_step.clear()
            self._hook_only([module])

    def _hook_only(self, modules: Iterable[torch.nn.Module]) -> None:
        assert self._hooks is not None and self._site is not None  # set by install
        pre, post = self._hooks
        for handle in self._global:
            handle.remove()
        self._global = []
        for module in modules:
            self._site.hook(module.register_forward_pre_hook(pre))
            self._site.hook(module.register_forward_hook(post, always_call=True))
