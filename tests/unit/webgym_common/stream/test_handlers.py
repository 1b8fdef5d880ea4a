"""handlers.py: the bus runtime applies a handler's effects — publish, refuse, remember,
then commit — waits out Kafka, and keeps or rebuilds the state; on fakes of the consumer and
producer (the real ones: tests/integration/test_replay_buffer.py, the history in
tests/integration/test_loop.py and the chaos suite)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaConnectionError, MessageSizeTooLargeError

from tests.factories import sample_event
from webgym_common.events import EpisodeScored, Event
from webgym_common.stream import handlers
from webgym_common.stream.bus import Ownership, Received
from webgym_common.stream.handlers import (
    NOTHING,
    Effects,
    Memory,
    Origin,
    Publish,
    handle_each,
    kafka_transient,
    persistently,
)
from webgym_common.topics import Topic

TP = TopicPartition("t.scored", 0)


class FakeBus:
    """Consumer and producer in one: hands out `events`, logs what is done with them; its
    first `down` publishes fail as a broker that is down would."""

    def __init__(self, events: list[Event], down: int = 0, moved: tuple[int, ...] = ()) -> None:
        self.received = [Received(TP.topic, TP.partition, i, None, e, 1000 + i)
                         for i, e in enumerate(events)]
        self.log: list[str] = []
        self.down, self.moved = down, moved
        self.consumer = self  # for `consumer.consumer.assignment()`
        self.group_id = "g"
        self.at = 0

    def assignment(self) -> set[TopicPartition]:
        return set() if self.at in self.moved else {TP}

    async def events(self) -> AsyncIterator[Received]:
        for r in self.received:
            self.at = r.offset
            yield r

    async def publish(self, topic: Topic, key: str, event: Event) -> None:
        if self.down:
            self.down -= 1
            raise KafkaConnectionError("broker down")
        self.log.append(f"publish {key}")

    async def refuse(self, received: Received, error: str) -> None:
        self.log.append(f"refuse {received.offset}: {error}")

    async def commit(self, received: Received) -> None:
        self.log.append(f"commit {received.offset}")


def scored(episode_id: str, task_id: str = "t1") -> EpisodeScored:
    return sample_event("EpisodeScored").model_copy(
        update={"episode_id": episode_id, "task_id": task_id})


async def count(event: EpisodeScored, seen: int | None, at: Origin) -> Effects[int]:
    """A toy fold: counts a task's episodes, publishes the count, refuses task `bad`."""
    if event.task_id == "bad":
        return Effects(refuse=f"{event.episode_id} at {at.offset}")
    n = (seen or 0) + 1
    return Effects([Publish(Topic.TASK_HISTORY, f"{event.task_id}={n}", event)], n)


async def run(bus: FakeBus, memory: Memory[int]) -> None:
    await handle_each(bus, bus, EpisodeScored, lambda e: e.task_id, count, memory,  # type: ignore[arg-type]
                      commit_timeout_s=1.0)


async def test_effects_are_published_then_refused_then_remembered_then_committed() -> None:
    bus, memory = FakeBus([scored("e1"), scored("e2", "bad"), scored("e3"),
                           sample_event("TaskHistory")]), Memory[int]()
    await run(bus, memory)
    assert bus.log == ["publish t1=1", "commit 0", "refuse 1: e2 at 1", "commit 1",
                       "publish t1=2", "commit 2", "commit 3"]  # another type: committed
    assert memory.get("t1") == 2 and memory.get("bad") is None


async def test_kafka_down_is_waited_out_and_a_moved_partitions_record_left_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "RETRY_MAX_S", 0.01)
    bus = FakeBus([scored("e1"), scored("e2"), scored("e3")], down=3, moved=(1,))
    await run(bus, Memory())
    # e2's partition moved away mid-batch: neither handled nor committed (its new owner's)
    assert bus.log == ["publish t1=1", "commit 0", "publish t1=2", "commit 2"]


async def test_the_state_is_rebuilt_when_the_partitions_change() -> None:
    ownership, rebuilt = Ownership("toy"), []

    async def rebuild() -> dict[str, int]:
        rebuilt.append(1)
        return {"t1": 10}

    bus = FakeBus([scored("e1"), scored("e2")])
    memory = Memory(rebuild, ownership)
    await run(bus, memory)
    assert len(rebuilt) == 1 and "publish t1=11" in bus.log and memory.get("t1") == 12
    ownership.stale = True  # a rebalance: the published state is read again
    await run(FakeBus([scored("e3")]), memory)
    assert len(rebuilt) == 2 and memory.get("t1") == 11


def test_a_bounded_memory_forgets_the_oldest_key_first() -> None:
    memory = Memory[int](bound=2)
    for key in ("a", "b", "a", "c"):
        memory.put(key, 1)
    assert memory.get("b") is None and memory.get("a") == 1 and memory.get("c") == 1
    memory.put("a", None)
    assert memory.get("a") is None


async def test_a_record_kafka_never_takes_is_raised_not_retried() -> None:
    calls = []

    async def publish() -> None:
        calls.append(1)
        raise MessageSizeTooLargeError("too big")

    with pytest.raises(MessageSizeTooLargeError):
        await persistently("publishing", publish)
    assert calls == [1]
    assert kafka_transient(KafkaConnectionError()) and kafka_transient(TimeoutError())
    assert not kafka_transient(ValueError("a bug"))


def test_nothing_changes_nothing() -> None:
    effects: Any = NOTHING
    assert effects.publish == () and effects.refuse is None
    assert effects.state is handlers.KEEP
