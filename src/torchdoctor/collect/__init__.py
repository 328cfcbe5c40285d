"""Stage: collect (see docs/DESIGN.md).

Hooks that find steps and phases in code we did not write (`Instrumentation`), the launch of
an unmodified script under them (`prepare_launch`, `launch_profile`; `procs.run_script` runs
the process), `watch()` for notebooks, and the
profiler capture of a workload (`profile_workload`, `quiet_profiling`, `export_gz`), and
knobs injected into an unmodified script (`install_recipe`, its `InjectionRecord`), and what
a tuner needs to drive one step by step (`LaunchConfig`, `child_command`, collect/control.py,
and the messages of its control channel, `Script*` and `Driver*`). The names are loaded on
first use, so reading a `ScriptProfile` does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from torchdoctor.collect._channel import (
        DriverPark,
        DriverRelease,
        DriverRun,
        DriverStop,
        DriverWelcome,
        Parked,
        ScriptChunk,
        ScriptError,
        ScriptFreed,
        ScriptHello,
        ScriptReady,
    )
    from torchdoctor.collect._target import LaunchConfig
    from torchdoctor.collect._watch import watch
    from torchdoctor.collect.control import CONTROL_AUTHKEY_ENV
    from torchdoctor.collect.fsdp_source import refuse_mixed_fsdp
    from torchdoctor.collect.hooks import CollectConfig, Instrumentation
    from torchdoctor.collect.inject import install_recipe
    from torchdoctor.collect.inject.base import ALREADY_RUNS_WITH
    from torchdoctor.collect.inject.coordinator import NOT_INJECTABLE
    from torchdoctor.collect.inject.record import INJECTION_STEM, InjectionRecord, ScriptRun
    from torchdoctor.collect.launcher import (
        check_command,
        check_script,
        child_command,
        launch_profile,
        prepare_launch,
        read_profiles,
    )
    from torchdoctor.collect.memory_owners import (
        LiveTensorBytes,
        SavedActivations,
        measure_step_memory,
        unique_bytes,
    )
    from torchdoctor.collect.profile import PROFILE_SUMMARY, profile_workload
    from torchdoctor.collect.quiet import quiet_profiling
    from torchdoctor.collect.rank_agreement import check_ranks_agree
    from torchdoctor.collect.script_profile import ScriptProfile
    from torchdoctor.collect.shard_memory import (
        PARAM_DTYPES,
        fake_activations,
        measure_sharded_step,
        meta_shape,
        model_shape,
        param_dtype_of,
    )
    from torchdoctor.collect.window import export_gz

_EXPORTS = {
    "DriverPark": "torchdoctor.collect._channel",
    "DriverRelease": "torchdoctor.collect._channel",
    "DriverRun": "torchdoctor.collect._channel",
    "DriverStop": "torchdoctor.collect._channel",
    "DriverWelcome": "torchdoctor.collect._channel",
    "ScriptChunk": "torchdoctor.collect._channel",
    "ScriptError": "torchdoctor.collect._channel",
    "ScriptFreed": "torchdoctor.collect._channel",
    "ScriptHello": "torchdoctor.collect._channel",
    "Parked": "torchdoctor.collect._channel",
    "ScriptReady": "torchdoctor.collect._channel",
    "CONTROL_AUTHKEY_ENV": "torchdoctor.collect.control",
    "LaunchConfig": "torchdoctor.collect._target",
    "check_command": "torchdoctor.collect.launcher",
    "check_script": "torchdoctor.collect.launcher",
    "check_ranks_agree": "torchdoctor.collect.rank_agreement",
    "child_command": "torchdoctor.collect.launcher",
    "INJECTION_STEM": "torchdoctor.collect.inject.record",
    "NOT_INJECTABLE": "torchdoctor.collect.inject.coordinator",
    "ALREADY_RUNS_WITH": "torchdoctor.collect.inject.base",
    "InjectionRecord": "torchdoctor.collect.inject.record",
    "PROFILE_SUMMARY": "torchdoctor.collect.profile",
    "LiveTensorBytes": "torchdoctor.collect.memory_owners",
    "SavedActivations": "torchdoctor.collect.memory_owners",
    "measure_step_memory": "torchdoctor.collect.memory_owners",
    "unique_bytes": "torchdoctor.collect.memory_owners",
    "PARAM_DTYPES": "torchdoctor.collect.shard_memory",
    "fake_activations": "torchdoctor.collect.shard_memory",
    "measure_sharded_step": "torchdoctor.collect.shard_memory",
    "meta_shape": "torchdoctor.collect.shard_memory",
    "model_shape": "torchdoctor.collect.shard_memory",
    "param_dtype_of": "torchdoctor.collect.shard_memory",
    "ScriptRun": "torchdoctor.collect.inject.record",
    "install_recipe": "torchdoctor.collect.inject",
    "CollectConfig": "torchdoctor.collect.hooks",
    "Instrumentation": "torchdoctor.collect.hooks",
    "ScriptProfile": "torchdoctor.collect.script_profile",
    "export_gz": "torchdoctor.collect.window",
    "profile_workload": "torchdoctor.collect.profile",
    "quiet_profiling": "torchdoctor.collect.quiet",
    "read_profiles": "torchdoctor.collect.launcher",
    "refuse_mixed_fsdp": "torchdoctor.collect.fsdp_source",
    "launch_profile": "torchdoctor.collect.launcher",
    "prepare_launch": "torchdoctor.collect.launcher",
    "watch": "torchdoctor.collect._watch",
}

__all__ = [
    "ALREADY_RUNS_WITH",
    "CONTROL_AUTHKEY_ENV",
    "INJECTION_STEM",
    "NOT_INJECTABLE",
    "PARAM_DTYPES",
    "PROFILE_SUMMARY",
    "CollectConfig",
    "DriverPark",
    "DriverRelease",
    "DriverRun",
    "DriverStop",
    "DriverWelcome",
    "InjectionRecord",
    "Instrumentation",
    "LaunchConfig",
    "LiveTensorBytes",
    "Parked",
    "SavedActivations",
    "ScriptChunk",
    "ScriptError",
    "ScriptFreed",
    "ScriptHello",
    "ScriptProfile",
    "ScriptReady",
    "ScriptRun",
    "check_command",
    "check_ranks_agree",
    "check_script",
    "child_command",
    "export_gz",
    "fake_activations",
    "install_recipe",
    "launch_profile",
    "measure_sharded_step",
    "measure_step_memory",
    "meta_shape",
    "model_shape",
    "param_dtype_of",
    "prepare_launch",
    "profile_workload",
    "quiet_profiling",
    "read_profiles",
    "refuse_mixed_fsdp",
    "unique_bytes",
    "watch",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS)
