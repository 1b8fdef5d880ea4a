"""When a completion is judged (catchup.py): once its parts are there, or once the agents
folding the state topics have handled them past the completion; never after a fixed wait.

The broker is faked (end offsets, what lies before them); the agents are a task that
handles records as the real ones report them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from faust.types import TP

from processors.evaluator.catchup import CatchUp, Moved
from webgym_common.config import load_settings

OBS, ACTS, EPS, DONE = TP("obs", 2), TP("acts", 2), TP("eps", 2), TP("done", 2)
TARGETS = {OBS: 60, ACTS: 40, EPS: 5}


class FakeOffsets:
    def __init__(self, targets: dict[TP, int], records_left: bool = False) -> None:
        self.targets, self.records_left, self.gap_reads = targets, records_left, 0

    async def ends(self, tps: list[TP]) -> dict[TP, int]:
        return {tp: self.targets[tp] for tp in tps}

    async def any_record(self, tp: TP, start: int, end: int) -> bool:
        self.gap_reads += 1
        return self.records_left


def catchup(offsets: FakeOffsets, idle_s: float = 0.2, stall_s: float = 30.0,
            committed: dict[TP, int] | None = None) -> CatchUp:
    consumer = SimpleNamespace(_committed_offset=committed or {},
                               assignment=lambda: {OBS, ACTS, EPS, DONE})
    settings = load_settings(evaluator={"trajectory_wait_s": idle_s,
                                        "trajectory_stall_s": stall_s})
    c = CatchUp(SimpleNamespace(consumer=consumer), settings,  # type: ignore[arg-type]
                ["obs", "acts", "eps"])
    c.offsets = offsets  # type: ignore[assignment]
    return c


async def handle(c: CatchUp, tp: TP, offsets: range, pause_s: float = 0.0) -> None:
    for offset in offsets:
        message = SimpleNamespace(tp=tp, offset=offset, acked=True)
        await c.handled(SimpleNamespace(message=message))  # type: ignore[arg-type]
        await asyncio.sleep(pause_s)


async def test_a_backlog_is_waited_for_as_long_as_the_agents_move() -> None:
    """After a restart the agents catch up slowly, for longer than any idle limit: the
    completion waits for all of it, and gets its parts (here: the last records)."""
    c = catchup(FakeOffsets(TARGETS), idle_s=0.3, stall_s=1.0)
    parts: set[str] = set()

    async def agents() -> None:
        await handle(c, EPS, range(5))
        parts.add("request")
        await handle(c, ACTS, range(40), pause_s=0.01)
        parts.add("actions")
        await handle(c, OBS, range(59), pause_s=0.03)  # ~2 s: more than the stall limit
        parts.add("observations")  # in the table before its record counts as handled
        await handle(c, OBS, range(59, 60))

    running = asyncio.create_task(agents())
    why = await c.wait(DONE, lambda: [p for p in ("request", "actions", "observations")
                                      if p not in parts])
    await running
    assert why is None and parts == {"request", "actions", "observations"}
    assert c.offsets.gap_reads == 0  # type: ignore[attr-defined]


async def test_parts_that_were_not_there_before_the_completion_never_come() -> None:
    c = catchup(FakeOffsets(TARGETS))
    async def agents() -> None:
        await asyncio.gather(handle(c, OBS, range(60)), handle(c, ACTS, range(40)),
                             handle(c, EPS, range(5)))

    running = asyncio.create_task(agents())
    why = await c.wait(DONE, lambda: ["action 3"])
    await running
    assert why == "the state topics were read past the completion"


async def test_offsets_committed_before_the_restart_count_as_handled() -> None:
    c = catchup(FakeOffsets(TARGETS), committed={OBS: 60, ACTS: 41, EPS: 5})
    assert await c.wait(DONE, lambda: ["observation 1"]) is not None
    assert await c.wait(DONE, list) is None  # nothing missing: no wait at all


async def test_a_tail_of_transaction_markers_is_read_to_see_that_nothing_is_left() -> None:
    offsets = FakeOffsets(TARGETS)
    c = catchup(offsets, committed={OBS: 59, ACTS: 40, EPS: 5})  # OBS 59: a marker
    assert await c.wait(DONE, lambda: ["observation 4"]) is not None
    assert offsets.gap_reads == 1


async def test_agents_that_stop_while_records_are_left_are_given_up_on_saying_so() -> None:
    offsets = FakeOffsets(TARGETS, records_left=True)
    c = catchup(offsets, idle_s=0.05, stall_s=0.3, committed={OBS: 10, ACTS: 40, EPS: 5})
    why = await c.wait(DONE, lambda: ["observation 4"])
    assert why is not None and "obs" in why and "handled nothing for 0s" in why
    assert offsets.gap_reads >= 1


async def test_a_completion_whose_partition_moves_away_stops_waiting() -> None:
    c = catchup(FakeOffsets(TARGETS, records_left=True), idle_s=0.05)
    c.app.consumer.assignment = lambda: {OBS, ACTS, EPS}  # type: ignore[attr-defined]
    with pytest.raises(Moved):
        await c.wait(DONE, lambda: ["observation 0"])


async def test_a_partition_given_back_by_a_rebalance_keeps_its_completion_waiting() -> None:
    """Away for a moment (a rebalance), then here again: the wait goes on to the parts."""
    c = catchup(FakeOffsets(TARGETS, records_left=True), idle_s=0.3)
    here = {OBS, ACTS, EPS, DONE}
    c.app.consumer.assignment = lambda: here  # type: ignore[attr-defined]
    parts: list[str] = []

    async def rebalance() -> None:
        here.discard(DONE)
        await asyncio.sleep(0.1)
        here.add(DONE)
        c.forget()
        await handle(c, OBS, range(60))
        parts.append("observation 0")

    running = asyncio.create_task(rebalance())
    assert await c.wait(DONE, lambda: [] if parts else ["observation 0"]) is None
    await running


async def test_a_record_whose_partition_moved_before_it_was_applied_is_not_handled() -> None:
    c = catchup(FakeOffsets(TARGETS))
    stale = SimpleNamespace(tp=OBS, offset=70, acked=False)  # the outbox did not apply it
    await c.handled(SimpleNamespace(message=stale))  # type: ignore[arg-type]
    assert c.position(OBS) == 0
