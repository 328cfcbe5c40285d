"""`DataLoaderProbe` (batches and the wait for them) and `CopyProbe` (host-to-device copies)."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.utils.data.dataloader as dl_mod

from torchdoctor.collect._patching import batch_size_of, non_blocking_flag, target_device
from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.probes.constants import ConstantCopies
from torchdoctor.collect.probes.syncs import SyncProbe
from torchdoctor.collect.script_profile import DataLoaderInfo, H2DInfo
from torchdoctor.collect.step_recorder import StepRecorder


@dataclass
class LoaderStats:
    """One DataLoader: its settings, batches fetched and seconds waited for them."""

    info: dict[str, Any]
    batches: int = 0
    wait_s: float = 0.0

    def record(self) -> DataLoaderInfo:
        return DataLoaderInfo(**self.info, batches_fetched=self.batches, wait_s=self.wait_s)


def loader_info(loader: Any) -> dict[str, Any]:
    try:
        dataset_len: int | None = len(loader.dataset)
    except TypeError:  # an IterableDataset without __len__
        dataset_len = None
    context = loader.multiprocessing_context
    return {
        "num_workers": int(loader.num_workers),
        "pin_memory": bool(loader.pin_memory),
        "batch_size": loader.batch_size,
        "persistent_workers": bool(loader.persistent_workers),
        "prefetch_factor": loader.prefetch_factor,
        "multiprocessing_context": context.get_start_method() if context is not None else None,
        "dataset_len": dataset_len,
    }


class DataLoaderProbe:
    """`DataLoader.__iter__` (loader settings) and `_BaseDataLoaderIter.__next__` (data wait)."""

    def __init__(self, recorder: StepRecorder) -> None:
        self.recorder = recorder
        #: id(loader) -> its stats
        self.loaders: dict[int, LoaderStats] = {}

    def install(self, site: ProbeSite) -> None:
        loaders, recorder = self.loaders, self.recorder
        original_iter = dl_mod.DataLoader.__iter__
        original_next = dl_mod._BaseDataLoaderIter.__next__

        def dl_iter(loader: Any) -> Any:
            it = original_iter(loader)
            key = id(loader)
            if key not in loaders:
                loaders[key] = LoaderStats(loader_info(loader))
            # a custom iterator with __slots__ cannot be tagged: no per-loader stats for it
            with contextlib.suppress(AttributeError):
                setattr(it, "_torchdoctor_loader", key)  # noqa: B010 - not a declared attribute
            return it

        def dl_next(it: Any) -> Any:
            stats = loaders.get(getattr(it, "_torchdoctor_loader", -1))
            recorder.begin("data_wait")
            start = time.perf_counter()
            try:
                batch = original_next(it)
            finally:
                recorder.end("data_wait")
                if stats is not None:
                    stats.wait_s += time.perf_counter() - start
            if stats is not None:
                stats.batches += 1
            recorder.note_samples(batch_size_of(batch))
            return batch

        site.patcher.set(dl_mod.DataLoader, "__iter__", dl_iter)
        site.patcher.set(dl_mod._BaseDataLoaderIter, "__next__", dl_next)

    def on_step_end(self) -> None:
        return None


@dataclass
class CopyCounts:
    """Host-to-device copies over the whole run (the fields of `H2DInfo`, which records them)."""

    calls: int = 0
    non_blocking_calls: int = 0
    pinned_calls: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def record(self, constants: ConstantCopies | None = None) -> H2DInfo:
        found = constants.constants() if constants is not None else []
        sites: Counter[str] = Counter()
        for src in found:
            sites[src.site or "(unknown)"] += src.copies
        return H2DInfo(
            **asdict(self),
            constant_sources=len(found),
            constant_copies=sum(s.copies for s in found),
            constant_bytes=sum(s.copies * s.nbytes for s in found),
            constant_sites=dict(sites.most_common()),
        )


class CopyProbe:
    """`Tensor.to` / `Tensor.cuda` with a device change: host-to-device copies are timed as
    the h2d phase; device-to-host ones wait for the device and go to the sync probe."""

    def __init__(
        self,
        recorder: StepRecorder,
        syncs: SyncProbe,
        on_device: Callable[[torch.device], None],
    ) -> None:
        self.recorder = recorder
        self.syncs = syncs
        #: Told of each CUDA device the script copies to (the step clock times that one).
        self.on_device = on_device
        self.counts = CopyCounts()
        self.constants = ConstantCopies()

    def install(self, site: ProbeSite) -> None:
        original_to, original_cuda = torch.Tensor.to, torch.Tensor.cuda

        def copy(original: Callable[..., Any], device: torch.device | None) -> Callable[..., Any]:
            def wrapper(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
                dst = device or target_device(args, kwargs)
                if dst is None or dst.type == t.device.type:
                    return original(t, *args, **kwargs)
                if dst.type == "cuda":
                    # The script's data and model go there: time its steps on that device.
                    self.on_device(dst)
                if dst.type == "cpu":  # device -> host: waits for the device
                    return self.syncs.timed(original, "cpu", t, *args, **kwargs)
                return self._timed_h2d(original, t, args, kwargs)

            return wrapper

        site.patcher.set(torch.Tensor, "to", copy(original_to, None))
        site.patcher.set(torch.Tensor, "cuda", copy(original_cuda, torch.device("cuda")))

    def on_step_end(self) -> None:
        return None

    def _timed_h2d(
        self, original: Callable[..., Any], t: torch.Tensor, args: Any, kwargs: Any
    ) -> Any:
        counts = self.counts
        counts.calls += 1
        counts.bytes += t.numel() * t.element_size()
        if self.recorder.in_step:
            # Depth 3: this frame, then the hooking wrapper the script's line called.
            self.constants.saw(t, self.recorder.closed_count, depth=3)
        if non_blocking_flag(args, kwargs):
            counts.non_blocking_calls += 1
        if t.is_pinned():
            counts.pinned_calls += 1
        self.recorder.begin("h2d")
        start = time.perf_counter()
        try:
            return original(t, *args, **kwargs)
        finally:
            self.recorder.end("h2d")
            counts.seconds += time.perf_counter() - start
