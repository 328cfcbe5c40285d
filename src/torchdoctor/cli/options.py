"""Option parsing shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from torchdoctor.core.errors import UsageError

#: --device's help for the commands that run a workload.
DEVICE_HELP = "cpu or cuda[:N]; default: cuda when a GPU is available, else cpu."


def device_option(help: str = DEVICE_HELP) -> Any:
    """`--device`, the same flag and default in every command that runs a workload."""
    return typer.Option(None, "--device", help=help)


def seed_option() -> Any:
    """`--seed`: one seed for the weights, the data and its order, in every command."""
    return typer.Option(0, "--seed", help="Seed for weights, data and its order.")


def default_device(device: str | None, *, cuda_available: Callable[[], bool] | None = None) -> str:
    """The device a command runs on: the one given, else the GPU when there is one.

    PyTorch users expect a tool on a GPU machine to use the GPU; a CPU default would measure
    and tune a job they never run. torch is imported only when no device was given.
    """
    if device is not None:
        return device
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available
    return "cuda" if cuda_available() else "cpu"


def parse_workload_params(items: list[str]) -> dict[str, Any]:
    """`--param name=value` -> {name: value}, the value an int, else a float, else a str."""
    params: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"cannot read workload parameter {item!r}", hint="write name=value")
        value: Any = text
        for convert in (int, float):
            try:
                value = convert(text)
                break
            except ValueError:
                continue
        params[name.strip()] = value
    return params
