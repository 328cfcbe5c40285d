"""CUDA compute capabilities: the one threshold knobs and diagnosis rules share (torch-free).

The diagnosis stage reads this without importing torch (diagnosing a trace recorded on a GPU
elsewhere needs no torch); the knob catalogue reads it to refuse settings a GPU cannot run.
"""

from __future__ import annotations

from typing import Final

#: First compute capability with bf16 and TF32 tensor cores (Ampere, sm_80); the threshold
#: torch.cuda.is_bf16_supported(including_emulation=False) applies too (major >= 8).
AMPERE: Final = (8, 0)


def sm_name(capability: tuple[int, int]) -> str:
    """NVIDIA's short name of a compute capability: (7, 5) -> "sm_75"."""
    return f"sm_{capability[0]}{capability[1]}"


def older_than_ampere(device: str, capability: tuple[int, int] | None) -> tuple[int, int] | None:
    """`capability` when `device` is a CUDA device known to be older than Ampere, else None."""
    if device.split(":", 1)[0] != "cuda" or capability is None:
        return None
    return capability if tuple(capability) < AMPERE else None
