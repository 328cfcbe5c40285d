"""`watch()`: instrument a block of notebook code instead of a whole script."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torchdoctor.collect.hooks import CollectConfig, Instrumentation
from torchdoctor.collect.script_profile import ScriptProfile
from torchdoctor.core.errors import CollectError


class Watch:
    """Handle returned by `watch()`; `result()` is available once the block has ended."""

    def __init__(self, instrumentation: Instrumentation) -> None:
        self.instrumentation = instrumentation
        self._result: ScriptProfile | None = None

    def _finish(self, error: BaseException | None) -> None:
        from torchdoctor.collect._target import one_line_error

        self._result = self.instrumentation.result(
            argv=[],
            exit_code=None,
            ended_by="exception" if error is not None else "completed",
            error=one_line_error(error) if error is not None else None,
        )

    def result(self) -> ScriptProfile:
        if self._result is None:
            raise CollectError(
                "watch() result is not ready", hint="call result() after the `with` block"
            )
        return self._result


@contextmanager
def watch(
    *, warmup: int = 5, profile_steps: int = 5, trace_path: Path | None = None
) -> Iterator[Watch]:
    """Record steps and phases of the training loop run inside the block.

    With `trace_path`, steps `warmup .. warmup+profile_steps-1` are profiled into it.
    """
    config = CollectConfig(
        warmup=warmup,
        profile_steps=profile_steps if trace_path is not None else 0,
        trace_path=Path(trace_path) if trace_path is not None else None,
    )
    handle = Watch(Instrumentation(config))
    handle.instrumentation.install()
    try:
        yield handle
    except BaseException as exc:
        handle._finish(exc)
        raise
    handle._finish(None)
