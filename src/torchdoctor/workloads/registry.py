"""Find a workload by name (built-in) or by `path/to/file.py:factory` (a user's own)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchdoctor.core.errors import WorkloadError
from torchdoctor.workloads.base import Workload

#: Built-in workloads: name -> "module:class" under torchdoctor.workloads, imported on use.
BUILTIN: dict[str, str] = {
    "cnn": "cnn:CnnWorkload",
    "gpt": "gpt:GptWorkload",
    "mlp": "mlp:MlpWorkload",
    "recsys": "recsys:RecsysWorkload",
}


#: Named presets: a built-in workload at another size, found by name but not listed (they are
#: the same workload as their base). `gpt2-small`: the built-in gpt at GPT-2 small's shape
#: (Radford et al., 2019: 12 layers, 12 heads, 768 wide, a 1024-token context) with its
#: attention written by hand, as nanoGPT's slow path and many first training scripts compute
#: it; a step is tens of GFLOP, so on a GPU the device, not the host or the data, sets its
#: time. The demo's GPU story (cli/demo.py). 4 sequences a batch: in fp32 the hand-written
#: attention saves one 4 x 12 x 1024 x 1024 softmax per layer for backward (0.2 GB), and with
#: the other activations (~0.3 GB a layer) and AdamW's state (16 bytes a parameter) a step
#: holds about 7 GB, within a 16 GB GPU.
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "gpt2-small": (
        "gpt",
        {
            "block": 1024,
            "layers": 12,
            "heads": 12,
            "embd": 768,
            "attention": "manual",
            "batch_size": 4,
            "characters": 262144,
        },
    ),
}


def _builtin_factories() -> dict[str, Callable[..., Workload]]:
    factories: dict[str, Callable[..., Workload]] = {}
    for name, target in BUILTIN.items():
        module_name, _, class_name = target.partition(":")
        module_path = f"torchdoctor.workloads.{module_name}"
        if importlib.util.find_spec(module_path) is None:
            continue  # not written yet in this checkout
        factories[name] = getattr(importlib.import_module(module_path), class_name)
    return factories


def list_workloads() -> list[Workload]:
    """One instance of every built-in workload, with default parameters."""
    return [factory() for factory in _builtin_factories().values()]


def get_workload(name: str, **params: Any) -> Workload:
    """A built-in workload by name, or a user's via `path/to/file.py:factory`."""
    if ":" in name or name.endswith(".py"):
        return load_user_workload(name, **params)
    factories = _builtin_factories()
    if name in PRESETS and PRESETS[name][0] in factories:
        base, preset = PRESETS[name]
        return _call_factory(factories[base], name, {**preset, **params})
    if name not in factories:
        raise WorkloadError(
            f"unknown workload '{name}'",
            hint=f"built-in workloads: {', '.join(factories)}; or give path/to/file.py:factory",
        )
    return _call_factory(factories[name], name, params)


def load_user_workload(spec: str, **params: Any) -> Workload:
    """Import `path/to/file.py` by path and call its `factory(**params)`."""
    path_text, sep, factory_name = spec.rpartition(":")
    if not sep or not path_text or not factory_name:
        raise WorkloadError(
            f"cannot read workload {spec!r}",
            hint="write a user workload as path/to/file.py:factory",
        )
    factory = import_factory(
        Path(path_text),
        factory_name,
        noun="workload",
        hint="name a function in that file that returns a Workload",
    )
    return _call_factory(factory, spec, params)


def import_factory(path: Path, factory_name: str, *, noun: str, hint: str) -> Callable[..., Any]:
    """Import the Python file at `path` by path and return its callable `factory_name`.

    `noun` names the file in errors ("workload file", "model file"); `hint` says what the
    function should return.
    """
    if not path.is_file():
        raise WorkloadError(f"{noun} file '{path}' does not exist", hint="check the path")
    module_name = f"torchdoctor_user_{noun}_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise WorkloadError(f"{noun} file '{path}' cannot be imported as Python")
    module = importlib.util.module_from_spec(module_spec)
    # Registered before executing so dataclasses/pickling inside the file can find it.
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise WorkloadError(
            f"importing {noun} file '{path}' failed: {type(exc).__name__}: {exc}"
        ) from exc
    factory = getattr(module, factory_name, None)
    if factory is None or not callable(factory):
        raise WorkloadError(f"{noun} file '{path}' has no callable '{factory_name}'", hint=hint)
    return factory


def _call_factory(factory: Callable[..., Any], name: str, params: dict[str, Any]) -> Workload:
    try:
        workload = factory(**params)
    except TypeError as exc:
        raise WorkloadError(f"workload '{name}' rejected its parameters {params}: {exc}") from exc
    except WorkloadError:
        raise
    except Exception as exc:
        raise WorkloadError(
            f"workload factory '{name}' raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(workload, Workload):
        raise WorkloadError(
            f"workload factory '{name}' returned {type(workload).__name__}, not a Workload",
            hint="return an object with the attributes and methods of "
            "torchdoctor.workloads.Workload",
        )
    return workload
