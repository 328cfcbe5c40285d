"""A small FSDP2 model's shape for the scale tests, as `scale/_fsdp_units.py` records a job's:
`blocks` units `b0`, `b1`, ... of one parameter `w` each, then the root's one parameter, fp32
parameters under AdamW (two states an element and a step count)."""

from __future__ import annotations

from torchdoctor.core.shard_memory import ModelShape, ShardedParameter, ShardUnit


def blocks_and_root(
    blocks: int, rows: int, numel: int, *, root: str, root_rows: int, root_numel: int
) -> ModelShape:
    units = [
        ShardUnit(name=f"b{i}", parameters=[ShardedParameter(name="w", rows=rows, numel=numel)])
        for i in range(blocks)
    ]
    units.append(
        ShardUnit(
            name="", parameters=[ShardedParameter(name=root, rows=root_rows, numel=root_numel)]
        )
    )
    return ModelShape(
        units=units,
        parameter_bytes=4,
        buffers_bytes=0,
        optimizer="AdamW",
        states_per_element=2,
        state_bytes=4,
        scalar_states_per_parameter=1,
    )
