"""cross_rank.json (or a folder analysis's `cross_rank`) -> the per-rank table, the skew at
the collectives and the stragglers, as a `Blocks` view."""

from __future__ import annotations

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import JsonDict, integer, items, mapping, num, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.views import KeyValue

#: The table's columns: (header, field of RankPhases).
RANK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("forward", "forward_ms"),
    ("backward", "backward_ms"),
    ("exposed comm", "exposed_comm_ms"),
    ("waiting", "wait_ms"),
    ("optimizer", "optimizer_ms"),
    ("data wait", "data_wait_ms"),
    ("other", "other_ms"),
    ("step", "step_ms"),
)
#: Collectives listed one by one; the facts summarize all of them.
SKEW_ROWS_SHOWN = 8


def _ms(value: float | None) -> str:
    return fmt.NA if value is None else f"{value:.2f} ms"


def _num(value: float | None) -> str:
    """A table cell whose unit (ms) the title names: narrow columns fit a terminal."""
    return fmt.NA if value is None else f"{value:.2f}"


def cross_rank_of(records: dict[str, JsonDict]) -> JsonDict | None:
    """The cross-rank record: its own file, else the one a folder's analysis carries."""
    found = records.get("cross_rank")
    if found is None:
        found = mapping(records.get("analysis"), "cross_rank") or None
    return found


def ranks_blocks(cross: JsonDict | None) -> Blocks | None:
    """The view; None without a cross-rank record."""
    if not cross:
        return None
    rows = [
        [f"rank {integer(r, 'rank')}", *(_num(num(r, f)) for _, f in RANK_COLUMNS)]
        for r in items(cross, "ranks")
        if isinstance(r, dict)
    ]
    tables = [
        Table(
            header=["rank", *(h for h, _ in RANK_COLUMNS)],
            rows=rows,
            title="Each rank's mean step, ms (each instant counted once; the wait for a "
            "later rank at the collectives is part of exposed comm)",
        )
    ]
    skews = [s for s in items(cross, "collectives") if isinstance(s, dict)]
    how = (
        "arrivals by the ranks' shared clock"
        if text(cross, "skew_method") == "clock"
        else "the shortest arrived last"
    )
    if skews:
        tables.append(
            Table(
                header=["#", "step", "collective", "time in it per rank", "last", "skew"],
                rows=[
                    [
                        fmt.number(integer(s, "index")),
                        fmt.number(integer(s, "step")),
                        text(s, "name") or fmt.NA,
                        " / ".join(_ms(d) for d in items(s, "durations_ms")),
                        f"rank {integer(s, 'last_rank')}",
                        _ms(num(s, "skew_ms")),
                    ]
                    for s in skews[:SKEW_ROWS_SHOWN]
                ],
                title=f"Arrival skew at the collectives ({how})",
            )
        )
    notes = []
    for s in items(cross, "stragglers"):
        if not isinstance(s, dict):
            continue
        phrase = text(s, "phrase") or f"rank {integer(s, 'rank')} is late"
        notes.append(
            f"Straggler: {phrase}; the others wait "
            f"{_ms(num(s, 'imposed_wait_ms'))} per step for it "
            f"({fmt.percent(num(s, 'wait_share'), 0)} of their step), last at "
            f"{fmt.percent(num(s, 'last_fraction'), 0)} of the collectives."
        )
    if not notes and skews:
        notes.append("No straggler: no rank comes last at most collectives at a sizeable cost.")
    notes += [str(n) for n in items(cross, "notes")]
    return Blocks(
        title="Across ranks",
        facts=[
            KeyValue("ranks", fmt.number(integer(cross, "world_size"))),
            KeyValue("collectives matched", fmt.number(integer(cross, "collectives_matched"))),
            KeyValue("matched on", text(cross, "collective_events") or fmt.NA),
            KeyValue("median skew", _ms(num(cross, "median_skew_ms"))),
            KeyValue("largest skew", _ms(num(cross, "max_skew_ms"))),
        ],
        tables=tables,
        notes=notes,
    )
