"""reliable.py: what `ReliableApp.each` does with each record — handle, apply its effects,
dead-letter, ack in order, one handler per turn — on fake streams (the real ones:
tests/integration/test_policy.py and the chaos suite)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.factories import sample_event
from tests.unit.webgym_common.stream.test_faust_seeks import SeekingApp
from webgym_common.config import load_settings
from webgym_common.events import CancelEpisode, Event, StepObserved
from webgym_common.stream.faust_app import EMPTY_VALUE, Undecodable, make_faust_app
from webgym_common.stream.faust_seeks import FirstReads
from webgym_common.stream.handlers import NOTHING, Effects, Origin, Publish
from webgym_common.stream.reliable import OneAtATime, ReliableApp
from webgym_common.topics import Group, Topic

SETTINGS = load_settings(kafka={"topic_prefix": "t7", "partitions": 3})


@dataclass
class Message:
    topic: str
    offset: int
    partition: int = 2
    acked: list[int] = field(default_factory=list)
    timestamp: float = 0.0  # seconds, as faust's

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass
class FakeEvent:
    value: Any
    message: Message

    def ack(self) -> None:
        self.message.acked.append(self.message.offset)


class FakeStream:
    def __init__(self, *values: Any, topic: str = "t7.observations") -> None:
        self.acked: list[int] = []
        self.items = [FakeEvent(v, Message(topic, i, acked=self.acked))
                      for i, v in enumerate(values)]

    def noack(self) -> FakeStream:
        return self

    async def events(self) -> AsyncIterator[FakeEvent]:  # as faust's StreamT.events
        for item in self.items:
            yield item


class Reliable(ReliableApp):
    """A ReliableApp on a real (unstarted) faust app whose dead letters are kept here."""

    def __init__(self) -> None:
        super().__init__(make_faust_app(SETTINGS, Group.POLICY), SETTINGS, [Topic.OBSERVATIONS])
        self.letters: list[tuple[int, str]] = []

        self.sent: list[tuple[Publish, int]] = []
        self.log: list[str] = []

        async def keep(message: Any, error: str) -> None:
            self.letters.append((message.offset, error))
            self.log.append(f"refuse {message.offset}")
        self.dead_letters = keep

    async def send(self, out: Publish, partition: int) -> bool:
        self.sent.append((out, partition))
        self.log.append(f"publish {out.key}")
        return True


class FakeTable:
    """A state table whose first `fail` writes time out (Kafka slow)."""

    def __init__(self, log: list[str], fail: int = 0) -> None:
        self.data: dict[str, str] = {}
        self.log, self.fail = log, fail

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    async def put(self, key: str, state: str | None, partition: int) -> bool:
        if self.fail:
            self.fail -= 1
            raise TimeoutError("the changelog write timed out")
        self.data[key] = state or ""
        self.log.append(f"put {key}={state}@{partition}")
        return True


async def test_each_handles_one_type_dead_letters_poison_and_acks_every_record_in_order() -> None:
    reliable, handled = Reliable(), []
    obs, chosen = sample_event("StepObserved"), sample_event("ActionChosen")
    stream = FakeStream(obs, Undecodable("bad bytes"), chosen, None, obs)

    async def handle(value: StepObserved, state: None, at: Origin) -> Effects[None]:
        handled.append((at.offset, value))
        return NOTHING

    await reliable.each(stream, StepObserved, handle)  # type: ignore[arg-type]
    assert handled == [(0, obs), (4, obs)]
    assert [offset for offset, _ in reliable.letters] == [1, 2, 3]  # ActionChosen: off topic
    errors = [error for _, error in reliable.letters]
    assert errors[0] == "bad bytes" and errors[2] == EMPTY_VALUE
    assert "ActionChosen does not belong on t7.observations" in errors[1]
    assert stream.acked == [0, 1, 2, 3, 4]


async def test_the_topics_other_event_types_are_acked_untouched() -> None:
    reliable, handled = Reliable(), []
    start, cancel = sample_event("IterationStarted"), sample_event("CancelEpisode")
    stream = FakeStream(start, cancel, topic="t7.control")

    async def handle(value: Event, state: None, at: Origin) -> Effects[None]:
        handled.append(value)
        return NOTHING

    await reliable.each(stream, CancelEpisode, handle)  # type: ignore[arg-type]
    assert handled == [cancel] and not reliable.letters and stream.acked == [0, 1]


async def test_a_handler_that_raises_dead_letters_its_record_and_the_rest_go_on() -> None:
    reliable, seen = Reliable(), []
    obs = sample_event("StepObserved")

    async def handle(value: StepObserved, state: None, at: Origin) -> Effects[None]:
        if at.offset == 1:
            raise KeyError("boom")
        seen.append(at.offset)
        return NOTHING

    async def after(event: Any) -> None:
        seen.append(f"after {event.message.offset}")

    stream = FakeStream(obs, obs, Undecodable("x"), obs)
    await reliable.each(stream, StepObserved, handle, after=after)  # type: ignore[arg-type]
    assert seen == [0, "after 0", "after 1", "after 2", 3, "after 3"]
    assert reliable.letters[0][0] == 1 and "KeyError" in reliable.letters[0][1]
    assert stream.acked == [0, 1, 2, 3]


async def test_records_of_one_key_are_handled_one_at_a_time_by_concurrent_actors() -> None:
    reliable, inside, most = Reliable(), set(), 0
    obs = sample_event("StepObserved")
    streams = [FakeStream(obs), FakeStream(obs)]  # the same record handed to two actors

    async def handle(value: StepObserved, state: None, at: Origin) -> Effects[None]:
        nonlocal most
        inside.add(at)
        most = max(most, len(inside))
        await asyncio.sleep(0.02)
        inside.discard(at)
        return NOTHING

    await asyncio.gather(*(reliable.each(s, StepObserved, handle,  # type: ignore[arg-type]
                                         turn=lambda o: o.episode_id) for s in streams))
    assert most == 1 and reliable.in_turn.busy() == 0


async def test_the_state_is_written_down_before_the_records_go_out_on_the_inputs_partition(
) -> None:
    reliable = Reliable()
    table, obs = FakeTable(reliable.log, fail=1), sample_event("StepObserved")
    chosen = sample_event("ActionChosen")

    async def handle(value: StepObserved, state: str | None, at: Origin) -> Effects[str]:
        # the second record of the key sees what the first wrote down
        return Effects([Publish(Topic.ACTIONS, value.episode_id, chosen)],
                       f"{state or ''}+{at.offset}", "odd" if at.offset else None)

    stream = FakeStream(obs, obs)
    await reliable.each(stream, StepObserved, handle,  # type: ignore[arg-type]
                        key=lambda o: o.episode_id, state=table)
    ep = obs.episode_id
    assert reliable.log == [f"put {ep}=+0@2", f"publish {ep}",  # the first put timed out once
                            "refuse 1", f"put {ep}=+0+1@2", f"publish {ep}"]
    assert [p for _, p in reliable.sent] == [2, 2] and stream.acked == [0, 1]


async def test_a_state_that_cannot_be_written_in_time_publishes_nothing() -> None:
    reliable = Reliable()
    table, obs = FakeTable(reliable.log, fail=1), sample_event("StepObserved")

    async def handle(value: StepObserved, state: str | None, at: Origin) -> Effects[str]:
        return Effects([Publish(Topic.ACTIONS, value.episode_id, value)], "decided")

    stream = FakeStream(obs)
    await reliable.each(stream, StepObserved, handle,  # type: ignore[arg-type]
                        key=lambda o: o.episode_id, state=table,
                        retry_while=lambda o: lambda next_try_in_s: False)
    assert reliable.log == [] and table.data == {} and stream.acked == [0]


async def test_first_reads_see_the_poison_at_a_partitions_start() -> None:
    # A poison record at the committed offset is the partition's start: were it hidden from
    # FirstReads, the next event would look past the start, and the seek back would
    # dead-letter the poison again.
    reliable, app = Reliable(), SeekingApp()
    reliable.first_reads = FirstReads(app)  # type: ignore[arg-type]
    reliable.first_reads.starting_at({("t7.observations", 2): 0})
    obs, handled = sample_event("StepObserved"), []

    async def handle(value: StepObserved, state: None, at: Origin) -> Effects[None]:
        handled.append(value)
        return NOTHING

    await reliable.each(FakeStream(Undecodable("bad bytes"), obs), StepObserved,  # type: ignore[arg-type]
                        handle)
    assert handled == [obs] and reliable.letters == [(0, "bad bytes")] and app.seeks == []


async def test_a_record_past_the_start_is_dropped_unacked_and_read_again() -> None:
    reliable, app = Reliable(), SeekingApp()
    reliable.first_reads = FirstReads(app)  # type: ignore[arg-type]
    reliable.first_reads.starting_at({("t7.observations", 2): 0})
    stream = FakeStream(sample_event("StepObserved"))
    stream.items[0].message.offset = 5  # the start (0) has not come: a stale batch

    async def handle(value: StepObserved, state: None, at: Origin) -> Effects[None]:
        pytest.fail("a record before its partition's start must not be handled")

    await reliable.each(stream, StepObserved, handle)  # type: ignore[arg-type]
    assert app.seeks == [(("t7.observations", 2), 0)] and stream.acked == []


async def test_handlers_of_one_key_take_turns_and_other_keys_run_alongside() -> None:
    in_turn, log = OneAtATime(), []

    async def handle(key: str, n: int) -> None:
        async with in_turn.of(key):
            log.append(f"{key}{n} in")
            await asyncio.sleep(0.05)
            log.append(f"{key}{n} out")

    await asyncio.gather(handle("a", 1), handle("a", 2), handle("b", 1))
    # a2 starts only after a1 left; b1 ran while a1 was inside
    assert log.index("a2 in") > log.index("a1 out")
    assert log.index("b1 in") < log.index("a1 out")
    assert in_turn.busy() == 0  # no lock kept for keys nobody handles


async def test_a_handler_waiting_for_its_keys_turn_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    in_turn = OneAtATime()

    async def handle(key: str) -> None:
        async with in_turn.of(key):
            await asyncio.sleep(0.02)

    with caplog.at_level(logging.INFO, logger="webgym_common.stream.reliable"):
        await asyncio.gather(handle("ep-1"), handle("ep-1"), handle("ep-2"))
    waits = [r.getMessage() for r in caplog.records if "waits for the handler" in r.getMessage()]
    assert waits == ["ep-1: waits for the handler of the same key before it"]


async def test_a_handler_that_fails_still_lets_the_next_one_in() -> None:
    in_turn = OneAtATime()
    with pytest.raises(RuntimeError):
        async with in_turn.of("a"):
            raise RuntimeError("bug")
    async with asyncio.timeout(1), in_turn.of("a"):
        pass
    assert in_turn.busy() == 0
